package registrytest

import (
	"archive/tar"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestNewBasicAuth(t *testing.T) {
	r := NewBasicAuth(t, "alice", "s3cret")
	if d := r.PushRandom(t, "app:dev"); len(d) != len("sha256:")+64 {
		t.Fatalf("digest = %q", d)
	}
	before := r.Refused()
	resp, err := http.Head("http://" + r.Host + "/v2/app/manifests/dev")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || r.Refused() != before+1 {
		t.Errorf("anonymous HEAD: status %d, refused %d -> %d; want 401 and one more refusal", resp.StatusCode, before, r.Refused())
	}
}

func TestAppendFile(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(reg)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := name.ParseReference(host+"/base:1", name.Insecure)
	if err := remote.Write(base, img); err != nil {
		t.Fatal(err)
	}
	d, err := AppendFile(context.Background(), host+"/base:1", host+"/app:dev", "/app/server", []byte("binary"))
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(host+"/app:dev", name.Insecure)
	got, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	if gd, _ := got.Digest(); gd.String() != d {
		t.Fatalf("digest %s, AppendFile said %s", gd, d)
	}
	layers, _ := got.Layers()
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if h.Name == "app/server" {
			b, _ := io.ReadAll(tr)
			if string(b) != "binary" || h.Mode != 0o755 {
				t.Fatalf("app/server: %q mode %o", b, h.Mode)
			}
		}
	}
	if strings.Join(names, ",") != "app/,app/server" {
		t.Fatalf("layer holds %q", names)
	}
}
