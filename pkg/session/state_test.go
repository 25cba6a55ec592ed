package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

type warnings struct{ got []error }

func (w *warnings) Warn(err error) { w.got = append(w.got, err) }

func stateConfig(t *testing.T, local string) Config {
	t.Helper()
	return Config{
		Sync:  filesync.Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: "/app"}}},
		State: StateConfig{Dir: filepath.Join(t.TempDir(), "state")},
	}
}

func newTestKeeper(t *testing.T, cfg Config, w *warnings, ns map[string]string) *keeper {
	t.Helper()
	k := newKeeperWith(cfg, "https://c:6443 ca:1", &workload.Workload{Kind: "Deployment", Namespace: "ns", Name: "web"}, []string{"app"},
		func(tg filesync.Target) string { return ns[tg.ContainerID] }, w.Warn)
	if k == nil {
		t.Fatal("no keeper")
	}
	return k
}

func TestStateKeyParts(t *testing.T) {
	local := t.TempDir()
	cfg := stateConfig(t, local)
	w := &workload.Workload{Kind: "Deployment", Namespace: "ns", Name: "web"}
	base := stateKey(cfg, "https://c:6443 ca:1", w, []string{"app"})
	other := func(name string, k syncstate.Key) {
		if k.ID() == base.ID() {
			t.Errorf("%s: same key", name)
		}
	}
	other("cluster CA", stateKey(cfg, "https://c:6443 ca:2", w, []string{"app"}))
	other("container", stateKey(cfg, "https://c:6443 ca:1", w, []string{"sidecar"}))
	other("namespace", stateKey(cfg, "https://c:6443 ca:1", &workload.Workload{Kind: "Deployment", Namespace: "ns2", Name: "web"}, []string{"app"}))
	c2 := cfg
	c2.Excludes = []string{"*.log"}
	other("excludes", stateKey(c2, "https://c:6443 ca:1", w, []string{"app"}))
	c2 = cfg
	c2.SyncBack.Globs = []string{"gen/"}
	other("sync-back globs", stateKey(c2, "https://c:6443 ca:1", w, []string{"app"}))
	c2 = cfg
	c2.Sync.Mappings = []planner.Mapping{{Local: planner.LocalPath(local), Remote: "/srv"}}
	other("remote root", stateKey(c2, "https://c:6443 ca:1", w, []string{"app"}))
	if err := os.WriteFile(filepath.Join(local, ".livesyncignore"), []byte("*.tmp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other("ignore file", stateKey(cfg, "https://c:6443 ca:1", w, []string{"app"}))
	// The local root by its real path: a symlink to it is the same sync.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(local, link); err != nil {
		t.Fatal(err)
	}
	c2 = cfg
	c2.Sync.Mappings = []planner.Mapping{{Local: planner.LocalPath(link), Remote: "/app"}}
	if stateKey(c2, "https://c:6443 ca:1", w, []string{"app"}).ID() != stateKey(cfg, "https://c:6443 ca:1", w, []string{"app"}).ID() {
		t.Error("a symlink to the root is another sync")
	}
}

// What a session confirmed is what the next one of the same container
// starts from; another container's is discarded (its stat records only
// spare hashing); a damaged file is no state, with a warning.
func TestKeeperStartAndSave(t *testing.T) {
	cfg := stateConfig(t, t.TempDir())
	w := &warnings{}
	ns := map[string]string{"c1": "mnt:[1]", "c2": "mnt:[2]", "c3": ""}
	t1 := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "containerd://c1"}
	ns["containerd://c1"], ns["containerd://c2"] = "mnt:[1]", "mnt:[2]"

	k := newTestKeeper(t, cfg, w, ns)
	k.add(t1)
	if st := k.Start(t1); st.From != filesync.StartNone || st.Saved != nil {
		t.Fatalf("first start: %+v", st)
	}
	recs := []syncstate.Mapping{syncstate.MappingOf([]syncstate.Entry{{Path: "a", Type: 1, Size: 1}})}
	k.Confirmed(t1, recs)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k.run(ctx) // ended: one flush

	k = newTestKeeper(t, cfg, w, ns)
	k.add(t1)
	st := k.Start(t1)
	if st.From != filesync.StartSaved || len(st.Saved) != 1 || st.Saved[0].Entries()[0].Path != "a" {
		t.Fatalf("same container: %+v", st)
	}
	t2 := t1
	t2.ContainerID = "containerd://c2"
	k.add(t2)
	if st := k.Start(t2); st.From != filesync.StartDiscarded || st.Saved != nil || st.Cache == nil || !strings.Contains(st.Why, "local side wins") {
		t.Fatalf("restarted container: %+v", st)
	}
	t3 := t1
	t3.ContainerID = "containerd://c3" // its mount namespace could not be read
	k.add(t3)
	if st := k.Start(t3); st.Saved != nil {
		t.Fatalf("unknown incarnation: %+v", st)
	}
	k.Confirmed(t3, recs) // never saved: it cannot be stamped
	if _, ok := k.halves[targetKey(t3)]; ok {
		t.Error("a half without a stamp is kept")
	}
	// A restarted container's half replaces its predecessor's.
	k.Confirmed(t1, recs)
	k.Confirmed(t2, recs)
	if _, ok := k.halves[targetKey(t1)]; ok || len(k.halves) != 1 {
		t.Errorf("halves after a restart: %v", k.halves)
	}
	// A removed target's half is not saved again; if the same container comes back in this
	// session, it starts from what it confirmed last.
	newer := []syncstate.Mapping{syncstate.MappingOf([]syncstate.Entry{{Path: "b", Type: 1, Size: 1}})}
	k.Confirmed(t2, newer)
	k.remove(t2)
	k.Confirmed(t2, recs)
	if _, ok := k.halves[targetKey(t2)]; ok {
		t.Error("a removed target's half is kept")
	}
	k.add(t2)
	if st := k.Start(t2); st.From != filesync.StartSaved || st.Saved[0].Entries()[0].Path != "b" {
		t.Errorf("the same container back: %+v", st)
	}

	// Damaged: ignored with a warning.
	name := k.store.Path(k.key)
	if err := os.WriteFile(name, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.got = nil
	k = newTestKeeper(t, cfg, w, ns)
	k.add(t1)
	if st := k.Start(t1); st.From != filesync.StartNone || !strings.Contains(st.Why, "ignored") {
		t.Fatalf("damaged: %+v", st)
	}
	if len(w.got) != 1 {
		t.Errorf("warnings: %v", w.got)
	}
}

// fakeConflicts is sync-back's side of the keeper's conflicts.
type fakeConflicts struct {
	standing map[string][]syncstate.Conflict
	restored map[string][]syncstate.Conflict
}

func (f *fakeConflicts) Standing(t filesync.Target) []syncstate.Conflict {
	return f.standing[targetKey(t)]
}
func (f *fakeConflicts) Restore(t filesync.Target, cs []syncstate.Conflict) {
	f.restored[targetKey(t)] = cs
}

// The conflicts standing at a container are saved with its half, those that
// came after its index last changed too (the last save asks again), and a
// start of the same container from it makes them stand again; another
// incarnation's are not its.
func TestKeeperSavesStandingConflicts(t *testing.T) {
	cfg := stateConfig(t, t.TempDir())
	w := &warnings{}
	ns := map[string]string{"containerd://c1": "mnt:[1]", "containerd://c2": "mnt:[2]"}
	t1 := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "containerd://c1"}
	c1 := syncstate.Conflict{Path: "gen/a.txt", Remote: syncstate.ConflictSide{Absent: true}}
	c2 := syncstate.Conflict{Path: "gen/b.txt", Exists: true, Size: 3, Remote: syncstate.ConflictSide{Sum: make([]byte, 32)}}
	fc := &fakeConflicts{standing: map[string][]syncstate.Conflict{targetKey(t1): {c1}}, restored: map[string][]syncstate.Conflict{}}

	k := newTestKeeper(t, cfg, w, ns)
	k.conflicts = fc
	k.add(t1)
	k.Start(t1)
	k.Confirmed(t1, []syncstate.Mapping{syncstate.MappingOf([]syncstate.Entry{{Path: "a", Type: 1, Size: 1}})})
	fc.standing[targetKey(t1)] = []syncstate.Conflict{c1, c2} // a conflict with no index change
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k.run(ctx) // ended: one flush

	fc2 := &fakeConflicts{restored: map[string][]syncstate.Conflict{}}
	k = newTestKeeper(t, cfg, w, ns)
	k.conflicts = fc2
	k.add(t1)
	if st := k.Start(t1); st.From != filesync.StartSaved {
		t.Fatalf("same container: %+v", st)
	}
	if got := fc2.restored[targetKey(t1)]; !reflect.DeepEqual(got, []syncstate.Conflict{c1, c2}) {
		t.Fatalf("restored %+v, want %+v", got, []syncstate.Conflict{c1, c2})
	}
	t2 := t1
	t2.ContainerID = "containerd://c2"
	k.add(t2)
	k.Start(t2)
	if got, ok := fc2.restored[targetKey(t2)]; ok {
		t.Errorf("another incarnation was given %+v", got)
	}
	if len(w.got) != 0 {
		t.Errorf("warnings: %v", w.got)
	}
}

func TestKeeperForgetAndDryRun(t *testing.T) {
	cfg := stateConfig(t, t.TempDir())
	w := &warnings{}
	ns := map[string]string{"c1": "mnt:[1]"}
	t1 := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "c1"}
	k := newTestKeeper(t, cfg, w, ns)
	k.add(t1)
	k.Confirmed(t1, []syncstate.Mapping{syncstate.MappingOf([]syncstate.Entry{{Path: "a", Type: 1}})})
	k.flush()
	name := k.store.Path(k.key)

	dry := cfg
	dry.Sync.DryRun, dry.State.Forget = true, true
	k = newTestKeeper(t, dry, w, ns)
	k.add(t1)
	if st := k.Start(t1); st.From != filesync.StartNone || !strings.Contains(st.Why, "would be forgotten") {
		t.Fatalf("dry run: %+v", st)
	}
	k.Confirmed(t1, nil) // a dry run saves nothing
	k.flush()
	if _, err := os.Stat(name); err != nil {
		t.Fatalf("a dry run forgot the state: %v", err)
	}

	forget := cfg
	forget.State.Forget = true
	k = newTestKeeper(t, forget, w, ns)
	k.add(t1)
	if st := k.Start(t1); st.From != filesync.StartNone {
		t.Fatalf("forgotten: %+v", st)
	}
	if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state file is still there: %v", err)
	}
}

// The state directory inside a synced tree: no state is kept.
func TestKeeperRefusesStateInTree(t *testing.T) {
	local := t.TempDir()
	cfg := stateConfig(t, local)
	cfg.State.Dir = filepath.Join(local, ".state")
	w := &warnings{}
	if k := newKeeperWith(cfg, "c", &workload.Workload{Kind: "Pod", Name: "p"}, nil, func(filesync.Target) string { return "" }, w.Warn); k != nil {
		t.Fatal("state kept inside the synced tree")
	}
	if len(w.got) != 1 || !strings.Contains(w.got[0].Error(), "inside the synced tree") {
		t.Errorf("warnings: %v", w.got)
	}
}

// A save that fails says what the next start will find: nothing (the old
// file is gone, or its claim is, without which it is not read), or the
// older file when neither could be removed (syncstate's
// TestFailedSaveRemovesOld).
func TestKeeperFailedSaveWarns(t *testing.T) {
	cfg := stateConfig(t, t.TempDir())
	w := &warnings{}
	ns := map[string]string{"c1": "mnt:[1]"}
	t1 := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "c1"}
	k := newTestKeeper(t, cfg, w, ns)
	k.add(t1)
	// As a session does before its first save: the start waits for the
	// load, which reads where the directory goes next (before, the load
	// raced the directory and sometimes warned of it as a bad state file).
	k.Start(t1)
	// Where the file goes stands a directory that cannot be replaced nor removed.
	if err := os.MkdirAll(filepath.Join(k.store.Path(k.key), "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	k.Confirmed(t1, []syncstate.Mapping{syncstate.MappingOf([]syncstate.Entry{{Path: "a", Type: 1}})})
	k.flush()
	if len(w.got) != 1 || !strings.Contains(w.got[0].Error(), "the next start will not use saved state") {
		t.Fatalf("warnings: %v", w.got)
	}
	w.got = nil
	k = newTestKeeper(t, cfg, w, ns)
	k.add(t1)
	if st := k.Start(t1); st.From != filesync.StartNone {
		t.Fatalf("after a failed save: %+v", st)
	}
	if len(w.got) != 1 || !strings.Contains(w.got[0].Error(), "--forget-state") {
		t.Fatalf("warnings: %v", w.got)
	}

}

// saveOnce is one session of cfg that confirms recs for t and ends.
func saveOnce(t *testing.T, cfg Config, w *warnings, ns map[string]string, tg filesync.Target) {
	t.Helper()
	k := newTestKeeper(t, cfg, w, ns)
	k.add(tg)
	k.Start(tg)
	k.Confirmed(tg, []syncstate.Mapping{syncstate.MappingOf([]syncstate.Entry{{Path: "a", Type: 1, Size: 1}})})
	k.flush()
	if _, err := os.Stat(k.store.Path(k.key)); err != nil {
		t.Fatalf("nothing saved: %v", err)
	}
}

// A session of another key that writes into the same container under an
// overlapping root makes this key's ancestor older than what both sides
// agreed on last: the next start of this key does not use it. It is
// invalidated when the other session adds the container, before anything
// is sent, so a session that crashed right after invalidates it too.
// Sessions that cannot have written what this key's ancestor describes
// leave it alone.
func TestKeeperAnotherKeyBetween(t *testing.T) {
	local := t.TempDir()
	ns := map[string]string{"c1": "mnt:[1]", "c2": "mnt:[2]"}
	t1 := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "c1"}
	t2 := filesync.Target{Namespace: "ns", Pod: "web-2", Container: "app", ContainerID: "c2"}
	for _, tc := range []struct {
		name  string
		other func(Config) Config
		tg    filesync.Target
		kept  bool
	}{
		{"no sync-back", func(c Config) Config { c.SyncBack.Globs = nil; return c }, t1, false},
		{"another exclude", func(c Config) Config { c.Excludes = []string{"*.log"}; return c }, t1, false},
		{"a root inside", func(c Config) Config {
			c.Sync.Mappings = []planner.Mapping{{Local: planner.LocalPath(filepath.Join(local, "static")), Remote: "/app/static"}}
			return c
		}, t1, false},
		{"a root around", func(c Config) Config {
			c.Sync.Mappings = []planner.Mapping{{Local: planner.LocalPath(local), Remote: "/"}}
			return c
		}, t1, false},
		{"another pod", func(c Config) Config { c.Excludes = []string{"*.log"}; return c }, t2, true},
		{"another root", func(c Config) Config {
			c.Sync.Mappings = []planner.Mapping{{Local: planner.LocalPath(local), Remote: "/application"}}
			return c
		}, t1, true},
		{"a dry run", func(c Config) Config { c.Excludes = []string{"*.log"}; c.Sync.DryRun = true; return c }, t1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := stateConfig(t, local)
			cfg.SyncBack.Globs = []string{"gen/"}
			w := &warnings{}
			saveOnce(t, cfg, w, ns, t1)

			b := newTestKeeper(t, tc.other(cfg), w, ns)
			if b.key.ID() == stateKey(cfg, "https://c:6443 ca:1", &workload.Workload{Kind: "Deployment", Namespace: "ns", Name: "web"}, []string{"app"}).ID() {
				t.Fatal("the same key")
			}
			b.add(tc.tg) // and it crashes: nothing confirmed, nothing saved

			k := newTestKeeper(t, cfg, w, ns)
			k.add(t1)
			st := k.Start(t1)
			if kept := st.From == filesync.StartSaved; kept != tc.kept {
				t.Fatalf("start after a session of another key: %s (%s), want saved=%v", st.From, st.Why, tc.kept)
			}
			if len(w.got) != 0 {
				t.Errorf("warnings: %v", w.got)
			}
		})
	}
}

// Two sessions of overlapping keys that run at the same time write the
// same container behind each other's back: neither's ancestor holds what
// the other wrote, so neither is saved.
func TestKeeperAnotherKeyAtTheSameTime(t *testing.T) {
	cfg := stateConfig(t, t.TempDir())
	w := &warnings{}
	ns := map[string]string{"c1": "mnt:[1]"}
	t1 := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "c1"}
	recs := []syncstate.Mapping{syncstate.MappingOf([]syncstate.Entry{{Path: "a", Type: 1, Size: 1}})}
	a := newTestKeeper(t, cfg, w, ns)
	a.add(t1)
	a.Start(t1)
	a.Confirmed(t1, recs)
	a.flush()

	other := cfg
	other.Excludes = []string{"*.log"}
	b := newTestKeeper(t, other, w, ns)
	b.add(t1)
	b.Start(t1)
	b.Confirmed(t1, recs)
	b.flush() // a still runs

	a.Confirmed(t1, recs)
	a.flush()
	b.Confirmed(t1, recs)
	b.flush()
	for _, k := range []*keeper{a, b} {
		if _, err := os.Stat(k.store.Path(k.key)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s saved: %v", k.key[len(k.key)-3].Value, err)
		}
	}
	if len(w.got) == 0 || !strings.Contains(w.got[0].Error(), "another session wrote into the same containers") {
		t.Errorf("warnings: %v", w.got)
	}
}
