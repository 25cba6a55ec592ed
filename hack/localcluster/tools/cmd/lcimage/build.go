package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// buildOptions says which image to build and from which host files.
type buildOptions struct {
	Kind    string // app, app-gnu, app-notar, app-nodd, app-nonroot, distroless or pause
	Marker  string // content of /etc/livesync-build; empty means no such file
	Busybox string // static busybox binary for the app kinds
	Pause   string // pause binary for the pause kind
	// Broken pushes only the manifest (its config and marker layer never reach the registry):
	// the tag resolves to a digest, but every pull of it fails, as a half-pushed image does.
	Broken bool
}

const (
	pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// sleepLoop keeps PID 1 alive and ends at once on TERM, so pods stop without the grace period.
	sleepLoop = `trap "exit 0" TERM; while :; do sleep 1; done`
	nonroot   = 1000
	// distrolessUser is the uid:gid of distroless's "nonroot" images.
	distrolessUser = 65532
	// notarShell is the sh of app-notar, app-nodd and app-gnu: Debian's dash, from the essential
	// package dash.
	notarShell = "/bin/dash"
)

// gnuTools are the host's GNU programs that app-gnu holds beside dash: what the remote scripts
// (pkg/remote/scripts) and the e2e tests call, from coreutils, tar, findutils and gzip. No
// busybox: every tool the scripts run is the GNU one, as in a Debian-based image.
var gnuTools = []string{
	"cat", "chmod", "chown", "cp", "cut", "date", "dd", "head", "id", "ln", "ls", "md5sum", "mkdir",
	"mktemp", "mv", "readlink", "rm", "rmdir", "sha256sum", "sleep", "stat", "tail", "touch", "wc",
	"tar", "find", "xargs", "gzip",
	// Not GNU: inotify-tools' inotifywait, which Debian-based dev images often hold and sync-back
	// runs as its trigger where an image has it (pkg/remote/scripts/watch.sh).
	"inotifywait",
}

// applets lists, per image kind, the busybox applets it leaves out. Without tar or dd, no busybox
// shell either: each would run the missing applet (FEATURE_SH_STANDALONE). app-nodd has tar but no
// dd, which the stream's loop needs: syncs into it fall back to an exec per batch.
var applets = map[string][]string{
	"app-notar": {"tar", "sh", "ash", "hush"},
	"app-nodd":  {"dd", "sh", "ash", "hush"},
}

// epoch is every timestamp in the images: a rebuild from the same inputs has the same digest.
var epoch = time.Unix(0, 0).UTC()

// entry is one file of a layer.
type entry struct {
	name     string // without leading slash; directories without trailing slash
	typ      byte
	mode     int64
	uid, gid int
	link     string
	data     []byte
}

func dir(name string, mode int64, uid int) entry {
	return entry{name: name, typ: tar.TypeDir, mode: mode, uid: uid, gid: uid}
}

func file(name string, mode int64, data []byte) entry {
	return entry{name: name, typ: tar.TypeReg, mode: mode, data: data}
}

// buildAndPush builds the image o describes and pushes it to ref; it returns the manifest digest.
func buildAndPush(ctx context.Context, ref name.Reference, o buildOptions) (v1.Hash, error) {
	img, err := buildImage(o)
	if err != nil {
		return v1.Hash{}, err
	}
	push := remote.Write
	if o.Broken {
		push = func(ref name.Reference, img v1.Image, opts ...remote.Option) error {
			return remote.Put(ref, img, opts...)
		}
	}
	if err := push(ref, img, remote.WithContext(ctx)); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %q: %w", ref, err)
	}
	return img.Digest()
}

// buildImage assembles the image: one root filesystem layer, plus a marker layer when o.Marker is set
// so the base layer stays shared between rebuilds.
func buildImage(o buildOptions) (v1.Image, error) {
	cfg := v1.Config{Env: []string{pathEnv}, WorkingDir: "/"}
	var files []entry
	switch o.Kind {
	case "app", "app-notar", "app-nodd", "app-nonroot":
		var err error
		if files, err = busyboxFiles(o.Busybox, applets[o.Kind]); err != nil {
			return nil, err
		}
		if o.Kind == "app-notar" || o.Kind == "app-nodd" {
			// Debian's busybox runs its own applets from sh even without links (FEATURE_SH_STANDALONE),
			// so its sh would still find tar or dd: this image's sh is dash.
			dash, err := dynamicFiles(notarShell, "bin/sh")
			if err != nil {
				return nil, err
			}
			files = append(files, dash...)
		}
		cfg.Entrypoint = []string{"/bin/sh", "-c", sleepLoop}
		if o.Kind == "app-nonroot" {
			files = append(files, dir("app-root-owned", 0o755, 0), dir("home/app", 0o755, nonroot))
			cfg.User = fmt.Sprintf("%d:%d", nonroot, nonroot)
			cfg.WorkingDir = "/home/app"
			cfg.Env = append(cfg.Env, "HOME=/home/app")
		} else {
			files = append(files, dir("app", 0o755, 0))
			cfg.WorkingDir = "/app"
		}
	case "app-gnu":
		var err error
		if files, err = gnuFiles(); err != nil {
			return nil, err
		}
		files = append(files, dir("app", 0o755, 0))
		cfg.Entrypoint = []string{"/bin/sh", "-c", sleepLoop}
		cfg.WorkingDir = "/app"
	case "distroless":
		// A static binary and nothing else, as USER 65532 (distroless's nonroot): no sh, no tar.
		// Its /app belongs to that user; /app-root-owned to root.
		bin, err := os.ReadFile(o.Pause)
		if err != nil {
			return nil, fmt.Errorf("reading the pause binary: %w", err)
		}
		files = []entry{file("server", 0o755, bin), dir("app", 0o755, distrolessUser), dir("app-root-owned", 0o755, 0),
			dir("home/nonroot", 0o700, distrolessUser), dir("tmp", 0o1777, 0)}
		cfg.Entrypoint = []string{"/server"}
		cfg.User = fmt.Sprintf("%d:%d", distrolessUser, distrolessUser)
		cfg.WorkingDir = "/app"
	case "pause":
		bin, err := os.ReadFile(o.Pause)
		if err != nil {
			return nil, fmt.Errorf("reading the pause binary: %w", err)
		}
		files = []entry{file("pause", 0o755, bin)}
		cfg.Entrypoint = []string{"/pause"}
	default:
		return nil, fmt.Errorf("unknown image kind %q: want app, app-gnu, app-notar, app-nodd, app-nonroot, distroless or pause", o.Kind)
	}

	base, err := mutate.ConfigFile(mutate.MediaType(empty.Image, types.OCIManifestSchema1), &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config:       cfg,
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, fmt.Errorf("writing the image config: %w", err)
	}
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	layers := [][]entry{files}
	if o.Marker != "" {
		layers = append(layers, []entry{dir("etc", 0o755, 0), file("etc/livesync-build", 0o644, []byte(o.Marker+"\n"))})
	}
	adds := make([]mutate.Addendum, 0, len(layers))
	for _, l := range layers {
		layer, err := newLayer(l)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "lcimage build --kind " + o.Kind},
		})
	}
	img, err := mutate.Append(base, adds...)
	if err != nil {
		return nil, fmt.Errorf("adding layers: %w", err)
	}
	return img, nil
}

// busyboxFiles lays out a minimal root: busybox, one symlink per applet at the path busybox itself
// names (less tar and the busybox shells when noTar), users root and app (1000), and the usual
// top-level directories.
func busyboxFiles(busybox string, without []string) ([]entry, error) {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("reading busybox (apt-get install busybox-static): %w", err)
	}
	out, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("listing the applets of %q: %w", busybox, err)
	}
	files := append(rootFiles(), file("bin/busybox", 0o755, bin))
	known := map[string]bool{}
	for _, f := range files {
		known[f.name] = true
	}
	skip := map[string]bool{"linuxrc": true} // an initramfs init, of no use here
	for _, a := range without {
		skip[a] = true
	}
	for _, applet := range strings.Fields(string(out)) {
		applet = strings.TrimPrefix(applet, "/")
		if known[applet] || skip[path.Base(applet)] {
			continue
		}
		known[applet] = true
		files = append(files, entry{name: applet, typ: tar.TypeSymlink, mode: 0o777, link: "/bin/busybox"})
	}
	return files, nil
}

// rootFiles are the usual top-level directories and users root and app (1000) of the app kinds.
func rootFiles() []entry {
	return []entry{
		dir("bin", 0o755, 0), dir("dev", 0o755, 0), dir("etc", 0o755, 0), dir("home", 0o755, 0),
		dir("proc", 0o555, 0), dir("root", 0o700, 0), dir("sbin", 0o755, 0), dir("sys", 0o555, 0),
		dir("tmp", 0o1777, 0), dir("usr", 0o755, 0), dir("usr/bin", 0o755, 0), dir("usr/sbin", 0o755, 0),
		dir("var", 0o755, 0), dir("var/tmp", 0o1777, 0),
		file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")),
		file("etc/group", 0o644, []byte("root:x:0:\napp:x:1000:\nnogroup:x:65534:\n")),
	}
}

// gnuFiles lays out app-gnu's root: rootFiles, dash as /bin/sh, and gnuTools in /bin, each
// with the libraries it needs, from this host (Debian: apt-get install coreutils tar findutils
// gzip inotify-tools).
func gnuFiles() ([]entry, error) {
	files := rootFiles()
	seen := map[string]bool{}
	for _, f := range files {
		seen[f.name] = true
	}
	add := func(es []entry) {
		for _, e := range es {
			if !seen[e.name] {
				seen[e.name] = true
				files = append(files, e)
			}
		}
	}
	for _, as := range []string{"bin/sh", "bin/dash"} {
		es, err := dynamicFiles(notarShell, as)
		if err != nil {
			return nil, err
		}
		add(es)
	}
	for _, tool := range gnuTools {
		host, err := exec.LookPath(path.Join("/usr/bin", tool))
		if err != nil {
			if host, err = exec.LookPath(path.Join("/bin", tool)); err != nil {
				return nil, fmt.Errorf("GNU %s not found on this host (apt-get install coreutils tar findutils gzip inotify-tools): %w", tool, err)
			}
		}
		es, err := dynamicFiles(host, "bin/"+tool)
		if err != nil {
			return nil, err
		}
		add(es)
	}
	return files, nil
}

// newLayer writes files as a gzipped tar layer, adding missing parent directories (0755 root).
// Entries are sorted so parents come first and the bytes do not depend on the order of files.
func newLayer(files []entry) (v1.Layer, error) {
	have := map[string]bool{}
	for _, f := range files {
		have[f.name] = true
	}
	for _, f := range files {
		for d := path.Dir(f.name); d != "." && !have[d]; d = path.Dir(d) {
			have[d] = true
			files = append(files, dir(d, 0o755, 0))
		}
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Typeflag: f.typ,
			Name:     f.name,
			Linkname: f.link,
			Mode:     f.mode,
			Uid:      f.uid,
			Gid:      f.gid,
			Size:     int64(len(f.data)),
			ModTime:  epoch,
		}
		if f.typ == tar.TypeDir {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing tar header of %q: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("writing %q: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// dynamicFiles returns the dynamically linked program bin at path as, with its ELF interpreter and
// the libraries it needs at the paths they have on this host.
func dynamicFiles(bin, as string) ([]entry, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", bin, err)
	}
	defer f.Close()
	var interp string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return nil, fmt.Errorf("reading the interpreter of %q: %w", bin, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("reading the libraries of %q: %w", bin, err)
	}
	paths := map[string]string{bin: as}
	if interp != "" {
		paths[interp] = strings.TrimPrefix(interp, "/")
	}
	// The libraries the libraries need too (libselinux needs libpcre2): the image has no
	// other copy of them.
	for len(libs) > 0 {
		lib := libs[0]
		libs = libs[1:]
		found := ""
		for _, d := range libDirs {
			if _, err := os.Stat(path.Join(d, lib)); err == nil {
				found = path.Join(d, lib)
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("library %q of %q not found in %v", lib, bin, libDirs)
		}
		if _, ok := paths[found]; ok {
			continue
		}
		paths[found] = strings.TrimPrefix(found, "/")
		lf, err := elf.Open(found)
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", found, err)
		}
		more, err := lf.ImportedLibraries()
		lf.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the libraries of %q: %w", found, err)
		}
		libs = append(libs, more...)
	}
	var out []entry
	for host, img := range paths {
		data, err := os.ReadFile(host) // follows symlinks: the image gets plain files
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", host, err)
		}
		out = append(out, file(img, 0o755, data))
	}
	return out, nil
}

// libDirs are where the ELF interpreter looks without an ld.so.cache, in its order.
var libDirs = []string{"/lib/" + multiarch(), "/usr/lib/" + multiarch(), "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

func multiarch() string {
	switch runtime.GOARCH {
	case "arm64":
		return "aarch64-linux-gnu"
	default:
		return "x86_64-linux-gnu"
	}
}
