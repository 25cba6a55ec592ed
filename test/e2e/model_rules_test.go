//go:build e2e

package e2e

import (
	"path/filepath"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// TestModelVerdict holds TestModel's rules (model.verdict) to cases worked out by hand, each
// the README's or issue 31's words: a model that let anything pass would prove nothing. The
// versions are sums as the model keeps them (16 hex digits); "" is absent.
func TestModelVerdict(t *testing.T) {
	const (
		a, b, x, y = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "cccccccccccccccc", "dddddddddddddddd"
		local      = "/tree"
		p          = "gen/a.txt"
	)
	abs := filepath.Join(local, p)
	full := func(v string) string {
		if v == "" {
			return ""
		}
		return v + "000000000000000000000000000000000000000000000000"
	}
	conflict := func(l, r string) sessiontest.Event {
		return sessiontest.Event{Type: "conflict", Path: abs, LocalSha256: full(l), RemoteSha256: full(r)}
	}
	syncedBack := sessiontest.Event{Type: "synced-back", Paths: []string{abs}}
	// Changes are made at event 1 of session 0 (one event before them).
	at := evPos{0, 1}
	l := func(sum string) change { return change{side: 'L', sum: sum, at: at} }
	c := func(sum string) change { return change{side: 'C', sum: sum, at: at} }
	before := sessiontest.Event{Type: "batch"}
	heldBack := sessiontest.Event{Type: "error", Error: "held 1 deletes from the container: with the 80 deleted just before, more than 50 and more than half of the 120 listed"}

	for _, tc := range []struct {
		name    string
		kind    roundKind
		deletes bool
		prev    pair
		chs     []change
		events  []sessiontest.Event // after the first
		cur     pair
		ok      bool
	}{
		{"running: nothing changed, nothing moves", running, false, pair{a, a}, nil, nil, pair{a, a}, true},
		{"running: nothing changed, yet it moved", running, false, pair{a, a}, nil, nil, pair{b, b}, false},
		{"running: a local save goes up", running, false, pair{a, a}, []change{l(b)}, nil, pair{b, b}, true},
		{"running: a local save lost", running, false, pair{a, a}, []change{l(b)}, nil, pair{a, a}, false},
		{"running: a container write comes home", running, false, pair{a, a}, []change{c(b)}, nil, pair{b, b}, true},
		{"running: local then container: the container's is the last", running, false, pair{a, a}, []change{l(b), c(x)}, nil, pair{x, x}, true},
		{"running: local then container: the local save won, the container's write lost", running, false, pair{a, a}, []change{l(b), c(x)}, nil, pair{b, b}, false},
		{"running: both changed, a conflict reported", running, false, pair{a, a}, []change{l(b), c(x)}, []sessiontest.Event{conflict(b, x)}, pair{b, x}, true},
		{"running: both changed, no conflict reported", running, false, pair{a, a}, []change{l(b), c(x)}, nil, pair{b, x}, false},
		{"running: a local delete, then the container puts the same bytes back: the delete goes", running, false, pair{a, a}, []change{l(""), c(a)}, nil, pair{"", ""}, true},
		{"running: a local delete, then the container writes other bytes: they stay", running, false, pair{a, a}, []change{l(""), c(b)}, nil, pair{"", ""}, false},
		{"running: a container delete, then a local copy of the same bytes over it: the delete stays there", running, false, pair{a, a}, []change{c(""), l(a)}, nil, pair{a, ""}, true},
		{"running: the same, with deletes coming home: it comes home", running, true, pair{a, a}, []change{c(""), l(a)}, nil, pair{"", ""}, true},
		{"running: a container delete that stayed there, then a local copy of the same bytes: it stays", running, false, pair{a, ""}, []change{l(a)}, nil, pair{a, ""}, true},
		{"running: a container delete that stayed there, then a local write of other bytes: they go up", running, false, pair{a, ""}, []change{l(b)}, nil, pair{b, ""}, false},
		{"running: a container delete, then a local write of other bytes: they go up", running, false, pair{a, a}, []change{c(""), l(b)}, nil, pair{b, ""}, false},
		{"running: a conflict that names other versions", running, false, pair{a, a}, []change{l(b), c(x)}, []sessiontest.Event{conflict(b, y)}, pair{b, x}, false},
		{"running: container then local, seen first: the local save wins", running, false, pair{a, a}, []change{c(b), l(x)}, []sessiontest.Event{syncedBack}, pair{x, x}, true},
		{"running: container then local, never seen: the upload replaced it", running, false, pair{a, a}, []change{c(b), l(x)}, nil, pair{x, x}, false},
		{"running: a container copy of the same bytes over it, then a local save: the save goes", running, false, pair{a, a}, []change{c(a), l(x)}, nil, pair{x, x}, true},
		{"running: the same after a conflict: the save wins over what the container held", running, false, pair{b, a}, []change{c(a), l(x)}, nil, pair{x, x}, true},
		{"running: a container copy of other bytes, then a local save, never seen: replaced", running, false, pair{a, a}, []change{c(b), c(a), c(y), l(x)}, nil, pair{x, x}, false},
		{"running: after a conflict the next local save replaced a later container change unseen", running, false, pair{a, a}, []change{c(b), l(x), c(y), l(a)}, []sessiontest.Event{conflict(x, b)}, pair{a, a}, false},
		{"running: after a conflict a later container change is a conflict again", running, false, pair{a, a}, []change{c(b), l(x), c(y), l(a)}, []sessiontest.Event{conflict(x, b), conflict(a, y)}, pair{a, y}, true},
		{"running: a container delete, then a local write: the modification wins", running, true, pair{a, a}, []change{c(""), l(x)}, nil, pair{x, x}, true},
		{"running: a container delete stays there without --sync-back-deletes", running, false, pair{a, a}, []change{c("")}, nil, pair{a, ""}, true},
		{"running: with it, it comes home", running, true, pair{a, a}, []change{c("")}, nil, pair{"", ""}, true},
		{"running: with it, it must come home", running, true, pair{a, a}, []change{c("")}, nil, pair{a, ""}, false},
		{"running: a write that came home before its delete", running, false, pair{"", ""}, []change{c(b), c("")}, nil, pair{b, ""}, true},
		{"running: a local delete against a container modification: the modification wins", running, false, pair{a, a}, []change{c(b), l("")}, nil, pair{b, b}, true},
		{"running: a local delete of what the container never changed comes back", running, false, pair{a, a}, []change{l("")}, nil, pair{a, a}, false},
		{"running: a conflict stays until a local save", running, false, pair{a, b}, nil, nil, pair{a, b}, true},
		{"running: after a conflict the next local save wins", running, false, pair{a, b}, []change{l(x)}, nil, pair{x, x}, true},

		{"stopped: a container change comes home at the start", stopped, false, pair{a, a}, []change{c(b)}, nil, pair{b, b}, true},
		{"stopped: a container change overwritten by the start (no saved ancestor)", stopped, false, pair{a, a}, []change{c(b)}, nil, pair{a, a}, false},
		{"stopped: a local delete goes up", stopped, false, pair{a, a}, []change{l("")}, nil, pair{"", ""}, true},
		{"stopped: a local delete left in the container", stopped, false, pair{a, a}, []change{l("")}, nil, pair{"", a}, false},
		{"stopped: both changed: a conflict", stopped, false, pair{a, a}, []change{l(b), c(x)}, []sessiontest.Event{conflict(b, x)}, pair{b, x}, true},
		{"stopped: both changed: the local side won", stopped, false, pair{a, a}, []change{l(b), c(x)}, nil, pair{b, b}, false},
		{"stopped: a local edit against a container delete goes up", stopped, false, pair{a, a}, []change{c(""), l(b)}, nil, pair{b, b}, true},
		{"stopped: a local edit against a container delete, neither sent nor said", stopped, false, pair{a, a}, []change{c(""), l(b)}, nil, pair{b, ""}, false},
		{"stopped: a container delete without --sync-back-deletes stays there", stopped, false, pair{a, a}, []change{c("")}, nil, pair{a, ""}, true},
		{"stopped: a container delete against a local conflicting version: the modification wins", stopped, true, pair{a, b}, []change{c("")}, nil, pair{a, a}, true},
		{"stopped: a container delete of what the local side also held must come home", stopped, true, pair{a, a}, []change{c("")}, nil, pair{a, a}, false},
		{"stopped: the same, held by sync-back's guard with a burst: it stays", stopped, true, pair{a, a}, []change{c("")}, []sessiontest.Event{heldBack}, pair{a, ""}, true},
		{"running: a container delete held by sync-back's guard with a burst stays", running, true, pair{a, a}, []change{c("")}, []sessiontest.Event{heldBack}, pair{a, ""}, true},
		{"running: a container delete with no hold must come home", running, true, pair{a, a}, []change{c("")}, []sessiontest.Event{{Type: "error", Error: "scanning: exec stream closed"}}, pair{a, ""}, false},
		{"stopped: a local delete against the container's conflicting version: the modification wins", stopped, false, pair{a, b}, []change{l("")}, nil, pair{b, b}, true},
		{"stopped: with it, it comes home", stopped, true, pair{a, a}, []change{c("")}, nil, pair{"", ""}, true},

		{"one-way: a local save goes up", oneway, false, pair{a, a}, []change{l(b)}, nil, pair{b, b}, true},
		{"one-way: a local delete goes up", oneway, false, pair{a, a}, []change{l("")}, nil, pair{"", ""}, true},
		{"one-way: a local save left out of the container", oneway, false, pair{a, a}, []change{l(b)}, nil, pair{b, a}, false},
		{"one-way: the local version replaces a conflict's container version", oneway, false, pair{a, b}, nil, nil, pair{a, a}, true},
		{"one-way: a conflict's container version comes home", oneway, false, pair{a, b}, nil, nil, pair{b, b}, false},
		{"one-way: what only the container has stays", oneway, false, pair{"", b}, nil, nil, pair{"", b}, true},
		{"one-way: or goes, deleted since by the local side", oneway, false, pair{"", b}, nil, nil, pair{"", ""}, true},
		{"one-way: nothing comes home", oneway, false, pair{"", b}, nil, nil, pair{b, b}, false},
		{"one-way: created and deleted locally, never sent: the container keeps its own", oneway, false, pair{"", b}, []change{l(a), l("")}, nil, pair{"", b}, true},
		{"one-way: created and deleted locally, both sent: the container loses its own", oneway, false, pair{"", b}, []change{l(a), l("")}, nil, pair{"", ""}, true},
		{"one-way: created and deleted locally: the create must not stay", oneway, false, pair{"", b}, []change{l(a), l("")}, nil, pair{"", a}, false},

		{"restarted: the new container gets the local tree", restarted, false, pair{a, b}, nil, nil, pair{a, a}, true},
		{"restarted: the container's version came home from the new container", restarted, false, pair{a, b}, nil, nil, pair{b, b}, false},
		{"restarted: nothing of the old container is left", restarted, false, pair{"", b}, nil, nil, pair{"", ""}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := append([]sessiontest.Event{before}, tc.events...)
			m := &model{t: t, deletes: tc.deletes, local: local, running: true,
				printed: []func() []sessiontest.Event{func() []sessiontest.Event { return evs }},
				state:   map[string]pair{p: tc.prev}, changes: map[string][]change{p: tc.chs}}
			why := m.verdict(tc.kind, p, tc.cur)
			if (why == "") != tc.ok {
				t.Errorf("verdict %q, want ok %v", why, tc.ok)
			}
		})
	}

	// A start whose ancestor event says none or discarded (another key ran since, or the saved
	// state could not be used): the rules of a first start (docs/state.md), whatever changed.
	// An unlisted path's case uses src/main.py.
	for _, tc := range []struct {
		name   string
		from   string
		p      string
		prev   pair
		chs    []change
		events []sessiontest.Event
		cur    pair
		ok     bool
	}{
		{"none: a container change, local unchanged, kept as a conflict", "none", p, pair{a, a}, []change{c(b)}, []sessiontest.Event{conflict(a, b)}, pair{a, b}, true},
		{"none: a container change replaced by the local version", "none", p, pair{a, a}, []change{c(b)}, nil, pair{a, a}, true},
		{"none: a container change kept with no conflict reported", "none", p, pair{a, a}, []change{c(b)}, nil, pair{a, b}, false},
		{"none: a container change comes home over the local version", "none", p, pair{a, a}, []change{c(b)}, nil, pair{b, b}, false},
		{"none: a local delete, the container's copy comes home", "none", p, pair{a, a}, []change{l("")}, nil, pair{a, a}, true},
		{"none: a local delete, the container's copy left there (listed: it comes home)", "none", p, pair{a, a}, []change{l("")}, nil, pair{"", a}, false},
		{"none: unlisted, a local delete leaves the container's copy", "none", "src/main.py", pair{a, a}, []change{l("")}, nil, pair{"", a}, true},
		{"none: a container delete, the local version sent again", "discarded", p, pair{a, a}, []change{c("")}, nil, pair{a, a}, true},
		{"none: a local save goes up", "none", p, pair{a, a}, []change{l(b)}, nil, pair{b, b}, true},
		{"none: a local save lost", "none", p, pair{a, a}, []change{l(b)}, nil, pair{a, a}, false},
		{"saved: a container change, local unchanged, must come home", "saved", p, pair{a, a}, []change{c(b)}, []sessiontest.Event{conflict(a, b)}, pair{a, b}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := append([]sessiontest.Event{before}, tc.events...)
			m := &model{t: t, local: local, running: true, startFrom: tc.from,
				printed: []func() []sessiontest.Event{func() []sessiontest.Event { return evs }},
				state:   map[string]pair{tc.p: tc.prev}, changes: map[string][]change{tc.p: tc.chs}}
			why := m.verdict(stopped, tc.p, tc.cur)
			if (why == "") != tc.ok {
				t.Errorf("verdict %q, want ok %v", why, tc.ok)
			}
		})
	}
}
