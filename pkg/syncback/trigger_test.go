package syncback

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// waitEvent waits (bounded, so a broken trigger fails rather than hangs)
// for an event that ok accepts, keeping the others.
func (r *recorder) waitEvent(t *testing.T, what string, ok func(Event) bool) Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var seen []Event
	for time.Now().Before(deadline) {
		for _, ev := range r.take() {
			if ok(ev) {
				return ev
			}
			seen = append(seen, ev)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %s; got %v", what, seen)
	return nil
}

// runTriggered runs f's runner with ex as its trigger until the test
// ends, after the source's initial sync converged.
func (f *fixture) runTriggered(t *testing.T, ex remote.Executor) {
	f.runner.Trigger(ex)
	f.initialSync(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.runner.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	f.runner.Synced(src)
}

// TestTrigger: with inotifywait in the container (the host's, as the
// app-gnu image has it), a container write comes back although the
// interval never elapses (the runner's clock is a fake that never moves):
// the first pass runs when the source's initial sync converged (Synced), it
// starts the trigger, and the trigger's event runs the next.
func TestTrigger(t *testing.T) {
	if _, err := exec.LookPath("inotifywait"); err != nil {
		t.Fatal("needs inotifywait (apt-get install inotify-tools; hack/deps.sh installs it)")
	}
	ex := &executor{}
	f := newFixture(t, ex, Config{})
	f.runTriggered(t, ex)
	f.rec.waitEvent(t, "trigger event", func(ev Event) bool {
		tr, ok := ev.(Trigger)
		if ok && tr.Err != nil {
			t.Fatalf("trigger: %v", tr.Err)
		}
		return ok
	})
	write(t, f.remote, "gen/new.go", "from the generator", 0o644)
	f.rec.waitEvent(t, "synced-back event", func(ev Event) bool {
		sb, ok := ev.(SyncedBack)
		return ok && len(sb.Paths) > 0
	})
	if got := read(t, f.local, "gen/new.go"); got != "from the generator" {
		t.Fatalf("local gen/new.go: %q", got)
	}
	f.assertConfirmed(t, "gen/new.go", "from the generator")
}

// TestTriggerWithoutInotifywait: an image without inotifywait (busybox)
// reports it once, and passes go on at the interval.
func TestTriggerWithoutInotifywait(t *testing.T) {
	ex := &executor{Runner: *localexec.Busybox(t)}
	f := newFixture(t, ex, Config{})
	f.runTriggered(t, ex)
	ev := f.rec.waitEvent(t, "trigger event", func(ev Event) bool { _, ok := ev.(Trigger); return ok })
	if err := ev.(Trigger).Err; !errors.Is(err, remote.ErrNoInotifywait) {
		t.Fatalf("trigger without inotifywait: %v", err)
	}
}

// TestTriggerWants: which events call for a pass.
func TestTriggerWants(t *testing.T) {
	r, err := New(Config{Globs: []string{"package-lock.json", "gen/**", "db/migrate/"}}, nil, nil)
	must(t, err)
	d := watchDir{ignored: func(rel string, _ bool) bool {
		return rel == "node_modules" || len(rel) > 13 && rel[:13] == "node_modules/"
	}}
	for _, c := range []struct {
		name  string
		isDir bool
		want  bool
	}{
		{"./package-lock.json", false, true},
		{"./sub/package-lock.json", false, true},
		{"./gen/a/b.go", false, true},
		{"./db/migrate/1.sql", false, true},
		{"./src/main.go", false, false},
		{"./src", true, true}, // a directory made or moved in may hold listed files
		{"./node_modules/x/package-lock.json", false, false},
		{"./node_modules/x", true, false},
		{".", true, false},
	} {
		if got := r.wants(d, remote.WatchEvent{Name: c.name, IsDir: c.isDir}); got != c.want {
			t.Errorf("wants(%q, dir %v) = %v, want %v", c.name, c.isDir, got, c.want)
		}
	}
}
