package planner

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// checkTable compares t with want, the map it should equal, through
// every way the index reads it.
func checkTable(t *testing.T, tb *table, want map[string]int64) {
	t.Helper()
	if tb.len() != len(want) || len(tb.vals) != len(want) {
		t.Fatalf("len %d (%d slots), want %d", tb.len(), len(tb.vals), len(want))
	}
	seen := map[string]bool{}
	for i, k := range tb.keys {
		if seen[k] {
			t.Fatalf("%q twice", k)
		}
		seen[k] = true
		if v, ok := want[k]; !ok || tb.vals[i].size != v {
			t.Fatalf("%q at %d: %d, want %d (%v)", k, i, tb.vals[i].size, v, ok)
		}
	}
	for k, v := range want {
		if s, ok := tb.get(k); !ok || s.size != v || !tb.has(k) {
			t.Fatalf("get %q: %v %v, want %d", k, s.size, ok, v)
		}
	}
	used := 0
	for _, c := range tb.cells {
		if c != 0 {
			used++
		}
	}
	if used != len(want) {
		t.Fatalf("%d cells used for %d entries", used, len(want))
	}
}

// The table against a map, through random puts, overwrites and deletes,
// including deletes of what is not there.
func TestTableRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var tb table
	want := map[string]int64{}
	for i := range 20_000 {
		k := fmt.Sprintf("d%d/f%d", r.IntN(30), r.IntN(400))
		switch r.IntN(3) {
		case 0, 1:
			_, had := want[k]
			if isNew := tb.put(k, slot{size: int64(i)}); isNew == had {
				t.Fatalf("put %q: new %v, had %v", k, isNew, had)
			}
			want[k] = int64(i)
		case 2:
			_, had := want[k]
			if tb.delete(k) != had {
				t.Fatalf("delete %q: had %v", k, had)
			}
			delete(want, k)
		}
		if i%997 == 0 {
			checkTable(t, &tb, want)
		}
	}
	checkTable(t, &tb, want)
	for k := range want {
		tb.delete(k)
		delete(want, k)
	}
	checkTable(t, &tb, want)
	if tb.get("d1/f1"); len(tb.cells) != 0 || cap(tb.keys) != 0 {
		t.Fatalf("emptied: %d cells, %d keys' room", len(tb.cells), cap(tb.keys))
	}
}

// Creating and removing bursts of paths over a large tree does not grow
// the table (Go's map doubled), and a large delete gives room back.
func TestTableChurnDoesNotGrow(t *testing.T) {
	var tb table
	want := map[string]int64{}
	for i := range 10_000 {
		k := fmt.Sprintf("tree/%d", i)
		tb.put(k, slot{size: 1})
		want[k] = 1
	}
	cells, room := len(tb.cells), cap(tb.vals)
	for round := range 20 {
		var burst []string
		for i := range 1_000 {
			k := fmt.Sprintf("burst%d/%d", round, i)
			tb.put(k, slot{size: 2})
			burst = append(burst, k)
		}
		for _, k := range burst {
			tb.delete(k)
		}
		if len(tb.cells) > 2*cells || cap(tb.vals) > 2*room {
			t.Fatalf("round %d: %d cells (from %d), room for %d slots (from %d)", round, len(tb.cells), cells, cap(tb.vals), room)
		}
	}
	checkTable(t, &tb, want)
	for i := range 9_900 {
		k := fmt.Sprintf("tree/%d", i)
		tb.delete(k)
		delete(want, k)
	}
	checkTable(t, &tb, want)
	if len(tb.cells) > 256 || cap(tb.vals) > 256 {
		t.Fatalf("100 entries left in %d cells, room for %d slots", len(tb.cells), cap(tb.vals))
	}
}

// A plan marks a visited path once, an entry of the index by its place,
// another in its map.
func TestPlanSeen(t *testing.T) {
	idx := NewIndex()
	for i := range 200 {
		idx.Put(fmt.Sprintf("f%d", i), Entry{Type: TypeFile})
	}
	pl := newPlanState(nil, idx)
	for _, rel := range []string{"f0", "f63", "f64", "f199", "new", "f5/new"} {
		if pl.seen(rel) {
			t.Fatalf("%q seen before its visit", rel)
		}
		if !pl.seen(rel) {
			t.Fatalf("%q not seen after its visit", rel)
		}
	}
	if pl.seen("f1") || pl.seen("f198") {
		t.Fatal("an entry never visited was seen")
	}
	if len(pl.visited) != 2 {
		t.Fatalf("the map holds %d paths, want the 2 outside the index", len(pl.visited))
	}
}
