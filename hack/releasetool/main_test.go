package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestArchivesAreReproducible(t *testing.T) {
	mtime := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	build := func(t *testing.T, ext string, fileTime time.Time) []byte {
		dir := t.TempDir()
		files := map[string]os.FileMode{"kubectl-livesync": 0o700, "LICENSE": 0o600, "kubectl_complete-livesync": 0o775}
		var paths []string
		for name, mode := range files {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte("content of "+name), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, fileTime, fileTime); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		var buf bytes.Buffer
		var err error
		if ext == "zip" {
			err = writeZip(&buf, paths, mtime)
		} else {
			err = writeTarGz(&buf, paths, mtime)
		}
		if err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, ext := range []string{"tar.gz", "zip"} {
		t.Run(ext, func(t *testing.T) {
			a := build(t, ext, time.Now())
			b := build(t, ext, time.Now().Add(-time.Hour))
			if !bytes.Equal(a, b) {
				t.Fatal("same contents, different file times and directories: different archives")
			}
			got := listing(t, ext, a)
			want := "LICENSE 644 2026-12-01T00:00:00Z|kubectl-livesync 755 2026-12-01T00:00:00Z|kubectl_complete-livesync 755 2026-12-01T00:00:00Z"
			if got != want {
				t.Errorf("entries:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// listing returns "name mode mtime" of each entry, in archive order, and checks tar owners.
func listing(t *testing.T, ext string, data []byte) string {
	t.Helper()
	var out []string
	if ext == "zip" {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			out = append(out, f.Name+" "+modeString(int64(f.Mode().Perm()))+" "+f.Modified.UTC().Format(time.RFC3339))
		}
		return strings.Join(out, "|")
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if gz.Name != "" || !gz.ModTime.IsZero() {
		t.Errorf("gzip header carries name %q, time %v", gz.Name, gz.ModTime)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d:%d %q:%q", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		out = append(out, h.Name+" "+modeString(h.Mode)+" "+h.ModTime.UTC().Format(time.RFC3339))
	}
	return strings.Join(out, "|")
}

func modeString(m int64) string { return fmt.Sprintf("%03o", m) }

func TestRenderKrewLikeTheBot(t *testing.T) {
	tmpl := `spec:
  version: {{ .TagName }}
  platforms:
  - uri4:
    {{addURIAndSha "https://example.com/{{ .TagName }}/x_{{ .TagName }}_linux_amd64.tar.gz" .TagName }}
  - uri6:
      {{addURIAndSha "https://example.com/{{ .TagName }}/x_{{ .TagName }}_windows_amd64.zip" .TagName | indent 6 }}
`
	sums := map[string]string{"x_v1.2.3_linux_amd64.tar.gz": "aaa", "x_v1.2.3_windows_amd64.zip": "bbb"}
	got, err := renderKrew(tmpl, "v1.2.3", sums)
	if err != nil {
		t.Fatal(err)
	}
	want := `spec:
  version: v1.2.3
  platforms:
  - uri4:
    uri: https://example.com/v1.2.3/x_v1.2.3_linux_amd64.tar.gz
    sha256: aaa
  - uri6:
      uri: https://example.com/v1.2.3/x_v1.2.3_windows_amd64.zip
      sha256: bbb
`
	if got != want {
		t.Errorf("rendered:\n%s\nwant:\n%s", got, want)
	}
	delete(sums, "x_v1.2.3_windows_amd64.zip")
	if _, err := renderKrew(tmpl, "v1.2.3", sums); err == nil || !strings.Contains(err.Error(), "x_v1.2.3_windows_amd64.zip") {
		t.Errorf("missing sum: err = %v", err)
	}
}

func TestRepoTemplateRenders(t *testing.T) {
	text, err := os.ReadFile("../../.krew.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, p := range []string{"darwin_amd64.tar.gz", "darwin_arm64.tar.gz", "linux_amd64.tar.gz", "linux_arm64.tar.gz", "windows_amd64.zip", "windows_arm64.zip"} {
		sums["kubectl-livesync_v9.8.7_"+p] = strings.Repeat("0", 64)
	}
	got, err := renderKrew(string(text), "v9.8.7", sums)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "apiVersion: krew.googlecontainertools.github.com/v1alpha2\n") {
		t.Errorf("the template's comment leaks into the manifest:\n%.200s", got)
	}
	if n := strings.Count(got, "\n    sha256: "+strings.Repeat("0", 64)+"\n"); n != 6 {
		t.Errorf("%d platforms with a sum, want 6", n)
	}
}
