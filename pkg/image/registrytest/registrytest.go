// Package registrytest serves a real OCI registry in-process behind HTTP basic auth, for tests
// outside pkg/image that need an authenticating registry (go-containerregistry stays inside
// pkg/image). It listens on 127.0.0.1, where livesync speaks plain HTTP.
package registrytest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is a running registry that answers only requests with its user's credentials.
type Registry struct {
	// Host is the registry's host:port, as image references name it.
	Host string

	user, pass string
	mu         sync.Mutex
	refused    int
}

// NewBasicAuth starts a registry that wants user and pass (HTTP basic auth) on every request,
// and stops it when the test ends.
func NewBasicAuth(t testing.TB, user, pass string) *Registry {
	t.Helper()
	r := &Registry{user: user, pass: pass}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != user || p != pass {
			r.mu.Lock()
			r.refused++
			r.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="registrytest"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// Refused returns how many requests came without the right credentials.
func (r *Registry) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

// PushRandom pushes a fresh random image as repo:tag and returns its manifest digest.
func (r *Registry) PushRandom(t testing.TB, repoTag string) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.Host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	auth := remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass})
	if err := remote.Write(ref, img, auth); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}
