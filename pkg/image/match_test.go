package image

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pushIndex pushes a random two-platform index as repo:tag and returns it.
func (r *testRegistry) pushIndex(t *testing.T, repoTag string) v1.ImageIndex {
	t.Helper()
	idx, err := random.Index(256, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.push + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	return idx
}

func configDigest(t *testing.T, img v1.Image) string {
	t.Helper()
	c, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return c.String()
}

func TestDescribeAndMatchSingleImage(t *testing.T) {
	reg := newTestRegistry(t, nil)
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(reg.push + "/app:dev")
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	manifest, config := digestOf(t, img), configDigest(t, img)

	r := newTestResolver(t)
	d, err := r.Describe(context.Background(), mustParse(t, reg.host+"/app:dev"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Index != "" || len(d.Manifests) != 1 || d.Manifests[0] != manifest || len(d.Configs) != 1 || d.Configs[0] != config {
		t.Fatalf("Describe = %+v, want manifest %s config %s and no index", d, manifest, config)
	}
	for running, want := range map[string]string{manifest: MatchManifest, config: MatchConfig, digestA: "", "": ""} {
		if got := d.Match(running); got != want {
			t.Errorf("Match(%q) = %q, want %q", running, got, want)
		}
	}
	if r.IsIndex(manifest) {
		t.Errorf("IsIndex(%s) before any Resolve", manifest)
	}
}

func TestDescribeAndMatchIndex(t *testing.T) {
	reg := newTestRegistry(t, nil)
	idx := reg.pushIndex(t, "multi:dev")
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	r := newTestResolver(t)
	ref := mustParse(t, reg.host+"/multi:dev")
	head, err := r.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if head != digestOf(t, idx) || !r.IsIndex(head) {
		t.Fatalf("Resolve = %s (IsIndex %v), want the index digest %s", head, r.IsIndex(head), digestOf(t, idx))
	}
	d, err := r.Describe(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if d.Index != head || len(d.Manifests) != len(im.Manifests) || len(d.Configs) != len(im.Manifests) {
		t.Fatalf("Describe = %+v, want index %s with %d manifests and configs", d, head, len(im.Manifests))
	}
	if got := d.Match(head); got != MatchIndex {
		t.Errorf("Match(index) = %q", got)
	}
	for _, m := range im.Manifests {
		child, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Match(m.Digest.String()); got != MatchManifest {
			t.Errorf("Match(platform manifest %s) = %q", m.Digest, got)
		}
		if got := d.Match(configDigest(t, child)); got != MatchConfig {
			t.Errorf("Match(config of %s) = %q", m.Digest, got)
		}
	}
}

func TestServes(t *testing.T) {
	reg := newTestRegistry(t, nil)
	old := reg.pushImage(t, "app:dev")
	reg.pushImage(t, "app:dev") // the tag moves; the old manifest stays in the repository
	r := newTestResolver(t)
	ref := mustParse(t, reg.host+"/app:dev")
	ctx := context.Background()

	if ok, err := r.Serves(ctx, ref, old); !ok || err != nil {
		t.Fatalf("Serves(old digest) = %v, %v; want true", ok, err)
	}
	if ok, err := r.Serves(ctx, ref, digestA); ok || err != nil {
		t.Fatalf("Serves(never pushed) = %v, %v; want false, nil", ok, err)
	}
	req, err := http.NewRequest(http.MethodDelete, "http://"+reg.push+"/v2/app/manifests/"+old, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("deleting %s: %s", old, resp.Status)
	}
	if ok, err := r.Serves(ctx, ref, old); ok || err != nil {
		t.Fatalf("Serves(deleted digest) = %v, %v; want false, nil", ok, err)
	}
}

func TestServesUnreachable(t *testing.T) {
	reg := newTestRegistry(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	})
	ok, err := newTestResolver(t).Serves(context.Background(), mustParse(t, reg.host+"/app:dev"), digestA)
	if ok || !errors.Is(err, ErrRegistryUnavailable) {
		t.Fatalf("Serves on a 503 = %v, %v; want an ErrRegistryUnavailable error, not a verdict", ok, err)
	}
}

func TestIsBareImageID(t *testing.T) {
	for id, want := range map[string]bool{
		digestA:                              true,
		"docker-pullable://app@" + digestA:   false,
		"127.0.0.1:5000/app@" + digestA:      false,
		"docker://" + digestA:                true,
		"":                                   false,
		"sha256:nothex":                      false,
		"docker.io/library/nginx@" + digestB: false,
	} {
		if got := IsBareImageID(id); got != want {
			t.Errorf("IsBareImageID(%q) = %v, want %v", id, got, want)
		}
	}
}
