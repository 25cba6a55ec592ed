package filesync

import (
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
	"github.com/livesync-dev/kubectl-livesync/pkg/threeway"
)

// Ancestry is where the engine finds each target's saved ancestor and hands
// its confirmed index over to be kept (pkg/session implements it over
// pkg/syncstate); WithAncestry sets it.
type Ancestry interface {
	// Start returns what t's initial sync starts from; called once per
	// initial sync, before anything is listed.
	Start(t Target) Start
	// Confirmed hands over t's confirmed index, one list per mapping, each
	// time it changed and t's worker is between passes; the implementation
	// saves it when it sees fit. Not called in a dry run.
	Confirmed(t Target, mappings []syncstate.Mapping)
}

// WithAncestry sets where the engine loads and keeps saved ancestors.
func WithAncestry(a Ancestry) Option { return func(e *Engine) { e.anc = a } }

// Start is what a target's initial sync starts from.
type Start struct {
	// Saved is the ancestor this very container confirmed (same
	// incarnation), one list per mapping; nil when there is none.
	Saved []syncstate.Mapping
	// Cache holds local stat records of another incarnation's ancestor:
	// they only spare hashing an unchanged local file. Nil when none.
	Cache []syncstate.Mapping
	// SavedAt is when the records were saved: one whose file changed in
	// the last second before it is hashed anyway (git's "racily clean").
	SavedAt time.Time
	// Started is when the container started (zero when unknown): a listed
	// file it wrote since is its own, not the image's.
	Started time.Time
	// From is "saved", "discarded" or "none"; Why says why, one line.
	From, Why string
}

// Start kinds (Start.From).
const (
	StartSaved     = "saved"
	StartDiscarded = "discarded"
	StartNone      = "none"
)

// Ancestor reports which ancestor a target's initial sync starts from and
// why (see Start), before it lists anything.
type Ancestor struct {
	Target    Target
	Remote    planner.RemotePath // the mapping's remote directory
	From, Why string
	// Mode is the initial mode the sync runs under: with mirror or none,
	// a saved ancestor is not what decides.
	Mode planner.InitialMode
	// ThreeWay: the start was a three-way pass against the saved ancestor.
	ThreeWay bool
	// Decided counts the paths per decision (threeway.Action names), threeway.Keep
	// left out; Examples holds a few, "action /remote/path".
	Decided  map[string]int
	Examples []string
}

func (Ancestor) event() {}

// Lister is what the engine's UploadGuard also implements when sync-back
// runs: whether a path of mapping i comes back from t (t is the source
// replica and the path is listed). A start leaves such a path's container
// change for sync-back to bring home or report as a conflict.
type Lister interface {
	Listed(t Target, i int, rel string, isDir bool) bool
}

// listedIn returns the engine's Lister for t and mapping i; never true
// without sync-back.
func (e *Engine) listedIn(t Target, i int) func(rel string, isDir bool) bool {
	l, ok := e.guard.(Lister)
	if !ok || e.maps[i].File {
		return func(string, bool) bool { return false }
	}
	return func(rel string, isDir bool) bool { return l.Listed(t, i, rel, isDir) }
}

// mapping returns mapping i's saved ancestor (this incarnation's) and
// stat cache (another's), encoded; zero where there is none.
func (st Start) mapping(i int) (saved, cache syncstate.Mapping) {
	if i < len(st.Saved) {
		saved = st.Saved[i]
	}
	if i < len(st.Cache) {
		cache = st.Cache[i]
	}
	return saved, cache
}

// indexes builds the indexes of saved and cache (see mapping) on a
// goroutine of its own, nil where there is none: for 100,000 records that
// takes 0.2–0.35 s, which a start spends walking the local tree anyway.
func indexes(saved, cache syncstate.Mapping) <-chan [2]*planner.Index {
	c := make(chan [2]*planner.Index, 1)
	go func() {
		var x [2]*planner.Index
		for i, rs := range []syncstate.Mapping{saved, cache} {
			if !rs.IsZero() {
				x[i] = planner.IndexOf(rs)
			}
		}
		c <- x
	}()
	return c
}

// startEvent describes a mapping's start: which ancestor, why, and with
// one, how many paths each decision took (threeway.Keep left out).
func startEvent(t Target, m *planner.Resolved, st Start, mode planner.InitialMode, threeWay bool, decided map[string]threeway.Action) Ancestor {
	ev := Ancestor{Target: t, Remote: m.RemoteDir(), From: st.From, Why: st.Why, Mode: mode}
	switch {
	case st.From == StartSaved && !threeWay && mode != planner.InitialUpload:
		ev.Why += fmt.Sprintf("; --initial=%s decides, the saved ancestor only spares hashing", mode)
	case st.From == StartSaved && !threeWay:
		ev.Why += "; the container could not be listed: the local side wins"
	}
	ev.ThreeWay = threeWay
	if len(decided) > 0 {
		ev.Decided = map[string]int{}
		for rel, a := range decided {
			ev.Decided[a.String()]++
			if len(ev.Examples) < 5 {
				ev.Examples = append(ev.Examples, a.String()+" "+path.Join(string(m.RemoteDir()), m.RemoteName(rel)))
			}
		}
		slices.Sort(ev.Examples)
	}
	return ev
}
