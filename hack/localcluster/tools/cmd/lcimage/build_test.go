package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func needBusybox(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("needs /bin/busybox (Debian busybox-static)")
	}
}

// files lists the image's flattened filesystem by path.
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = h
	}
}

// neededLibs lists what each ELF file of the image needs (DT_NEEDED), by path.
func neededLibs(t *testing.T, img v1.Image) map[string][]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string][]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			continue // not ELF
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		out[h.Name] = libs
	}
}

func TestBuildImage(t *testing.T) {
	needBusybox(t)
	build := func(kind, marker string) (v1.Image, v1.Hash) {
		t.Helper()
		img, err := buildImage(buildOptions{Kind: kind, Marker: marker, Busybox: "/bin/busybox"})
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return img, d
	}

	app, d1 := build("app", "")
	if _, d2 := build("app", ""); d1 != d2 {
		t.Errorf("rebuild changed the digest: %s then %s", d1, d2)
	}
	marked, d3 := build("app", "one")
	if d3 == d1 {
		t.Error("a marker did not change the digest")
	}
	if _, d4 := build("app", "two"); d4 == d3 {
		t.Error("a new marker did not change the digest")
	}

	for _, tc := range []struct {
		name    string
		img     v1.Image
		present []string
		absent  []string
	}{
		{"app", app, []string{"bin/sh", "bin/tar", "usr/bin/sha256sum", "usr/bin/md5sum", "app"}, []string{"etc/livesync-build"}},
		{"marker", marked, []string{"etc/livesync-build", "bin/tar"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := files(t, tc.img)
			for _, p := range tc.present {
				if fs[p] == nil {
					t.Errorf("%s missing", p)
				}
			}
			for _, p := range tc.absent {
				if fs[p] != nil {
					t.Errorf("%s present", p)
				}
			}
		})
	}

	notar, _ := build("app-notar", "")
	fs := files(t, notar)
	if fs["bin/tar"] != nil || fs["bin/ash"] != nil || fs["bin/sh"] == nil || fs["bin/sh"].Typeflag != tar.TypeReg {
		t.Errorf("app-notar: want sh (dash) without tar and busybox shells, got sh=%v tar=%v ash=%v",
			fs["bin/sh"] != nil, fs["bin/tar"] != nil, fs["bin/ash"] != nil)
	}

	nodd, _ := build("app-nodd", "")
	fs = files(t, nodd)
	if fs["bin/dd"] != nil || fs["bin/ash"] != nil || fs["bin/tar"] == nil || fs["bin/sh"] == nil || fs["bin/sh"].Typeflag != tar.TypeReg {
		t.Errorf("app-nodd: want sh (dash) and tar without dd and busybox shells, got sh=%v tar=%v dd=%v ash=%v",
			fs["bin/sh"] != nil, fs["bin/tar"] != nil, fs["bin/dd"] != nil, fs["bin/ash"] != nil)
	}

	gnu, _ := build("app-gnu", "")
	fs = files(t, gnu)
	if fs["bin/busybox"] != nil || fs["bin/sh"] == nil || fs["bin/sh"].Typeflag != tar.TypeReg || fs["app"] == nil {
		t.Errorf("app-gnu: want sh (dash), /app and no busybox, got sh=%v busybox=%v app=%v",
			fs["bin/sh"] != nil, fs["bin/busybox"] != nil, fs["app"] != nil)
	}
	for _, tool := range gnuTools {
		if h := fs["bin/"+tool]; h == nil || h.Typeflag != tar.TypeReg {
			t.Errorf("app-gnu: bin/%s missing or not a file", tool)
		}
	}
	// Every library any of its programs or libraries needs is in it.
	for name, libs := range neededLibs(t, gnu) {
		for _, lib := range libs {
			found := false
			for _, d := range []string{"lib/" + multiarch(), "usr/lib/" + multiarch(), "lib64", "usr/lib64", "lib", "usr/lib"} {
				found = found || fs[d+"/"+lib] != nil
			}
			if !found {
				t.Errorf("app-gnu: %s needs %s, which is not in the image", name, lib)
			}
		}
	}

	pause := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(pause, []byte("\x7fELF static"), 0o755); err != nil {
		t.Fatal(err)
	}
	distroless, err := buildImage(buildOptions{Kind: "distroless", Pause: pause})
	if err != nil {
		t.Fatal(err)
	}
	if cf, err := distroless.ConfigFile(); err != nil || cf.Config.User != "65532:65532" || cf.Config.Entrypoint[0] != "/server" {
		t.Errorf("distroless config = %+v (%v), want user 65532:65532 running /server", cf, err)
	}
	fs = files(t, distroless)
	for _, p := range []string{"bin/sh", "bin/tar", "bin/busybox"} {
		if fs[p] != nil {
			t.Errorf("distroless: %s present", p)
		}
	}
	if h := fs["app"]; h == nil || h.Uid != 65532 || h.Gid != 65532 {
		t.Errorf("distroless app = %+v, want a dir of 65532:65532", h)
	}
	if h := fs["app-root-owned"]; h == nil || h.Uid != 0 {
		t.Errorf("distroless app-root-owned = %+v, want a dir of root", h)
	}

	nonroot, _ := build("app-nonroot", "")
	cf, err := nonroot.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "1000:1000" {
		t.Errorf("app-nonroot user = %q, want 1000:1000", cf.Config.User)
	}
	fs = files(t, nonroot)
	if h := fs["app-root-owned"]; h == nil || h.Uid != 0 || h.Mode != 0o755 {
		t.Errorf("app-root-owned = %+v, want a 0755 dir of root", h)
	}
	if h := fs["home/app"]; h == nil || h.Uid != 1000 || h.Gid != 1000 {
		t.Errorf("home/app = %+v, want a dir of 1000:1000", h)
	}
	if h := fs["tmp"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp = %+v, want mode 1777", h)
	}
}

func TestBuildPushDigest(t *testing.T) {
	needBusybox(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	var built, got bytes.Buffer
	if err := run(ctx, []string{"build", "--registry", host, "app:dev", "--kind", "app", "--marker", "x"}, &built, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, []string{"digest", host + "/app:dev"}, &got, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(built.String(), "sha256:") || built.String() != got.String() {
		t.Errorf("build printed %q, digest printed %q", built.String(), got.String())
	}
}
