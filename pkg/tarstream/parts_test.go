package tarstream

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// An uncompressed stream marks the end of a part after whole entries, at
// least remote.PartMin apart, never past what was read: what comes before a
// mark is a tar of whole entries that a container may extract while the rest
// comes. A compressed stream marks nothing.
func TestStreamParts(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	var files []File
	for i := range 60 {
		b := make([]byte, rng.IntN(300<<10))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		src := filepath.Join(dir, fmt.Sprintf("f%02d", i))
		if err := os.WriteFile(src, b, 0o644); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(src)
		files = append(files, File{Rel: fi.Name(), Name: fi.Name(), Src: src, Type: remote.TypeFile, Mode: 0o644, Size: fi.Size(), MTime: fi.ModTime()})
	}
	for _, gz := range []bool{false, true} {
		r, wait := Stream(files, Options{Gzip: gz})
		var got bytes.Buffer
		var ends []int64
		buf := make([]byte, 10<<10+7)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if e := r.PartEnd(); e > int64(got.Len()) {
				t.Fatalf("a part ends at %d, past the %d bytes read", e, got.Len())
			} else if e > 0 && (len(ends) == 0 || e > ends[len(ends)-1]) {
				ends = append(ends, e)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		_ = r.Close()
		if _, err := wait(); err != nil {
			t.Fatal(err)
		}
		if gz {
			if len(ends) > 0 {
				t.Errorf("a compressed stream marked parts at %v", ends)
			}
			continue
		}
		if len(ends) < 3 {
			t.Fatalf("parts end at %v in %d bytes; want them every %d bytes or so", ends, got.Len(), remote.PartMin)
		}
		prev := int64(0)
		for _, e := range ends {
			if e-prev < remote.PartMin {
				t.Errorf("a part of %d bytes (%d to %d), under %d", e-prev, prev, e, remote.PartMin)
			}
			prev = e
			// Whole entries, and nothing after the last.
			tr := tar.NewReader(bytes.NewReader(got.Bytes()[:e]))
			n := 0
			for {
				hdr, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("the part ending at %d: entry %d: %v", e, n, err)
				}
				if c, err := io.Copy(io.Discard, tr); err != nil || c != hdr.Size {
					t.Fatalf("the part ending at %d: %s cut short: %d of %d bytes, %v", e, hdr.Name, c, hdr.Size, err)
				}
				n++
			}
			if n == 0 {
				t.Errorf("the part ending at %d holds no entry", e)
			}
		}
	}
}
