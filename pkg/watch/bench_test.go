package watch

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkWatchReady measures how long New takes to set up notify's
// watches on a tree of 10,000 files in 1,111 directories, which is
// how long a user waits before the first save is seen.
func BenchmarkWatchReady(b *testing.B) {
	root := b.TempDir()
	dirs := 1
	for i := range 10 {
		for j := range 10 {
			for k := range 10 {
				dir := filepath.Join(root, fmt.Sprint("d", i), fmt.Sprint("d", j), fmt.Sprint("d", k))
				mkdirAll(b, dir)
				for f := range 10 {
					writeFile(b, filepath.Join(dir, fmt.Sprint("f", f, ".go")), "package x\n")
				}
			}
			dirs++
		}
		dirs++
	}
	dirs += 1000
	for b.Loop() {
		w, err := New([]string{root}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		w.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(dirs), "dirs")
}
