package filesync

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// recorder collects events.
type recorder struct {
	ch  chan Event
	mu  sync.Mutex
	all []Event
}

func newRecorder() *recorder { return &recorder{ch: make(chan Event, 1000)} }

func (r *recorder) Report(ev Event) {
	r.mu.Lock()
	r.all = append(r.all, ev)
	r.mu.Unlock()
	r.ch <- ev
}

// errors returns the Error events so far.
func (r *recorder) errors() []Error { return eventsOf[Error](r) }

// wait returns the next event of type T, failing the test after 20s.
func wait[T Event](t *testing.T, r *recorder) T {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-r.ch:
			if e, ok := ev.(T); ok {
				return e
			}
		case <-timeout:
			var zero T
			t.Fatalf("no %T event", zero)
			return zero
		}
	}
}

// waitCount yields until at least n events of type T were reported, and
// returns them all; unlike wait it sees events that wait skipped.
func waitCount[T Event](t *testing.T, r *recorder, n int) []T {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var out []T
		r.mu.Lock()
		for _, ev := range r.all {
			if e, ok := ev.(T); ok {
				out = append(out, e)
			}
		}
		r.mu.Unlock()
		if len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			var zero T
			t.Fatalf("%d %T events, want %d", len(out), zero, n)
		}
		runtime.Gosched()
	}
}

type engineFixture struct {
	local     string
	sandboxes map[string]string // by pod
	ex        *localExecutor
	fc        *clocktesting.FakeClock
	rec       *recorder
	changes   chan coalesce.Change
	done      chan error
	e         *Engine
	cancel    context.CancelFunc

	seenOnSync int
}

func newEngineFixture(t *testing.T, cfg Config, opts ...Option) *engineFixture {
	t.Helper()
	return newWrappedFixture(t, cfg, nil, opts...)
}

// newWrappedFixture is newEngineFixture with the engine's executor wrapped
// by wrap (nil: not wrapped), for failure injection.
func newWrappedFixture(t *testing.T, cfg Config, wrap func(Executor) Executor, opts ...Option) *engineFixture {
	t.Helper()
	f := &engineFixture{
		local: t.TempDir(), sandboxes: map[string]string{},
		ex: busybox(t), fc: clocktesting.NewFakeClock(time.Unix(1000, 0)), rec: newRecorder(),
		changes: make(chan coalesce.Change), done: make(chan error, 1),
	}
	var mu sync.Mutex
	f.ex.Sandbox = func(tg Target) string {
		mu.Lock()
		defer mu.Unlock()
		if f.sandboxes[tg.Pod] == "" {
			f.sandboxes[tg.Pod] = t.TempDir()
		}
		return f.sandboxes[tg.Pod]
	}
	writeTree(t, f.local, map[string]string{"a": "a", "d/x": "x", "with space/ü": "u"})
	cfg.Mappings = []planner.Mapping{{Local: planner.LocalPath(f.local), Remote: "/app"}}
	var ex Executor = f.ex
	if wrap != nil {
		ex = wrap(ex)
	}
	f.e = New(ex, cfg, append([]Option{WithClock(f.fc), WithReporter(f.rec)}, opts...)...)
	return f
}

func (f *engineFixture) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() { f.done <- f.e.Run(ctx, f.changes) }()
	t.Cleanup(func() {
		cancel()
		<-f.done
	})
}

func (f *engineFixture) remote(pod string) string { return filepath.Join(f.sandboxes[pod], "app") }

// onSyncs waits until n more OnSync events than seen so far were reported
// (in any order with other events) and fails on one that did not exit 0.
func (f *engineFixture) onSyncs(t *testing.T, n int) []OnSync {
	t.Helper()
	evs := waitCount[OnSync](t, f.rec, f.seenOnSync+n)
	out := evs[f.seenOnSync:]
	f.seenOnSync += n
	for _, ev := range out {
		if ev.Err != nil || ev.ExitCode != 0 {
			t.Errorf("on-sync = %+v", ev)
		}
	}
	return out
}

// batch sends one change and releases it through the quiet window.
func (f *engineFixture) batch(t *testing.T, c coalesce.Change, waiters int) Batch {
	t.Helper()
	f.changes <- c
	testwait.Waiters(t, f.fc, waiters)
	f.fc.Step(coalesce.DefaultQuiet)
	return wait[Batch](t, f.rec)
}

func podTarget(pod string) Target {
	return Target{Namespace: "ns", Pod: pod, Container: "app", ContainerID: pod + "-1"}
}

func TestEngineTwoTargetsConverge(t *testing.T) {
	onSync := filepath.Join(t.TempDir(), "on-sync")
	f := newEngineFixture(t, Config{OnSync: `printf '%s\n--\n' "$LIVESYNC_CHANGED" >> ` + onSync})
	f.e.AddTarget(podTarget("web-1"))
	f.e.AddTarget(podTarget("web-2"))
	f.run(t)
	for range 2 {
		if ev := wait[InitialSync](t, f.rec); ev.Err != nil || ev.Files != 5 {
			t.Fatalf("initial sync = %+v", ev)
		}
	}
	// On-sync runs off the batch path, with its own timer on the clock: let
	// it finish before the batch windows are stepped.
	f.onSyncs(t, 2)
	assertSameTree(t, f.local, f.remote("web-1"))
	assertSameTree(t, f.local, f.remote("web-2"))

	// Edits and a delete, announced by a rescan.
	must(t, os.Remove(filepath.Join(f.local, "a")))
	writeTree(t, f.local, map[string]string{"new/file": "n"})
	b := f.batch(t, coalesce.Change{Root: f.local, Rescan: true}, 1)
	if b.Targets != 2 || b.Failed != 0 || b.Changed != 2 || b.Deleted != 1 || b.Latency != coalesce.DefaultQuiet {
		t.Errorf("batch = %+v", b)
	}
	f.onSyncs(t, 2)
	assertSameTree(t, f.local, f.remote("web-1"))
	assertSameTree(t, f.local, f.remote("web-2"))

	// A single path change.
	must(t, os.WriteFile(filepath.Join(f.local, "d/x"), []byte("edited"), 0o644))
	b = f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "d/x")}, 1)
	if b.Changed != 1 || len(b.Names) != 1 || b.Names[0] != "/app/d/x" {
		t.Errorf("batch = %+v", b)
	}
	assertSameTree(t, f.local, f.remote("web-2"))

	close(f.changes)
	if err := <-f.done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	f.done <- nil
	out, err := os.ReadFile(onSync)
	must(t, err)
	if !strings.Contains(string(out), "/app/d/x\n--") || !strings.Contains(string(out), "/app/new/file") {
		t.Errorf("on-sync saw %q", out)
	}
}

func TestEngineFailingTargetDoesNotBlockOthers(t *testing.T) {
	f := newEngineFixture(t, Config{})
	f.ex.Fail = func(tg Target, argv []string) error {
		if tg.Pod == "broken" {
			return localexec.ExitCode(2)
		}
		return nil
	}
	f.e.AddTarget(podTarget("broken"))
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	var ok, failed int
	for range 2 {
		if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
			failed++
			if ev.Target.Pod != "broken" {
				t.Errorf("unexpected failure %v", ev.Err)
			}
		} else {
			ok++
		}
	}
	if ok != 1 || failed != 1 {
		t.Fatalf("ok=%d failed=%d", ok, failed)
	}
	writeTree(t, f.local, map[string]string{"b": "b"})
	// The broken target's backoff timer waits on the clock too.
	b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "b")}, 2)
	if b.Targets != 1 || b.Failed != 0 || b.Changed != 1 {
		t.Errorf("batch = %+v", b)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
}

func TestEngineRetriesAndResyncsDirtyTarget(t *testing.T) {
	f := newEngineFixture(t, Config{}, WithRetry(remote.RetryPolicy{Tries: 1}))
	var (
		mu   sync.Mutex
		fail = true
	)
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	wait[InitialSync](t, f.rec)
	f.ex.Fail = func(tg Target, argv []string) error {
		mu.Lock()
		defer mu.Unlock()
		if fail && len(argv) > 5 && argv[5] == "x" {
			fail = false
			return errors.New("error dialing backend: EOF")
		}
		return nil
	}
	writeTree(t, f.local, map[string]string{"first": "1"})
	b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "first")}, 1)
	if b.Failed != 1 {
		t.Fatalf("batch = %+v", b)
	}
	if errs := f.rec.errors(); len(errs) != 1 || !remote.IsTransient(errs[0].Err) {
		t.Errorf("errors = %v, want one transient", errs)
	}
	// The target is dirty: the next batch compares the whole tree, so the
	// file from the failed batch arrives too. (Its own backoff timer waits
	// on the clock as well.)
	writeTree(t, f.local, map[string]string{"second": "2"})
	b = f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "second")}, 2)
	if b.Failed != 0 || b.Changed != 2 {
		t.Errorf("batch = %+v", b)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
}

func TestEngineRestartedContainerIsResynced(t *testing.T) {
	f := newEngineFixture(t, Config{})
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	wait[InitialSync](t, f.rec)
	// The container restarts with a fresh layer that still holds the image's
	// copy of the sources.
	must(t, os.RemoveAll(filepath.Join(f.remote("web-1"), "d")))
	restarted := podTarget("web-1")
	restarted.ContainerID = "web-1-2"
	f.e.AddTarget(restarted)
	ev := wait[InitialSync](t, f.rec)
	if ev.Err != nil || ev.Target.ContainerID != "web-1-2" || ev.Files != 2 {
		t.Errorf("resync = %+v, want d and d/x sent", ev)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
	f.e.RemoveTarget(restarted)
	wait[TargetRemoved](t, f.rec)
}

func TestEngineDryRun(t *testing.T) {
	f := newEngineFixture(t, Config{DryRun: true})
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	ev := wait[DryRun](t, f.rec)
	want := []string{"/app/a", "/app/d", "/app/d/x", "/app/with space", "/app/with space/ü"}
	if strings.Join(ev.Copy, ",") != strings.Join(want, ",") || len(ev.Delete) != 0 {
		t.Errorf("dry run = %+v", ev)
	}
	wait[InitialSync](t, f.rec)
	if _, err := os.Stat(f.remote("web-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dry run changed the container: %v", err)
	}
}

func TestEngineOnce(t *testing.T) {
	f := newEngineFixture(t, Config{Initial: planner.InitialMirror})
	f.ex.Fail = func(tg Target, argv []string) error {
		if tg.Pod == "broken" {
			return localexec.ExitCode(2)
		}
		return nil
	}
	f.e.AddTarget(podTarget("web-1"))
	f.e.AddTarget(podTarget("broken"))
	ok, err := f.e.Once(context.Background())
	if err != nil || ok {
		t.Errorf("Once = %v, %v; want false", ok, err)
	}
	f.e.RemoveTarget(podTarget("broken"))
	writeTree(t, f.remote("web-1"), map[string]string{"stale": "deleted by mirror"})
	ok, err = f.e.Once(context.Background())
	if err != nil || !ok {
		t.Errorf("Once = %v, %v; want true", ok, err)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
}

// A batch with nothing for the container (a touch: same content, new mtime)
// runs no exec at all: one would cost a round trip per replica and report a
// pod that is going away as an error.
func TestEngineEmptyBatchRunsNoExec(t *testing.T) {
	f := newEngineFixture(t, Config{})
	var calls atomic.Int32
	f.ex.Fail = func(Target, []string) error { calls.Add(1); return nil }
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatalf("initial sync = %+v", ev)
	}
	before := calls.Load()
	name := filepath.Join(f.local, "a")
	later := time.Now().Add(time.Hour)
	must(t, os.Chtimes(name, later, later))
	b := f.batch(t, coalesce.Change{Root: f.local, Path: name}, 1)
	if b.Changed != 0 || b.Deleted != 0 || b.Failed != 0 {
		t.Errorf("batch = %+v", b)
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("an empty batch ran %d execs, want 0", n)
	}
}

// A target whose sync failed with an error that looks permanent (exec
// forbidden, as a restarted apiserver answers until its RBAC cache is warm)
// is tried again by its backoff timer, with no new change to trigger it.
func TestEngineRetriesPermanentLookingFailure(t *testing.T) {
	f := newEngineFixture(t, Config{}, WithRetry(remote.RetryPolicy{Tries: 1}))
	var forbidden atomic.Bool
	forbidden.Store(true)
	f.ex.Fail = func(Target, []string) error {
		if forbidden.Load() {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "pods/exec"}, "web-1", errors.New("RBAC: not ready"))
		}
		return nil
	}
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err == nil || remote.IsTransient(ev.Err) {
		t.Fatalf("initial sync = %+v, want a permanent-looking failure", ev)
	}
	forbidden.Store(false)
	testwait.Waiters(t, f.fc, 1)
	f.fc.Step(retryAfter)
	if ev := wait[Recovered](t, f.rec); ev.Failures != 1 || ev.Duration != retryAfter || ev.Target.Pod != "web-1" {
		t.Fatalf("recovered = %+v, want 1 failure %s ago", ev, retryAfter)
	}
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil || ev.Files != 5 {
		t.Fatalf("retried initial sync = %+v", ev)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
}

// TestEngineEarlyCopiesCountInTheirBatch: a peek's copies go before their
// batch is cut, its deletes wait for the batch, and the batch's report counts
// both.
func TestEngineEarlyCopiesCountInTheirBatch(t *testing.T) {
	f := newEngineFixture(t, Config{OnSync: "true"})
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	f.onSyncs(t, 1)

	writeTree(t, f.local, map[string]string{"new": "n"})
	must(t, os.Remove(filepath.Join(f.local, "a")))
	newPath, gonePath := filepath.Join(f.local, "new"), filepath.Join(f.local, "a")
	f.e.dispatchPeek([]string{newPath, gonePath})
	f.onSyncs(t, 1) // the early pass ran
	diffTrees(t, "remote after the peek", readTree(t, f.remote("web-1")),
		treeOf(t, map[string]string{"a": "a", "d/x": "x", "with space/ü": "u", "new": "n"}))

	// The next batch (here the delete's) counts the early copy.
	b := f.batch(t, coalesce.Change{Root: f.local, Path: gonePath}, 1)
	if b.Changed != 1 || b.Deleted != 1 || b.Failed != 0 || len(b.Names) != 1 || b.Names[0] != "/app/new" {
		t.Errorf("batch = %+v, want the early copy and the delete", b)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
}

// gatedExecutor holds each exec while its gate is armed, and says on entered
// that one is held.
type gatedExecutor struct {
	Executor
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedExecutor) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if g.armed.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// TestEngineMergedBatchesCountOnce: batches that reach a busy target are
// applied in one pass; its counts go to one of their reports, not to each
// (a pass that merged two batches was counted twice in every total).
func TestEngineMergedBatchesCountOnce(t *testing.T) {
	g := &gatedExecutor{entered: make(chan struct{}, 1), release: make(chan struct{})}
	f := newWrappedFixture(t, Config{}, func(ex Executor) Executor { g.Executor = ex; return g })
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	dispatch := func(names ...string) {
		b := &coalesce.Batch{Paths: map[string]struct{}{}, Rescans: map[string]struct{}{}, First: f.fc.Now()}
		for _, n := range names {
			writeTree(t, f.local, map[string]string{n: n + "-new"})
			b.Paths[filepath.Join(f.local, n)] = struct{}{}
		}
		f.e.dispatch(b)
	}
	g.armed.Store(true)
	dispatch("one")
	testwait.Result(t, g.entered, "the first batch's exec")
	dispatch("two")
	dispatch("three", "four")
	close(g.release)
	evs := waitCount[Batch](t, f.rec, 3)
	changed := 0
	for _, b := range evs {
		changed += b.Changed
	}
	if changed != 4 {
		t.Errorf("batches %+v: %d changes in all, want 4 (each file once)", evs, changed)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
}

// A Visit whose target goes while its fn runs returns only once fn returned: the caller reads
// what fn wrote (session's receipts read the generations a check collected). Before, Visit
// returned ErrNotSynced at the target's cancel while fn still ran on the worker (a data race
// `go test -race` saw in TestRunRestartProcess).
func TestVisitReturnsOnceItsFnEnded(t *testing.T) {
	f := newEngineFixture(t, Config{})
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatalf("initial sync = %+v", ev)
	}
	inFn, release := make(chan struct{}), make(chan struct{})
	var wrote bool
	returned := make(chan error, 1)
	go func() {
		err := f.e.Visit(context.Background(), podTarget("web-1"), func(v *Visit) error {
			close(inFn)
			<-v.Ctx.Done()
			<-release
			wrote = true
			return v.Ctx.Err()
		})
		returned <- err
	}()
	<-inFn
	f.e.RemoveTarget(podTarget("web-1"))
	select {
	case err := <-returned:
		close(release)
		t.Fatalf("Visit returned (%v) while its fn still ran", err)
	case <-time.After(200 * time.Millisecond): // how long the bug is looked for, not a bound on the product
	}
	close(release)
	if err := <-returned; !errors.Is(err, ErrNotSynced) || !errors.Is(err, context.Canceled) {
		t.Errorf("Visit of a target removed while its fn ran = %v, want ErrNotSynced, with fn's error", err)
	}
	if !wrote {
		t.Error("fn's write is not seen after Visit returned")
	}
}
