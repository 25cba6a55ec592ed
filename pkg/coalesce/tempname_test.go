package coalesce

import (
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestTempName(t *testing.T) {
	for name, want := range map[string]bool{
		"/p/.server.tmp": true, "/p/server.tmp": true, "/p/server.tmp.4242": true, "/p/x.TMP": true,
		"/p/file.part": true, "/p/out.new": true, "/p/tmpab12cd_x": true, "/p/tmp.AbC123": true,
		"/p/.main.go.Ab12Cd": true, // rsync
		"/p/server":          false, "/p/main.go": false, "/p/.eslintrc": false, "/p/.env.local": false,
		"/p/template.html": false, "/p/config.json": false, "/p/.env.x-y!zz": false,
	} {
		if got := TempName(name); got != want {
			t.Errorf("TempName(%q) = %v, want %v", name, got, want)
		}
	}
}

// A temporary file closed and then renamed over the real one (a build
// tool's save, `cp x .x.tmp && mv .x.tmp x`) is one batch with both names,
// not a batch cut on the close that sends the temporary name.
func TestTempThenRenameIsOneBatch(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := newAdaptive(fc)
	c.add(Change{Path: "/p/.server.tmp", Progress: Writing})
	fc.Step(2 * time.Second)
	c.add(Change{Path: "/p/.server.tmp", Progress: Complete})
	closed := fc.Now()
	fc.Step(3 * time.Millisecond) // mv's fork and exec: past CompleteSettle and the shortest window
	if c.due() {
		t.Fatalf("cut %s after the temporary file's close, before its rename", fc.Now().Sub(closed))
	}
	c.add(Change{Path: "/p/.server.tmp", Progress: Unknown})
	c.add(Change{Path: "/p/server", Progress: Complete})
	dueAfter(t, fc, c, time.Second)
	if got := fc.Now().Sub(closed); got != TempSettle {
		t.Errorf("due %s after the close, want %s", got, TempSettle)
	}
	if got := paths(c.take(false)); !slices.Equal(got, []string{"/p/.server.tmp", "/p/server"}) {
		t.Fatalf("batch = %v", got)
	}
	// The next save, in place, is cut on its close again.
	fc.Step(time.Second)
	c.add(Change{Path: "/p/server", Progress: Complete})
	if got := dueAfter(t, fc, c, time.Second); got != CompleteSettle {
		t.Errorf("an in-place save after it: due after %s, want %s", got, CompleteSettle)
	}
}
