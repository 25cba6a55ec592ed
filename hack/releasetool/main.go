// Command releasetool holds the two steps of hack/release.sh that must not depend on the host's
// tar, gzip or zip: byte-for-byte reproducible archives, and rendering the krew-release-bot
// template .krew.yaml into a manifest with the sums of local archives.
//
//	releasetool archive -mtime 2026-12-01T00:00:00Z -o dist/x.tar.gz FILE...   (or x.zip)
//	releasetool krew -template .krew.yaml -tag v0.1.0 -checksums dist/checksums.txt -o plugins/livesync.yaml
package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "archive":
		err = archiveCmd(os.Args[2:])
	case "krew":
		err = krewCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "releasetool:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: releasetool archive|krew [flags]")
	os.Exit(2)
}

func archiveCmd(args []string) error {
	fs := flag.NewFlagSet("archive", flag.ExitOnError)
	out := fs.String("o", "", "archive to write; .tar.gz or .zip")
	mtime := fs.String("mtime", "1970-01-01T00:00:00Z", "modification time of every entry (RFC 3339)")
	_ = fs.Parse(args)
	t, err := time.Parse(time.RFC3339, *mtime)
	if err != nil {
		return fmt.Errorf("parsing -mtime: %w", err)
	}
	if *out == "" || fs.NArg() == 0 {
		return fmt.Errorf("archive needs -o and at least one file")
	}
	var buf bytes.Buffer
	switch {
	case strings.HasSuffix(*out, ".tar.gz"):
		err = writeTarGz(&buf, fs.Args(), t)
	case strings.HasSuffix(*out, ".zip"):
		err = writeZip(&buf, fs.Args(), t)
	default:
		err = fmt.Errorf("unknown archive type %q: use .tar.gz or .zip", *out)
	}
	if err != nil {
		return err
	}
	return os.WriteFile(*out, buf.Bytes(), 0o644)
}

// entry is one file at the archive's root. Only the executable bit survives from the source:
// owners, times and other permission bits are fixed so that the same inputs give the same bytes.
type entry struct {
	name string
	mode int64
	data []byte
}

func readEntries(files []string) ([]entry, error) {
	var es []entry
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		mode := int64(0o644)
		if st.Mode()&0o111 != 0 {
			mode = 0o755
		}
		es = append(es, entry{name: filepath.Base(f), mode: mode, data: data})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].name < es[j].name })
	for i := 1; i < len(es); i++ {
		if es[i].name == es[i-1].name {
			return nil, fmt.Errorf("two files named %q", es[i].name)
		}
	}
	return es, nil
}

func writeTarGz(w io.Writer, files []string, mtime time.Time) error {
	es, err := readEntries(files)
	if err != nil {
		return err
	}
	// The zero gzip header has no name and no time: nothing of the host leaks in.
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, e := range es {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     e.name,
			Mode:     e.mode,
			Size:     int64(len(e.data)),
			ModTime:  mtime.UTC(),
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func writeZip(w io.Writer, files []string, mtime time.Time) error {
	es, err := readEntries(files)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	for _, e := range es {
		hdr := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: mtime.UTC()}
		hdr.SetMode(os.FileMode(e.mode))
		f, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		if _, err := f.Write(e.data); err != nil {
			return err
		}
	}
	return zw.Close()
}

func krewCmd(args []string) error {
	fs := flag.NewFlagSet("krew", flag.ExitOnError)
	tmpl := fs.String("template", ".krew.yaml", "krew-release-bot template")
	tag := fs.String("tag", "", "release tag, e.g. v0.1.0")
	sums := fs.String("checksums", "", "sha256sum-style file: one `SUM  ARCHIVE` per line")
	header := fs.String("header", "", "comment line written first, without the leading #")
	out := fs.String("o", "", "manifest to write (default stdout)")
	_ = fs.Parse(args)
	if *tag == "" || *sums == "" {
		return fmt.Errorf("krew needs -tag and -checksums")
	}
	bySum, err := readChecksums(*sums)
	if err != nil {
		return err
	}
	text, err := os.ReadFile(*tmpl)
	if err != nil {
		return err
	}
	rendered, err := renderKrew(string(text), *tag, bySum)
	if err != nil {
		return fmt.Errorf("rendering %s: %w", *tmpl, err)
	}
	if *header != "" {
		rendered = "# " + *header + "\n" + rendered
	}
	if *out == "" {
		_, err = os.Stdout.WriteString(rendered)
		return err
	}
	return os.WriteFile(*out, []byte(rendered), 0o644)
}

func readChecksums(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			continue
		}
		sums[strings.TrimPrefix(fields[1], "*")] = fields[0]
	}
	return sums, sc.Err()
}

var versionRE = regexp.MustCompile(`\d+(\.\d+)+`)

// renderKrew renders the template the way krew-release-bot does: Go text/template with the
// data {TagName}, addURIAndSha "URL-TEMPLATE" TAG emitting `uri: URL` and, on the next line
// indented by four spaces, `sha256: SUM`, and indent N. The bot downloads each URL to hash it;
// here the sum comes from the local archive with the URL's base name.
func renderKrew(text, tag string, sums map[string]string) (string, error) {
	var missing []string
	funcs := template.FuncMap{
		"addURIAndSha": func(urlTmpl, tag string) (string, error) {
			t, err := template.New("url").Parse(urlTmpl)
			if err != nil {
				return "", err
			}
			var url strings.Builder
			data := struct{ TagName, Version string }{tag, versionRE.FindString(tag)}
			if err := t.Execute(&url, data); err != nil {
				return "", err
			}
			sum, ok := sums[path.Base(url.String())]
			if !ok {
				missing = append(missing, path.Base(url.String()))
			}
			return fmt.Sprintf("uri: %s\n    sha256: %s", url.String(), sum), nil
		},
		"indent": func(spaces int, v string) string {
			v = strings.ReplaceAll(v, "    sha256:", "sha256:")
			pad := strings.Repeat(" ", spaces)
			return strings.TrimSpace(pad + strings.ReplaceAll(v, "\n", "\n"+pad))
		},
	}
	t, err := template.New(".krew.yaml").Funcs(funcs).Parse(text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Execute(&b, struct{ TagName string }{tag}); err != nil {
		return "", err
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("no checksum for %s: build the archives first (make dist)", strings.Join(missing, ", "))
	}
	return b.String(), nil
}
