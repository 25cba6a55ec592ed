package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// hangOnce runs the first apply that extracts a tar once armed as script
// instead (a stand-in for a frozen container), then behaves normally. With
// readStdin the script gets the tar stream, and drained is closed once it was
// read to the end; without, nothing reads it.
type hangOnce struct {
	Executor
	script    string
	readStdin bool
	started   chan struct{}
	drained   chan struct{}

	mu          sync.Mutex
	armed, done bool
}

func (h *hangOnce) arm() {
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
}

func (h *hangOnce) Exec(ctx context.Context, t Target, argv []string, stdin0 io.Reader, stdout, stderr io.Writer) error {
	stdin := stdin0
	h.mu.Lock()
	hang := h.armed && !h.done && len(argv) > 5 && argv[3] == "livesync" && (argv[5] == "x" || argv[5] == "z")
	h.done = h.done || hang
	h.mu.Unlock()
	if hang {
		close(h.started)
		argv = []string{"sh", "-c", h.script}
		stdin = nil
		if h.readStdin {
			stdin = &eofReader{r: stdin0, eof: h.drained}
		}
	}
	return h.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// eofReader closes eof when r reports io.EOF.
type eofReader struct {
	r   io.Reader
	eof chan struct{}
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		close(e.eof)
	}
	return n, err
}

// A remote call that stops making progress is cancelled after ExecTimeout
// (on the fake clock), reported as a transient timeout, and the target is
// re-synced. Before, the exec had no deadline and the target hung for good.
func TestEngineStalledExecTimesOutAndResyncs(t *testing.T) {
	// The clock moves only once the stream has stopped: a byte moving after
	// that would rightly restart the deadline.
	tests := []struct {
		name      string
		script    string
		readStdin bool
	}{
		{name: "stdin never read", script: "sleep 1000"},
		{name: "script never exits", script: "cat >/dev/null; sleep 1000", readStdin: true},
		// busybox: the shell exits, its background child holds the streams.
		{name: "background child holds the streams", script: "cat >/dev/null; sleep 1000 &", readStdin: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &hangOnce{script: tt.script, readStdin: tt.readStdin, started: make(chan struct{}), drained: make(chan struct{})}
			f := newWrappedFixture(t, Config{}, func(ex Executor) Executor { h.Executor = ex; return h }, WithRetry(remote.RetryPolicy{Tries: 1}))
			f.e.AddTarget(podTarget("web-1"))
			f.run(t)
			if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
				t.Fatal(ev.Err)
			}
			h.arm()
			writeTree(t, f.local, map[string]string{"first": strings.Repeat("1", 1<<20)})
			f.changes <- coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "first")}
			testwait.Waiters(t, f.fc, 1)
			f.fc.Step(coalesce.DefaultQuiet)
			testwait.Result(t, h.started, "the hanging exec")
			if tt.readStdin {
				testwait.Result(t, h.drained, "reading the tar stream")
			}
			testwait.Waiters(t, f.fc, 1) // its deadline
			f.fc.Step(DefaultExecTimeout)
			if b := wait[Batch](t, f.rec); b.Failed != 1 {
				t.Fatalf("batch = %+v, want it failed", b)
			}
			errs := f.rec.errors()
			want := `copying files in container "app" of pod "web-1" timed out after 30s (no progress): the container may be frozen or overloaded; livesync will retry and re-sync`
			if len(errs) != 1 || errs[0].Err.Error() != want || !remote.IsTransient(errs[0].Err) || !errors.Is(errs[0].Err, remote.ErrTimeout) {
				t.Fatalf("errors = %v, want one transient %q", errs, want)
			}
			// The target is dirty: the next batch (or its own retry timer)
			// compares the whole tree, so the file of the failed batch arrives.
			writeTree(t, f.local, map[string]string{"second": "2"})
			if b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "second")}, 2); b.Failed != 0 || b.Changed != 2 {
				t.Errorf("batch = %+v", b)
			}
			assertSameTree(t, f.local, f.remote("web-1"))
		})
	}
}

// onSyncGate holds every on-sync exec until the test releases it, and
// records what each saw in $LIVESYNC_CHANGED; other execs pass through.
type onSyncGate struct {
	Executor
	started chan string   // $LIVESYNC_CHANGED of each run, when it starts
	release chan struct{} // one value lets one run finish
	ended   chan error    // how each run ended: nil or its ctx's error
}

func newOnSyncGate() *onSyncGate {
	return &onSyncGate{started: make(chan string, 10), release: make(chan struct{}), ended: make(chan error, 10)}
}

func (g *onSyncGate) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) < 5 || argv[3] != "livesync-on-sync" {
		return g.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
	}
	g.started <- argv[4]
	select {
	case <-g.release:
		fmt.Fprintln(stdout, "reloaded")
		g.ended <- nil
		return nil
	case <-ctx.Done():
		g.ended <- ctx.Err()
		return ctx.Err()
	}
}

// Batches applied while on-sync runs coalesce into one follow-up run with
// the union of their paths; the batches themselves are not held up.
func TestEngineOnSyncCoalesces(t *testing.T) {
	g := newOnSyncGate()
	f := newWrappedFixture(t, Config{OnSync: "true"}, func(ex Executor) Executor { g.Executor = ex; return g })
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	wait[InitialSync](t, f.rec)
	if got := testwait.Result(t, g.started, "the initial on-sync"); !strings.Contains(got, "/app/d/x") {
		t.Errorf("initial on-sync saw %q", got)
	}
	// Two batches while the first run hangs: each is applied at once (the
	// run's deadline timer also waits on the clock).
	for _, name := range []string{"x1", "x2"} {
		writeTree(t, f.local, map[string]string{name: name})
		if b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, name)}, 2); b.Failed != 0 || b.Changed != 1 {
			t.Fatalf("batch = %+v", b)
		}
	}
	g.release <- struct{}{}
	if got := testwait.Result(t, g.started, "the follow-up on-sync"); got != "/app/x1\n/app/x2" {
		t.Errorf("follow-up on-sync saw %q, want both batches' paths", got)
	}
	g.release <- struct{}{}
	evs := f.onSyncs(t, 2)
	if evs[0].Output != "reloaded\n" || evs[0].Target != podTarget("web-1") {
		t.Errorf("on-sync event = %+v", evs[0])
	}
	select {
	case got := <-g.started:
		t.Errorf("a third on-sync run (%q): runs were queued, not coalesced", got)
	default:
	}
}

// A command that leaves a background process holding its output keeps the
// exec open; it is cut off after OnSyncTimeout and reported, and neither it
// nor its follow-up holds up the next batch. Real busybox, since that is
// where the stream-holding behaviour lives.
func TestEngineOnSyncBackgroundChildDoesNotBlock(t *testing.T) {
	f := newEngineFixture(t, Config{OnSync: "sleep 1000 &"})
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	testwait.Waiters(t, f.fc, 1) // the on-sync run's deadline
	writeTree(t, f.local, map[string]string{"b": "b"})
	if b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "b")}, 2); b.Failed != 0 || b.Changed != 1 {
		t.Fatalf("batch = %+v", b)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
	f.fc.Step(DefaultOnSyncTimeout)
	ev := waitCount[OnSync](t, f.rec, 1)[0]
	if !errors.Is(ev.Err, remote.ErrTimeout) || ev.ExitCode != -1 ||
		!strings.HasPrefix(ev.Err.Error(), "on-sync command timed out after 30s and was left running in the container") {
		t.Errorf("on-sync = %+v", ev)
	}
	// The follow-up run for the batch hangs the same way; shutting down
	// cancels it.
	testwait.Waiters(t, f.fc, 1)
	f.cancel()
	if err := testwait.Result(t, f.done, "Run"); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	f.done <- nil
}

// --once waits for the on-sync runs of the initial syncs, and no longer:
// a hanging one is cut off after OnSyncTimeout. The result still says
// whether the sync converged; the on-sync outcome is reported.
func TestEngineOnceWaitsForOnSync(t *testing.T) {
	tests := []struct {
		name     string
		cmd      string
		step     bool // the command hangs: move the clock past its timeout
		wantCode int
		wantOut  string
	}{
		// What it printed may or may not have arrived when the timeout
		// fires: Output is not checked.
		{name: "background child holds the streams", cmd: "echo starting; sleep 1000 &", step: true, wantCode: -1},
		{name: "failing command", cmd: "echo oops >&2; exit 3", wantCode: 3, wantOut: "oops\n"},
		{name: "quick command", cmd: `printf '%s\n' "$LIVESYNC_CHANGED" | wc -l`, wantCode: 0, wantOut: "5\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newEngineFixture(t, Config{OnSync: tt.cmd})
			f.e.AddTarget(podTarget("web-1"))
			type once struct {
				ok  bool
				err error
			}
			done := make(chan once, 1)
			go func() {
				ok, err := f.e.Once(context.Background())
				done <- once{ok, err}
			}()
			wait[InitialSync](t, f.rec)
			if tt.step {
				testwait.Waiters(t, f.fc, 1)
				f.fc.Step(DefaultOnSyncTimeout)
			}
			if r := testwait.Result(t, done, "Once"); !r.ok || r.err != nil {
				t.Errorf("Once = %v, %v; want true", r.ok, r.err)
			}
			ev := waitCount[OnSync](t, f.rec, 1)[0]
			if ev.ExitCode != tt.wantCode || !tt.step && strings.TrimLeft(ev.Output, " ") != tt.wantOut || (ev.Err != nil) != (tt.wantCode == -1) {
				t.Errorf("on-sync = %+v", ev)
			}
		})
	}
}

// Removing a target cancels its on-sync run, and its runner stops.
func TestEngineRemoveTargetCancelsOnSync(t *testing.T) {
	g := newOnSyncGate()
	f := newWrappedFixture(t, Config{OnSync: "true"}, func(ex Executor) Executor { g.Executor = ex; return g })
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	wait[InitialSync](t, f.rec)
	testwait.Result(t, g.started, "the on-sync run")
	f.e.RemoveTarget(podTarget("web-1"))
	if err := testwait.Result(t, g.ended, "the cancelled on-sync run"); !errors.Is(err, context.Canceled) {
		t.Errorf("on-sync run ended with %v, want cancelled", err)
	}
	wait[TargetRemoved](t, f.rec)
	if evs := waitCount[OnSync](t, f.rec, 0); len(evs) != 0 {
		t.Errorf("a removed target's run was reported: %+v", evs)
	}
}

// Shutting down with on-sync runs in flight (one hanging, one queued)
// leaves no goroutine behind.
func TestEngineOnSyncNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		g := newOnSyncGate()
		f := newWrappedFixture(t, Config{OnSync: "true"}, func(ex Executor) Executor { g.Executor = ex; return g })
		f.e.AddTarget(podTarget("web-1"))
		f.e.AddTarget(podTarget("web-2"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f.e.Run(ctx, f.changes) }()
		testwait.Result(t, g.started, "an on-sync run")
		testwait.Result(t, g.started, "an on-sync run")
		writeTree(t, f.local, map[string]string{"x": "x"})
		f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "x")}, 3)
		cancel()
		testwait.Result(t, done, "Run")
	}()
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}

// Paths pile up while a run is in progress; past maxChangedEnv the runner
// keeps only the fact that a run is due, and the run gets the remote roots.
func TestOnSyncRunnerBoundsPaths(t *testing.T) {
	var argvs [][]string // r.loop runs below, on this goroutine
	ex := &localExecutor{Fail: func(_ Target, argv []string) error { argvs = append(argvs, argv); return nil }}
	e := New(ex, Config{OnSync: "true", Mappings: []planner.Mapping{{Local: planner.LocalPath(t.TempDir()), Remote: "/app"}}})
	// Not started: the loop runs below, once everything is submitted.
	r := &onSyncRunner{e: e, t: testTarget, ctx: context.Background(), wake: make(chan struct{}, 1), done: make(chan struct{}),
		paths: map[string]struct{}{}}
	r.do = r.run
	for i := range 3000 {
		r.submit([]string{fmt.Sprintf("/app/some/rather/long/path/%05d", i), "/app/same"})
	}
	if r.paths != nil {
		t.Fatalf("%d paths kept (%d bytes), want them dropped", len(r.paths), r.size)
	}
	r.close()
	r.loop()
	if len(argvs) != 1 || argvs[0][4] != "/app" {
		t.Errorf("execs = %q, want one run with the remote root", argvs)
	}
}

// AfterSync is called off the sync path after an initial sync and after
// each batch that changed something; batches applied while a call runs
// coalesce into one follow-up call.
func TestAfterSyncCoalesces(t *testing.T) {
	calls := make(chan Target, 10)
	gate := make(chan struct{})
	var n int
	var mu sync.Mutex
	hook := func(_ context.Context, tg Target) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		calls <- tg
		if !first {
			<-gate // the second call holds until the test lets it go
		}
	}
	f := newEngineFixture(t, Config{AfterSync: hook})
	f.e.AddTarget(podTarget("web-1"))
	done := make(chan error, 1)
	go func() { done <- f.e.Run(context.Background(), f.changes) }()
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	if tg := testwait.Result(t, calls, "the call after the initial sync"); tg != podTarget("web-1") {
		t.Fatalf("called for %v", tg)
	}
	writeTree(t, f.local, map[string]string{"a": "a2"})
	f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "a")}, 1)
	testwait.Result(t, calls, "the call after the first batch")
	// Two more batches while that call runs: one follow-up call for both.
	writeTree(t, f.local, map[string]string{"a": "a3"})
	f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "a")}, 1)
	writeTree(t, f.local, map[string]string{"a": "a4"})
	f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "a")}, 1)
	close(gate)
	testwait.Result(t, calls, "the coalesced call")
	close(f.changes) // Run returns once every call due has run
	if err := testwait.Result(t, done, "Run"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 3 {
		t.Fatalf("%d calls, want 3: the initial sync's, the first batch's, one for the two batches during it", n)
	}
}
