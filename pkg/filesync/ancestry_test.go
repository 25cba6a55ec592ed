package filesync

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
)

// fakeAncestry is an Ancestry in memory: what Confirmed got is what the
// next Start hands back when the container is the same.
type fakeAncestry struct {
	mu     sync.Mutex
	saved  map[string][]syncstate.Mapping // by container ID
	starts []string
	n      int // Confirmed calls
}

func (a *fakeAncestry) Start(t Target) Start {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.saved[t.ContainerID]; ok {
		a.starts = append(a.starts, StartSaved)
		return Start{From: StartSaved, Saved: s, SavedAt: time.Now()}
	}
	a.starts = append(a.starts, StartNone)
	return Start{From: StartNone}
}

func (a *fakeAncestry) Confirmed(t Target, ms []syncstate.Mapping) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.saved[t.ContainerID] = ms
	a.n++
}

// confirmed returns how many times Confirmed was called, and whether the
// last index handed over holds rel.
func (a *fakeAncestry) confirmed(id, rel string) (int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.saved[id] {
		for r := range m.All() {
			if r.Path == rel {
				return a.n, true
			}
		}
	}
	return a.n, false
}

// A worker hands its index over after the initial sync, then at most every
// saveEvery: batches in between cost no copy of the whole index, and what
// the last of them confirmed is handed over when the interval ends, without
// another batch to wake the worker.
func TestEngineSavesAtMostEverySaveEvery(t *testing.T) {
	anc := &fakeAncestry{saved: map[string][]syncstate.Mapping{}}
	f := newEngineFixture(t, Config{}, WithAncestry(anc))
	tg := podTarget("web-1")
	f.e.AddTarget(tg)
	f.run(t)
	wait[InitialSync](t, f.rec)
	start := time.Now()
	poll := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: %d hand-overs", what, anc.n)
			}
		}
	}
	poll("the initial sync's index", func() bool { n, ok := anc.confirmed(tg.ContainerID, "a"); return n == 1 && ok })
	for _, name := range []string{"b1", "b2", "b3"} {
		writeTree(t, f.local, map[string]string{name: name})
		if b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, name)}, 1); b.Changed != 1 {
			t.Fatalf("batch %s = %+v", name, b)
		}
	}
	if n, _ := anc.confirmed(tg.ContainerID, "b3"); n != 1 && time.Since(start) < saveEvery {
		t.Fatalf("%d hand-overs within %v of the first, want 1", n, time.Since(start))
	}
	poll("b3 handed over once the interval ended", func() bool { _, ok := anc.confirmed(tg.ContainerID, "b3"); return ok })
	if n, _ := anc.confirmed(tg.ContainerID, "b3"); n > 3 {
		t.Errorf("%d hand-overs for three batches in %v, want at most one per %v after the first", n, time.Since(start), saveEvery)
	}
}

// An engine hands its confirmed index to its Ancestry, and the next
// engine of the same container starts three-way from it: a local delete
// made in between reaches the container (a first start would leave it
// there), and a container change is kept; a restarted container starts
// from nothing, and the local side wins.
func TestEngineStartsFromSavedAncestor(t *testing.T) {
	anc := &fakeAncestry{saved: map[string][]syncstate.Mapping{}}
	f := newEngineFixture(t, Config{}, WithAncestry(anc))
	tg := podTarget("web-1")
	f.e.AddTarget(tg)
	if ok, err := f.e.Once(context.Background()); !ok || err != nil {
		t.Fatalf("Once = %v, %v", ok, err)
	}
	if len(anc.saved[tg.ContainerID]) != 1 || anc.saved[tg.ContainerID][0].Len() == 0 {
		t.Fatalf("nothing confirmed: %v", anc.saved)
	}
	must(t, os.Remove(filepath.Join(f.local, "a")))
	writeTree(t, f.remote("web-1"), map[string]string{"d/x": "the container's"})
	again := New(f.ex, Config{Mappings: f.e.cfg.Mappings}, WithAncestry(anc), WithReporter(f.rec))
	again.AddTarget(tg)
	if ok, err := again.Once(context.Background()); !ok || err != nil {
		t.Fatalf("Once = %v, %v", ok, err)
	}
	got := readTree(t, f.remote("web-1"))
	if _, ok := got["a"]; ok {
		t.Error("a local delete made while stopped did not reach the container")
	}
	if anc.starts[1] != StartSaved {
		t.Errorf("starts %v", anc.starts)
	}
	// An unlisted container change: the local side wins.
	if !strings.Contains(got["d/x"], "x") || strings.Contains(got["d/x"], "container") {
		t.Errorf("d/x = %q, want the local x", got["d/x"])
	}
	evs := eventsOf[Ancestor](f.rec)
	var seen bool
	for _, a := range evs {
		if a.From == StartSaved && a.ThreeWay && a.Decided["delete"] == 1 && a.Decided["send"] == 1 {
			seen = true
		}
	}
	if !seen {
		t.Errorf("no three-way ancestor event among %v", evs)
	}

	// A restarted container: nothing saved for it.
	restarted := tg
	restarted.ContainerID = "web-1-2"
	third := New(f.ex, Config{Mappings: f.e.cfg.Mappings}, WithAncestry(anc), WithReporter(f.rec))
	third.AddTarget(restarted)
	if ok, err := third.Once(context.Background()); !ok || err != nil {
		t.Fatalf("Once = %v, %v", ok, err)
	}
	if anc.starts[2] != StartNone {
		t.Errorf("starts %v", anc.starts)
	}
}

// A start decides an unlisted file by its content where its stat data
// cannot: a container rewrite that kept the size within tar's second is a
// change (the local side wins, as a cold start's hashes would say), and an
// mtime that alone moved (a delta, an in-container copy) is none.
func TestStartDecidesByContent(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			anc := &fakeAncestry{saved: map[string][]syncstate.Mapping{}}
			f := newEngineFixture(t, Config{}, WithAncestry(anc))
			f.ex.Runner = ex.Runner
			tg := podTarget("web-1")
			f.e.AddTarget(tg)
			if ok, err := f.e.Once(context.Background()); !ok || err != nil {
				t.Fatalf("Once = %v, %v", ok, err)
			}
			fi, err := os.Stat(filepath.Join(f.local, "a"))
			must(t, err)
			rewritten := filepath.Join(f.remote("web-1"), "a")
			must(t, os.WriteFile(rewritten, []byte("b"), 0o644))
			same := time.Unix(fi.ModTime().Unix(), 500_000_000)
			must(t, os.Chtimes(rewritten, same, same))
			touched := filepath.Join(f.remote("web-1"), "d/x")
			hourAgo := time.Now().Add(-time.Hour).Truncate(time.Second)
			must(t, os.Chtimes(touched, hourAgo, hourAgo))

			again := New(f.ex, Config{Mappings: f.e.cfg.Mappings}, WithAncestry(anc), WithReporter(f.rec))
			again.AddTarget(tg)
			if ok, err := again.Once(context.Background()); !ok || err != nil {
				t.Fatalf("Once = %v, %v", ok, err)
			}
			if got := readTree(t, f.remote("web-1"))["a"]; !strings.HasSuffix(got, " a") {
				t.Errorf("container a = %s, want the local a", got)
			}
			var (
				decided  map[string]int
				examples []string
			)
			for _, a := range eventsOf[Ancestor](f.rec) {
				if a.ThreeWay {
					decided, examples = a.Decided, a.Examples
				}
			}
			if decided["send"] != 1 || len(decided) != 1 {
				t.Errorf("decided %v (%q), want one send (a; d/x kept)", decided, examples)
			}
			if fi, err := os.Stat(touched); err != nil || !fi.ModTime().Equal(hourAgo) {
				t.Errorf("d/x was sent again: %v", err)
			}
		})
	}
}
