package planner

import (
	"hash/maphash"
	"slices"
)

// table is the index's map from path to slot: the paths and slots in two
// dense slices, and an open-addressed table of their positions (linear
// probing; a delete shifts the entries after it back rather than leaving a
// tombstone). Go's map never gives back the room that deleted entries
// took: a session that created and removed 10,000 files five times over a
// tree of 100,000 held a map of twice the size it started with (12 MiB
// grown to 24 MiB), and a rebuild costs both at once. Here a delete moves
// the last entry into the hole, the probe table is 4 bytes a cell, and
// nothing grows with churn.
type table struct {
	seed  maphash.Seed
	keys  []string
	vals  []slot
	cells []int32 // position+1 in keys/vals; 0: empty. len is a power of two (or 0)
}

// minCells is the smallest probe table.
const minCells = 16

func (t *table) hash(k string) int { return int(maphash.String(t.seed, k)) & (len(t.cells) - 1) }

// find returns the cell that holds k, or the empty cell where it would go,
// and k's position (-1: absent).
func (t *table) find(k string) (cell, pos int) {
	if len(t.cells) == 0 {
		return -1, -1
	}
	mask := len(t.cells) - 1
	for i := t.hash(k); ; i = (i + 1) & mask {
		p := t.cells[i]
		if p == 0 {
			return i, -1
		}
		if t.keys[p-1] == k {
			return i, int(p - 1)
		}
	}
}

func (t *table) len() int { return len(t.keys) }

// get returns the slot of k.
func (t *table) get(k string) (slot, bool) {
	if _, p := t.find(k); p >= 0 {
		return t.vals[p], true
	}
	return slot{}, false
}

// pos returns k's place in keys and vals, -1 when absent.
func (t *table) pos(k string) int {
	_, p := t.find(k)
	return p
}

// ptr returns k's slot in place (nil: absent), valid until t changes.
func (t *table) ptr(k string) *slot {
	if _, p := t.find(k); p >= 0 {
		return &t.vals[p]
	}
	return nil
}

// has reports whether k is in t.
func (t *table) has(k string) bool {
	_, p := t.find(k)
	return p >= 0
}

// put sets k's slot; it reports whether k is new.
func (t *table) put(k string, s slot) bool {
	if _, p := t.find(k); p >= 0 {
		t.vals[p] = s
		return false
	}
	// At most 3/4 full: linear probing's runs stay short.
	if (len(t.keys)+1)*4 > len(t.cells)*3 {
		t.rehash(max(minCells, 2*len(t.cells)))
	}
	cell, _ := t.find(k)
	t.keys = append(t.keys, k)
	t.vals = append(t.vals, s)
	t.cells[cell] = int32(len(t.keys))
	return true
}

// reserve makes room for n entries in all, so that t grows no more until it holds them: an
// index filled by append allocated five times what it ended up holding (a slice that large grows
// by a quarter), 60 MB to rebuild 100,000 saved entries, and held the old and the new arrays at
// once at each step.
func (t *table) reserve(n int) {
	if n <= len(t.keys) {
		return
	}
	t.keys = slices.Grow(t.keys, n-len(t.keys))
	t.vals = slices.Grow(t.vals, n-len(t.vals))
	c := minCells
	for c*3 < n*4 {
		c *= 2
	}
	if c > len(t.cells) {
		t.rehash(c)
	}
}

// rehash rebuilds the probe table with n cells (a power of two).
func (t *table) rehash(n int) {
	if len(t.cells) == 0 {
		t.seed = maphash.MakeSeed()
	}
	t.cells = make([]int32, n)
	mask := n - 1
	for p, k := range t.keys {
		i := t.hash(k)
		for t.cells[i] != 0 {
			i = (i + 1) & mask
		}
		t.cells[i] = int32(p + 1)
	}
}

// delete removes k; it reports whether k was there.
func (t *table) delete(k string) bool {
	cell, p := t.find(k)
	if p < 0 {
		return false
	}
	t.unlinkCell(cell)
	// The last entry moves into the hole; its cell follows it.
	last := len(t.keys) - 1
	if p != last {
		lc, _ := t.find(t.keys[last])
		t.keys[p], t.vals[p] = t.keys[last], t.vals[last]
		t.cells[lc] = int32(p + 1)
	}
	t.keys[last], t.vals[last] = "", slot{} // nothing kept alive from beyond the end
	t.keys, t.vals = t.keys[:last], t.vals[:last]
	if len(t.keys) == 0 {
		*t = table{}
	} else if len(t.cells) > minCells && len(t.keys)*8 < len(t.cells) {
		t.shrink()
	}
	return true
}

// unlinkCell empties cell i, moving back each entry after it in its run
// that may no longer be found past the gap (backward-shift deletion).
func (t *table) unlinkCell(i int) {
	mask := len(t.cells) - 1
	t.cells[i] = 0
	for j := (i + 1) & mask; t.cells[j] != 0; j = (j + 1) & mask {
		h := t.hash(t.keys[t.cells[j]-1])
		// The entry at j stays where it is when its home lies cyclically
		// in (i, j]: a probe from there never crosses the gap at i.
		if i <= j && i < h && h <= j || i > j && (i < h || h <= j) {
			continue
		}
		t.cells[i], t.cells[j] = t.cells[j], 0
		i = j
	}
}

// shrink gives back what a large delete left: the slices and the probe
// table sized to what is left.
func (t *table) shrink() {
	t.keys = append([]string(nil), t.keys...)
	t.vals = append([]slot(nil), t.vals...)
	n := minCells
	for len(t.keys)*4 > n*3 {
		n *= 2
	}
	t.rehash(n)
}

// clear removes everything.
func (t *table) clear() { *t = table{} }
