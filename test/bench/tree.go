//go:build bench

package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// content returns n pseudo-random bytes, reproducible from seed; random so that nothing along
// the way can compress or deduplicate them.
func content(seed uint64, n int) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24), byte(seed >> 32)})
	b := make([]byte, n)
	_, _ = r.Read(b)
	return b
}

// textContent returns n printable bytes ending in a newline, unique to seed.
func textContent(seed uint64, n int) []byte {
	b := content(seed, n)
	for i := range b {
		b[i] = 'a' + b[i]%26
	}
	if n > 0 {
		b[n-1] = '\n'
	}
	return b
}

// initialTree writes the initial-sync tree: 10,000 files of mixed sizes, about 100 MB, in 520
// directories two levels deep (sizes like a web app with vendored assets: mostly small sources,
// some images and bundles, a few large blobs). It returns the total file bytes.
func initialTree(root string) (int64, error) {
	r := rand.New(rand.NewPCG(1, 2))
	var total int64
	for i := range 10_000 {
		var size int
		switch k := i % 500; {
		case k < 300: // 6,000 sources, 0.2–4 KiB
			size = 200 + r.IntN(3900)
		case k < 475: // 3,500 modules, 4–20 KiB
			size = 4<<10 + r.IntN(16<<10)
		case k < 499: // 480 assets, 32–96 KiB
			size = 32<<10 + r.IntN(64<<10)
		default: // 20 blobs, 0.4–1 MiB
			size = 400<<10 + r.IntN(624<<10)
		}
		dir := filepath.Join(root, fmt.Sprintf("pkg%02d", i%20), fmt.Sprintf("mod%02d", i/20%25))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%05d.dat", i)), content(uint64(i)+1, size), 0o644); err != nil {
			return 0, err
		}
		total += int64(size)
	}
	return total, nil
}

// watchTree writes the watcher tree: 100,000 files of 100–400 bytes in 5,000 leaf directories
// (50 × 100), plus a node_modules-like depth of three levels.
func watchTree(root string) error {
	for d := range 5000 {
		dir := filepath.Join(root, fmt.Sprintf("d%02d", d/100), fmt.Sprintf("s%03d", d%100))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for f := range 20 {
			i := d*20 + f
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%06d.js", i)), textContent(uint64(i), 100+i%300), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// tarOf builds an in-memory tar of files (name → content) as the baseline sends them.
func tarOf(names []string, files map[string][]byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		_ = tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg})
		_, _ = tw.Write(files[n])
	}
	_ = tw.Close()
	return buf.Bytes()
}
