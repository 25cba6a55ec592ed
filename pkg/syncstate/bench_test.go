package syncstate

import (
	"fmt"
	"testing"
)

// BenchmarkLoad10k is what a restart of the bench's 10,000-file tree pays to read its state.
func BenchmarkLoad10k(b *testing.B) {
	s := &Store{Dir: b.TempDir()}
	k := testKey("/src")
	var es []Entry
	for i := range 10_000 {
		es = append(es, Entry{Path: fmt.Sprintf("dir%03d/file%05d.txt", i/100, i), Type: 1, Mode: 0o644, Size: 9000, MTime: 1e18, Ino: uint64(i), CTime: 1e18, Sum: make([]byte, 32)})
	}
	if err := s.Save(k, &Snapshot{Halves: []Half{{Stamp: "x", Mappings: mappings(es)}}}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if snap, note := s.Load(k); snap == nil {
			b.Fatal(note)
		}
	}
}
