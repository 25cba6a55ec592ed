package filesync

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// copiesOf plans everything under dir as new.
func copiesOf(t testing.TB, dir string) []planner.Copy {
	t.Helper()
	m, err := planner.Resolve(planner.Mapping{Local: planner.LocalPath(dir), Remote: "/app"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Changes(m, planner.NewIndex(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	return p.Copies
}

type tarEntry struct {
	typ     byte
	mode    int64
	content string
	link    string
}

func readTar(t *testing.T, b []byte) (map[string]tarEntry, []string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	out := map[string]tarEntry{}
	var order []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, order
		}
		must(t, err)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d:%d %q:%q, want zero", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		if strings.HasPrefix(h.Name, "/") || strings.Contains("/"+h.Name+"/", "/../") {
			t.Errorf("unsafe name %q", h.Name)
		}
		content, _ := io.ReadAll(tr)
		out[h.Name] = tarEntry{typ: h.Typeflag, mode: h.Mode, content: string(content), link: h.Linkname}
		order = append(order, h.Name)
	}
}

// weirdNames are names that break naive shells, tars and listings.
var weirdNames = map[string]string{
	"with space":        "1",
	"new\nline":         "2",
	`quo"te's`:          "3",
	"ünïcødé-日本":        "4",
	"-starts-with-dash": "5",
	`back\slash`:        "6",
	"dir with space/" + strings.Repeat("long-name-", 12) + "/" + strings.Repeat("deeper-", 20): "7",
}

func TestWriteArchive(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, weirdNames)
	writeTree(t, dir, map[string]string{"bin/run": "#!/bin/sh", "empty/": "", "link@bin/run": ""})
	must(t, os.Chmod(filepath.Join(dir, "bin/run"), 0o755))
	must(t, os.Chmod(filepath.Join(dir, "empty"), 0o700))
	writeTree(t, dir, map[string]string{"ro/": ""})
	must(t, os.Chmod(filepath.Join(dir, "ro"), 0o555))

	copies := copiesOf(t, dir)
	// The same name twice: the last one wins.
	dup := copies[0]
	for _, c := range copies {
		if c.Name == "bin/run" {
			dup = c
		}
	}
	dupDir := dup
	dupDir.Type, dupDir.Mode = planner.TypeDir, 0o711
	copies = append([]planner.Copy{dupDir}, copies...)
	copies = append(copies, dup)

	var buf bytes.Buffer
	res, err := tarstream.Write(&buf, planner.TarFiles(copies))
	must(t, err)
	got, order := readTar(t, buf.Bytes())
	if res.Bytes != int64(buf.Len()) || res.Files != len(got) || len(res.Raced) != 0 {
		t.Errorf("result = %+v for %d bytes, %d entries", res, buf.Len(), len(got))
	}
	want := map[string]tarEntry{
		"bin/":    {typ: tar.TypeDir, mode: 0o755},
		"bin/run": {typ: tar.TypeReg, mode: 0o755, content: "#!/bin/sh"},
		"empty/":  {typ: tar.TypeDir, mode: 0o700},
		// Directories are sent writable; the apply script sets 0555 after
		// their contents.
		"ro/":  {typ: tar.TypeDir, mode: 0o755},
		"link": {typ: tar.TypeSymlink, mode: 0o777, link: "bin/run"},
	}
	for name, content := range weirdNames {
		want[name] = tarEntry{typ: tar.TypeReg, mode: 0o644, content: content}
	}
	want["dir with space/"] = tarEntry{typ: tar.TypeDir, mode: 0o755}
	want["dir with space/"+strings.Repeat("long-name-", 12)+"/"] = tarEntry{typ: tar.TypeDir, mode: 0o755}
	if len(got) != len(want) {
		t.Errorf("got %d entries %q, want %d", len(got), order, len(want))
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%q = %+v, want %+v", name, g, w)
		}
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Errorf("entries not sorted: %q before %q", order[i-1], order[i])
		}
	}
	if sum, _ := hashFile(filepath.Join(dir, "bin/run")); res.Sums["bin/run"] == nil || *res.Sums["bin/run"] != *sum {
		t.Errorf("sum of bin/run not recorded")
	}
}

func TestWriteArchiveSizeRace(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"grew": "0123456789", "shrank": "0123456789", "gone": "x", "same": "s"})
	copies := copiesOf(t, dir)
	must(t, os.WriteFile(filepath.Join(dir, "grew"), []byte("0123456789abcdef"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "shrank"), []byte("01"), 0o644))
	must(t, os.Remove(filepath.Join(dir, "gone")))

	var buf bytes.Buffer
	res, err := tarstream.Write(&buf, planner.TarFiles(copies))
	must(t, err)
	got, _ := readTar(t, buf.Bytes())
	if _, ok := got["gone"]; ok {
		t.Error("vanished file archived")
	}
	for _, name := range []string{"grew", "shrank", "gone"} {
		if _, ok := res.Raced[name]; !ok {
			t.Errorf("%s not marked raced", name)
		}
	}
	if _, ok := res.Raced["same"]; ok {
		t.Error("unchanged file marked raced")
	}
	if got["same"].content != "s" {
		t.Errorf("same = %+v", got["same"])
	}
}

func TestStreamArchiveClosedEarly(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"big": strings.Repeat("x", 1<<20)})
	r, wait := tarstream.Stream(planner.TarFiles(copiesOf(t, dir)), tarstream.Options{})
	r.Close() // the consumer gave up: the writer must not block
	if _, err := wait(); err == nil {
		t.Fatal("want an error from a closed pipe")
	}
}

func BenchmarkArchive(b *testing.B) {
	dir := b.TempDir()
	for i := range 1000 {
		p := filepath.Join(dir, "d"+string(rune('a'+i%10)), "f"+string(rune('a'+i/10%26))+string(rune('a'+i/260)))
		must2(b, os.MkdirAll(filepath.Dir(p), 0o755))
		must2(b, os.WriteFile(p, bytes.Repeat([]byte("x"), 2048), 0o644))
	}
	copies := copiesOf(b, dir)
	b.ResetTimer()
	var n int64
	for b.Loop() {
		r, wait := tarstream.Stream(planner.TarFiles(copies), tarstream.Options{})
		c, err := io.Copy(io.Discard, r)
		r.Close()
		if _, werr := wait(); err != nil || werr != nil {
			b.Fatal(err, werr)
		}
		n = c
	}
	b.SetBytes(n)
}
