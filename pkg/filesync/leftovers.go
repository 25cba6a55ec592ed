package filesync

import (
	"maps"
	"slices"
	"sync"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// leftovers are, per target and mapping, the files a failed apply may have
// left half placed or half taken (see apply.sh's swap), with the
// preconditions it had for them: killed after its tar (a stream fenced, an
// exec cut), it may have left a file staged beside its path, and killed
// inside a swap, what was at the path renamed aside, the path missing.
// The next apply to the target begins with their recoveries
// (remote.UnswapArgs), before anything is tested or changed, whether or
// not it places or takes them again: the path holds again what the
// container held, or what the killed batch would have left there. Both
// names are built-in ignores, so they never came home either way.
type leftovers struct {
	mu sync.Mutex
	m  map[string]map[string]string // leftoverKey → rel → precondition
}

// maxUnswap bounds the bytes of the recoveries one apply carries (see
// leftovers.take): the rest go with the next.
const maxUnswap = remote.MaxArgBytes / 8

func leftoverKey(t Target, m *planner.Resolved) string {
	return t.String() + "@" + t.ContainerID + "\x00" + string(m.RemoteDir())
}

// take returns, sorted, some of what t's mapping m may have left: the
// rels, and their recoveries.
func (l *leftovers) take(t Target, m *planner.Resolved) (rels, args []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) == 0 {
		return nil, nil // every batch asks: no key to build when nothing was left
	}
	set := l.m[leftoverKey(t, m)]
	n := 0
	for _, rel := range slices.Sorted(maps.Keys(set)) {
		a := remote.UnswapArgs(set[rel])
		if n += len(a) + 1; n > maxUnswap && len(rels) > 0 {
			break
		}
		rels, args = append(rels, rel), append(args, a)
	}
	return rels, args
}

// add records rels (with their preconditions) as maybe left in t's mapping
// m: a later failure's precondition for a rel replaces an earlier one's.
func (l *leftovers) add(t Target, m *planner.Resolved, rels map[string]string) {
	if len(rels) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := leftoverKey(t, m)
	if l.m == nil {
		l.m = map[string]map[string]string{}
	}
	if l.m[k] == nil {
		l.m[k] = map[string]string{}
	}
	maps.Copy(l.m[k], rels)
}

// done records that the recoveries of rels ran in t's mapping m.
func (l *leftovers) done(t Target, m *planner.Resolved, rels []string) {
	if len(rels) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := leftoverKey(t, m)
	for _, rel := range rels {
		delete(l.m[k], rel)
	}
	if len(l.m[k]) == 0 {
		delete(l.m, k)
	}
}
