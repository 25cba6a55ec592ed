package filesync

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
)

// BenchmarkListRemote measures the container side of an initial sync's comparison: the listing
// script (find, stat, readlink checks and sha256sum) over 10,000 files of 1 KiB in 100
// directories, run by busybox as in the test image. It is what a restarted container costs
// before anything is sent.
func BenchmarkListRemote(b *testing.B) { benchmarkListRemote(b, false) }

// BenchmarkListRemoteStat is BenchmarkListRemote without hashes: what a start against a saved
// ancestor lists.
func BenchmarkListRemoteStat(b *testing.B) { benchmarkListRemote(b, true) }

func benchmarkListRemote(b *testing.B, stat bool) {
	ex := busybox(b)
	remote := b.TempDir()
	data := make([]byte, 1024)
	for i := range 10_000 {
		p := filepath.Join(remote, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d", i))
		must2(b, os.MkdirAll(filepath.Dir(p), 0o755))
		must2(b, os.WriteFile(p, data, 0o644))
	}
	m, err := planner.Resolve(planner.Mapping{Local: planner.LocalPath(b.TempDir()), Remote: planner.RemotePath(remote)}, nil)
	must2(b, err)
	for b.Loop() {
		l, err := planner.ListRemote(context.Background(), ex, testTarget, m, stat)
		must2(b, err)
		if len(l.Entries) != 10_100 {
			b.Fatalf("listed %d entries, want 10100", len(l.Entries))
		}
	}
}

// BenchmarkPlanRescan measures a rescan plan of 100,000 unchanged files in 5,000 directories:
// what the engine does after the watcher suspects lost events (a burst of 8,192 events or more
// in a second trips it), before anything is sent.
func BenchmarkPlanRescan(b *testing.B) {
	dir := b.TempDir()
	for d := range 5000 {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", d/100), fmt.Sprintf("s%03d", d%100))
		must2(b, os.MkdirAll(sub, 0o755))
		for f := range 20 {
			must2(b, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%06d.js", d*20+f)), nil, 0o644))
		}
	}
	m, err := planner.Resolve(planner.Mapping{Local: planner.LocalPath(dir), Remote: "/app"}, nil)
	must2(b, err)
	idx := syncedIndex(b, m)
	for b.Loop() {
		p, err := planner.Changes(m, idx, nil, true)
		if err != nil || !p.Empty() {
			b.Fatal(err, len(p.Copies))
		}
	}
}

// BenchmarkStartSaved measures a start against a saved ancestor with nothing changed, 10,000
// files of 1 KiB in 100 directories on both sides: the local walk, the listing without hashes
// (busybox, as in the test image) and the three-way plan.
func BenchmarkStartSaved(b *testing.B) {
	ex := busybox(b)
	local, remote := b.TempDir(), b.TempDir()
	data := make([]byte, 1024)
	for i := range 10_000 {
		p := filepath.Join(local, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d", i))
		must2(b, os.MkdirAll(filepath.Dir(p), 0o755))
		must2(b, os.WriteFile(p, data, 0o644))
	}
	anc := &fakeAncestry{saved: map[string][]syncstate.Mapping{}}
	cfg := Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: planner.RemotePath(remote)}}}
	e := New(ex, cfg, WithAncestry(anc))
	e.AddTarget(testTarget)
	if ok, err := e.Once(context.Background()); !ok || err != nil {
		b.Fatal(ok, err)
	}
	for b.Loop() {
		e := New(ex, cfg, WithAncestry(anc))
		e.AddTarget(testTarget)
		if ok, err := e.Once(context.Background()); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
