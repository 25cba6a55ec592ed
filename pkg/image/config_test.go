package image

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func imageWithEntrypoint(t *testing.T, ep, cmd []string) v1.Image {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, v1.Config{Entrypoint: ep, Cmd: cmd}); err != nil {
		t.Fatal(err)
	}
	return img
}

func TestEntrypoint(t *testing.T) {
	reg := newTestRegistry(t, nil)
	push := func(repoTag string, x any) {
		t.Helper()
		ref, err := name.ParseReference(reg.push + "/" + repoTag)
		if err != nil {
			t.Fatal(err)
		}
		switch x := x.(type) {
		case v1.Image:
			err = remote.Write(ref, x)
		case v1.ImageIndex:
			err = remote.WriteIndex(ref, x)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	push("single:dev", imageWithEntrypoint(t, []string{"/server"}, []string{"--port", "80"}))
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: imageWithEntrypoint(t, []string{"/wrong"}, nil), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: other}}},
		mutate.IndexAddendum{Add: imageWithEntrypoint(t, []string{"/native"}, []string{"run"}), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)
	push("multi:dev", idx)
	r := newTestResolver(t)
	for _, tc := range []struct{ image, ep, cmd string }{
		{reg.host + "/single:dev", "/server", "--port 80"},
		{reg.host + "/multi:dev", "/native", "run"},
	} {
		ep, cmd, err := r.Entrypoint(context.Background(), tc.image)
		if err != nil || !slices.Equal(ep, []string{tc.ep}) || strings.Join(cmd, " ") != tc.cmd {
			t.Errorf("Entrypoint(%s) = %q, %q, %v; want [%s], %q", tc.image, ep, cmd, err, tc.ep, tc.cmd)
		}
	}
	if _, _, err := r.Entrypoint(context.Background(), reg.host+"/missing:dev"); err == nil {
		t.Error("Entrypoint of a missing image: no error")
	}
}
