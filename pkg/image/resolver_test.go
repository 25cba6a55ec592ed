package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// testRegistry is one in-process registry served twice: raw, for the test to push
// to, and through wrap, for the Resolver under test.
type testRegistry struct {
	push string // host:port of the raw server
	host string // host:port of the wrapped server
}

func newTestRegistry(t *testing.T, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	push := httptest.NewServer(reg)
	t.Cleanup(push.Close)
	if wrap == nil {
		wrap = func(h http.Handler) http.Handler { return h }
	}
	srv := httptest.NewServer(wrap(reg))
	t.Cleanup(srv.Close)
	return &testRegistry{push: hostOf(push), host: hostOf(srv)}
}

func hostOf(s *httptest.Server) string { return s.Listener.Addr().String() }

// pushImage pushes a fresh random image as repo:tag and returns its digest.
func (r *testRegistry) pushImage(t *testing.T, repoTag string) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.push + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	return digestOf(t, img)
}

func digestOf(t *testing.T, x interface{ Digest() (v1.Hash, error) }) string {
	t.Helper()
	d, err := x.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// anonymous stands in for the developer's docker config, which tests must not read.
var anonymous = withKeychain(authn.NewMultiKeychain())

func newTestResolver(t *testing.T, opts ...Option) *Resolver {
	t.Helper()
	r, err := NewResolver(append([]Option{anonymous}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func resolve(t *testing.T, r *Resolver, image string) (string, error) {
	t.Helper()
	return r.Resolve(context.Background(), mustParse(t, image))
}

func TestResolveFollowsTheTag(t *testing.T) {
	reg := newTestRegistry(t, nil)
	r := newTestResolver(t)
	first := reg.pushImage(t, "app:dev")

	got, err := resolve(t, r, reg.host+"/app:dev")
	if err != nil || got != first {
		t.Fatalf("Resolve = %q, %v; want %q", got, err, first)
	}

	second := reg.pushImage(t, "app:dev")
	// The same Resolver must see the moved tag: refresh --watch polls with one.
	got, err = resolve(t, r, reg.host+"/app:dev@"+first)
	if err != nil || got != second {
		t.Fatalf("Resolve after the tag moved = %q, %v; want %q", got, err, second)
	}
}

func TestResolveImplicitLatest(t *testing.T) {
	reg := newTestRegistry(t, nil)
	want := reg.pushImage(t, "app:latest")
	if got, err := resolve(t, newTestResolver(t), reg.host+"/app"); err != nil || got != want {
		t.Fatalf("Resolve = %q, %v; want %q", got, err, want)
	}
}

func TestResolveIndexDigest(t *testing.T) {
	reg := newTestRegistry(t, nil)
	idx, err := random.Index(256, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(reg.push + "/multi:dev")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	want := digestOf(t, idx)
	if got, err := resolve(t, newTestResolver(t), reg.host+"/multi:dev"); err != nil || got != want {
		t.Fatalf("Resolve = %q, %v; want the index digest %q", got, err, want)
	}
}

func TestResolveErrors(t *testing.T) {
	reg := newTestRegistry(t, nil)
	reg.pushImage(t, "app:dev")
	r := newTestResolver(t)

	_, err := resolve(t, r, reg.host+"/app:nope")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `tag "nope" not found in `+reg.host+"/app") {
		t.Errorf("missing tag: %v, want ErrNotFound naming the tag", err)
	}
	_, err = resolve(t, r, reg.host+"/app@"+digestA)
	if !errors.Is(err, ErrNoTag) {
		t.Errorf("digest-only: %v, want ErrNoTag", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Resolve(ctx, mustParse(t, reg.host+"/app:dev")); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v, want context.Canceled", err)
	}
}

func TestResolveTimeout(t *testing.T) {
	reg := newTestRegistry(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	})
	_, err := resolve(t, newTestResolver(t, WithTimeout(50*time.Millisecond)), reg.host+"/app:dev")
	if !errors.Is(err, ErrRegistryUnavailable) || !strings.Contains(err.Error(), "did not answer within 50ms") {
		t.Fatalf("Resolve = %v, want ErrRegistryUnavailable after 50ms", err)
	}
}

// requestLog records one word (method, scheme) per request, from handler goroutines.
type requestLog struct {
	mu    sync.Mutex
	words []string
}

func (l *requestLog) add(w string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.words = append(l.words, w)
}

func (l *requestLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.words, ",")
}

// only tells whether every request recorded was w.
func (l *requestLog) only(w string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !slices.ContainsFunc(l.words, func(x string) bool { return x != w })
}

func TestResolveHeadFallback(t *testing.T) {
	tests := []struct {
		name string
		head http.HandlerFunc // answers manifest HEADs; nil lets the registry answer
		want string           // manifest request methods
	}{
		{"HEAD works", nil, "HEAD"},
		{"HEAD not allowed", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusMethodNotAllowed)
		}, "HEAD,GET"},
		{"HEAD without Docker-Content-Digest", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusOK)
		}, "HEAD,GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log requestLog
			reg := newTestRegistry(t, func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.Contains(r.URL.Path, "/manifests/") {
						log.add(r.Method)
						if r.Method == http.MethodHead && tt.head != nil {
							tt.head(w, r)
							return
						}
					}
					next.ServeHTTP(w, r)
				})
			})
			want := reg.pushImage(t, "app:dev")
			if got, err := resolve(t, newTestResolver(t), reg.host+"/app:dev"); err != nil || got != want {
				t.Fatalf("Resolve = %q, %v; want %q", got, err, want)
			}
			if got := log.String(); got != tt.want {
				t.Errorf("manifest requests = %s, want %s", got, tt.want)
			}
		})
	}
}

// tokenAuth puts the registry behind Docker-style token auth: 401 with a Bearer
// challenge, and a token endpoint that wants user:pass.
func tokenAuth(user, pass string, tokens *int) func(http.Handler) http.Handler {
	var mu sync.Mutex
	return func(next http.Handler) http.Handler {
		mux := http.NewServeMux()
		mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}`, http.StatusUnauthorized)
				return
			}
			mu.Lock()
			*tokens++
			mu.Unlock()
			if err := json.NewEncoder(w).Encode(map[string]string{"token": "t0ken"}); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		})
		mux.HandleFunc("/v2/", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer t0ken" {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/token",service="test"`, r.Host))
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
		return mux
	}
}

// staticKeychain hands out one user's credentials for one registry.
type staticKeychain struct{ registry, user, pass string }

func (k staticKeychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	if res.RegistryStr() != k.registry {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{Username: k.user, Password: k.pass}), nil
}

func TestResolveTokenAuth(t *testing.T) {
	var tokens int
	reg := newTestRegistry(t, tokenAuth("dev", "s3cret", &tokens))
	want := reg.pushImage(t, "app:dev")
	image := reg.host + "/app:dev"

	_, err := resolve(t, newTestResolver(t), image)
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), `"docker login `+reg.host+`"`) {
		t.Errorf("without credentials: %v, want ErrUnauthorized with a docker login hint", err)
	}

	r := newTestResolver(t, withKeychain(staticKeychain{reg.host, "dev", "s3cret"}))
	for range 2 {
		if got, err := resolve(t, r, image); err != nil || got != want {
			t.Fatalf("with credentials: Resolve = %q, %v; want %q", got, err, want)
		}
	}
	if tokens != 1 {
		t.Errorf("the registry issued %d tokens for 2 calls; the Resolver should reuse one", tokens)
	}

	bad := newTestResolver(t, withKeychain(staticKeychain{reg.host, "dev", "wrong"}))
	if _, err := resolve(t, bad, image); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("wrong password: %v, want ErrUnauthorized", err)
	}
}

// dialOnly makes every connection go to addr whatever host the URL names, so tests
// can address the loopback registry as a remote or private one. schemes records
// the scheme of every request that got past the Resolver's guard.
func dialOnly(addr string, base *http.Transport, schemes *requestLog) http.RoundTripper {
	tr := base.Clone()
	tr.Proxy = nil
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		schemes.add(req.URL.Scheme)
		return tr.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestPlainHTTPPolicy(t *testing.T) {
	reg := newTestRegistry(t, nil)
	want := reg.pushImage(t, "app:dev")
	_, port, _ := net.SplitHostPort(reg.host)
	base := http.DefaultTransport.(*http.Transport)

	tests := []struct {
		name     string
		host     string
		insecure []string
		refused  bool
	}{
		{"name without flag", "registry.test:" + port, nil, true},
		{"name with flag", "registry.test:" + port, []string{"registry.test:" + port}, false},
		{"name with host-only flag", "registry.test:" + port, []string{"Registry.Test"}, false},
		{"flag for another port", "registry.test:" + port, []string{"registry.test:1"}, true},
		{"RFC 1918 without flag", "10.0.0.1:" + port, nil, true},
		{"RFC 1918 with flag", "10.0.0.1:" + port, []string{"10.0.0.1:" + port}, false},
		{"*.localhost without flag", "registry.localhost:" + port, nil, true},
		{"loopback", "127.0.0.1:" + port, nil, false},
		{"other loopback address", "127.0.0.2:" + port, nil, false},
		{"localhost", "localhost:" + port, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var schemes requestLog
			r := newTestResolver(t, WithTransport(dialOnly(reg.host, base, &schemes)), WithInsecureRegistries(tt.insecure))
			got, err := resolve(t, r, tt.host+"/app:dev")
			if tt.refused {
				wantMsg := fmt.Sprintf("pass --insecure-registry %s if you trust it", tt.host)
				if !errors.Is(err, ErrInsecureRefused) || !strings.Contains(err.Error(), wantMsg) {
					t.Fatalf("Resolve = %q, %v; want ErrInsecureRefused saying %q", got, err, wantMsg)
				}
				if !schemes.only("https") {
					t.Errorf("requests sent: %s; want no plain HTTP", &schemes)
				}
				return
			}
			if err != nil || got != want {
				t.Fatalf("Resolve = %q, %v; want %q", got, err, want)
			}
		})
	}
}

func TestHTTPSOnPrivateIP(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewTLSServer(reg)
	t.Cleanup(srv.Close)
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(hostOf(srv) + "/app:dev")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(srv.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(hostOf(srv))

	tlsBase := srv.Client().Transport.(*http.Transport).Clone()
	tlsBase.TLSClientConfig.ServerName = "example.com" // in httptest's certificate
	var schemes requestLog
	r := newTestResolver(t, WithTransport(dialOnly(hostOf(srv), tlsBase, &schemes)))
	got, err := resolve(t, r, "10.0.0.1:"+port+"/app:dev")
	if want := digestOf(t, img); err != nil || got != want {
		t.Fatalf("Resolve = %q, %v; want %q", got, err, want)
	}
	if !schemes.only("https") {
		t.Errorf("requests sent: %s; want HTTPS only", &schemes)
	}
}

func TestPlainHTTPAllowed(t *testing.T) {
	r := newTestResolver(t, WithInsecureRegistries([]string{"reg.example:5000", "lab.internal", "[fd00::1]:5000"}))
	tests := []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"localhost:5000", true},
		{"LOCALHOST:5000", true},
		{"127.0.0.1:5000", true},
		{"127.9.9.9", true},
		{"[::1]:5000", true},
		{"[::1]", true},
		{"reg.example:5000", true},
		{"lab.internal:443", true},
		{"lab.internal", true},
		{"[fd00::1]:5000", true},
		{"reg.example:5001", false},
		{"reg.example", false},
		{"10.1.2.3:5000", false},
		{"192.168.1.2", false},
		{"registry.local:5000", false},
		{"foo.localhost:5000", false},
		{"localhost.example.com", false},
	}
	for _, tt := range tests {
		if got := r.plainHTTPAllowed(tt.host); got != tt.want {
			t.Errorf("plainHTTPAllowed(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

func TestNewResolverRejectsBadInsecureHosts(t *testing.T) {
	for _, h := range []string{"", "http://reg.example", "reg.example/app", "reg example"} {
		if _, err := NewResolver(WithInsecureRegistries([]string{h})); err == nil || !strings.Contains(err.Error(), "HOST:PORT") {
			t.Errorf("WithInsecureRegistries(%q): %v, want an error explaining HOST:PORT", h, err)
		}
	}
}

// basicAuth puts the registry behind HTTP basic auth.
func basicAuth(user, pass string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func pullSecret(t *testing.T, name, host, user, pass string) *corev1.Secret {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"username": user, "password": pass}}})
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "dev"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}
}

func TestKubernetesPullSecrets(t *testing.T) {
	reg := newTestRegistry(t, basicAuth("robot", "pw"))
	want := reg.pushImage(t, "app:dev")
	image := reg.host + "/app:dev"
	sa := &corev1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Name: "builder", Namespace: "dev"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "sa-cred"}},
	}
	client := fake.NewClientset(pullSecret(t, "regcred", reg.host, "robot", "pw"), pullSecret(t, "sa-cred", reg.host, "robot", "pw"), sa)

	if _, err := resolve(t, newTestResolver(t), image); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("without pull secrets: %v, want ErrUnauthorized", err)
	}
	tests := []struct {
		name, serviceAccount string
		secrets              []string
	}{
		{"imagePullSecrets", "", []string{"regcred"}},
		{"service account", "builder", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestResolver(t)
			if err := r.UseKubernetesAuth(context.Background(), client, "dev", tt.serviceAccount, tt.secrets); err != nil {
				t.Fatalf("UseKubernetesAuth: %v", err)
			}
			if got, err := resolve(t, r, image); err != nil || got != want {
				t.Fatalf("Resolve = %q, %v; want %q", got, err, want)
			}
		})
	}
}

func TestKubernetesPullSecretsForbidden(t *testing.T) {
	reg := newTestRegistry(t, nil)
	want := reg.pushImage(t, "app:dev")
	client := fake.NewClientset()
	client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "regcred", errors.New("RBAC denied"))
	})

	r := newTestResolver(t)
	warning := r.UseKubernetesAuth(context.Background(), client, "dev", "", []string{"regcred"})
	if !apierrors.IsForbidden(warning) || !strings.Contains(warning.Error(), `namespace "dev"`) {
		t.Errorf("UseKubernetesAuth = %v, want a Forbidden warning naming the namespace", warning)
	}
	if got, err := resolve(t, r, reg.host+"/app:dev"); err != nil || got != want {
		t.Fatalf("Resolve after the warning = %q, %v; want %q", got, err, want)
	}
}
