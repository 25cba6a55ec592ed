package threeway

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The three-way rule of a start, at one path: every combination of the
// ancestor's, the local side's and the container's presence, whether each
// side still holds the ancestor, and whether the path comes back.
func TestDecide(t *testing.T) {
	tests := []struct {
		name                                  string
		hasA, hasL, hasR, lSame, rSame, listd bool
		want                                  Action
	}{
		{"unchanged on both sides", true, true, true, true, true, false, Keep},
		{"unchanged, listed", true, true, true, true, true, true, Keep},
		{"deleted on both sides", true, false, false, false, false, false, Forget},
		{"never held, nowhere", false, false, false, true, true, false, Forget},

		{"local edit", true, true, true, false, true, false, Send},
		{"local edit of a listed path", true, true, true, false, true, true, Send},
		{"local create", false, true, false, false, true, false, Send},
		{"local delete", true, false, true, false, true, false, Delete},
		{"local delete of a listed path", true, false, true, false, true, true, Delete},

		{"container edit of an unlisted path: the local side wins", true, true, true, true, false, false, Send},
		{"container edit of a listed path comes home", true, true, true, true, false, true, Back},
		{"container delete of a listed path: sync-back decides", true, true, false, true, false, true, Back},
		{"container delete of an unlisted path: sent again", true, true, false, true, false, false, Send},
		{"container create, listed, comes home", false, false, true, true, false, true, Back},
		{"container create, unlisted, left there", false, false, true, true, false, false, Leave},

		{"both edited, listed: sync-back records or reports the conflict", true, true, true, false, false, true, Both},
		{"both created, listed", false, true, true, false, false, true, Both},
		{"both edited, unlisted: the local side wins", true, true, true, false, false, false, Send},
		{"deleted locally, edited in the container, listed: theirs comes home", true, false, true, false, false, true, Theirs},
		{"deleted locally, edited in the container, unlisted: the delete goes", true, false, true, false, false, false, Delete},
		{"edited locally, deleted in the container, listed: the edit goes up", true, true, false, false, false, true, Send},
		{"edited locally, deleted in the container, unlisted", true, true, false, false, false, false, Send},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.hasA, tt.hasL, tt.hasR, tt.lSame, tt.rSame, tt.listd); got != tt.want {
				t.Errorf("Decide = %s, want %s", got, tt.want)
			}
		})
	}
}

// side is what one side holds at a path, against the ancestor.
type side struct {
	name            string
	hasA, has, same bool
}

// The states a cell of docs/state.md's table names. "unchanged" is the
// ancestor's state, present or absent; "changed" and "edited" are a
// content, mode or type that differs from the ancestor's.
var (
	unchangedHeld = side{"unchanged", true, true, true}
	absent        = side{"absent", false, false, true}
	edited        = side{"edited", true, true, false}
	created       = side{"created", false, true, false}
	deleted       = side{"deleted", true, false, false}

	cells = map[string][]side{
		"unchanged": {unchangedHeld, absent},
		"absent":    {absent},
		"edited":    {edited},
		"created":   {created},
		"deleted":   {deleted},
		"changed":   {edited},
	}
)

// states returns the states a cell names: "edited, created", "changed or
// deleted" and "changed, created or deleted" list several.
func states(t *testing.T, cell string) []side {
	t.Helper()
	var out []side
	for _, w := range strings.FieldsFunc(strings.ReplaceAll(cell, " or ", ","), func(r rune) bool { return r == ',' }) {
		s, ok := cells[strings.TrimSpace(w)]
		if !ok {
			t.Fatalf("cell %q: no state %q", cell, w)
		}
		out = append(out, s...)
	}
	return out
}

// docRows are the rows of the three-way pass's table in docs/state.md, in
// its order and words: local side, container, listed, and the action its
// result column describes.
var docRows = []struct {
	local, container, listed string
	want                     Action
	result                   string
}{
	{"unchanged", "unchanged", "any", Keep, "nothing sent, nothing read"},
	{"edited, created", "unchanged", "any", Send, "sent"},
	{"deleted", "unchanged", "any", Delete, "deleted in the container, under the usual guards"},
	{"unchanged", "changed, created or deleted", "yes", Back, "nothing sent; sync-back's first pass brings it home"},
	{"unchanged", "changed or deleted", "no", Send, "the local one is sent"},
	{"absent", "created", "no", Leave, "left in the container"},
	{"changed or created", "changed or created", "yes", Both, "nothing sent; sync-back records it or reports a conflict"},
	{"deleted", "changed", "yes", Theirs, "the container's is kept and comes home"},
	{"changed", "deleted", "any", Send, "the local one is sent"},
	{"changed, created or deleted", "changed or created", "no", -1, "the local side wins"},
	{"deleted", "deleted", "any", Forget, "forgotten"},
}

// localWins is what "the local side wins" does: the local entry is sent,
// or its absence is (a delete).
func localWins(l side) Action {
	if l.has {
		return Send
	}
	return Delete
}

// The table in docs/state.md is what Decide does: each row, at every
// combination of states its cells name, and every combination a start
// can meet is a row of it.
func TestDecideIsTheDocumentedTable(t *testing.T) {
	covered := map[string]bool{}
	for _, row := range docRows {
		name := fmt.Sprintf("%s|%s|%s", row.local, row.container, row.listed)
		t.Run(name, func(t *testing.T) {
			listed := map[string][]bool{"any": {false, true}, "yes": {true}, "no": {false}}[row.listed]
			n := 0
			for _, l := range states(t, row.local) {
				for _, r := range states(t, row.container) {
					if l.hasA != r.hasA || !l.has && !r.has && !l.hasA {
						continue // another ancestor on each side, or a path nobody holds
					}
					for _, ls := range listed {
						n++
						want := row.want
						if want < 0 {
							want = localWins(l)
						}
						covered[fmt.Sprint(l, r, ls)] = true
						if got := Decide(l.hasA, l.has, r.has, l.same, r.same, ls); got != want {
							t.Errorf("local %s, container %s, listed %v: %s, want %s (%s)", l.name, r.name, ls, got, want, row.result)
						}
					}
				}
			}
			if n == 0 {
				t.Fatalf("the row names no state a start can meet")
			}
		})
	}
	for _, l := range []side{unchangedHeld, absent, edited, created, deleted} {
		for _, r := range []side{unchangedHeld, absent, edited, created, deleted} {
			if l.hasA != r.hasA || !l.has && !r.has && !l.hasA {
				continue
			}
			for _, ls := range []bool{false, true} {
				if !covered[fmt.Sprint(l, r, ls)] {
					t.Errorf("local %s, container %s, listed %v: no row of the table says what a start does", l.name, r.name, ls)
				}
			}
		}
	}
}

// docRows are docs/state.md's rows: a row changed there is changed here,
// and what it says is checked above.
func TestDocRowsAreTheDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/state.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| Local side | Container | Listed | Result |\n|---|---|---|---|\n")
	if !ok {
		t.Fatal("docs/state.md has no table of the three-way pass")
	}
	var got []string
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		got = append(got, strings.TrimSpace(cells[0])+" | "+strings.TrimSpace(cells[1])+" | "+strings.TrimSpace(cells[2]))
	}
	var want []string
	for _, row := range docRows {
		want = append(want, row.local+" | "+row.container+" | "+row.listed)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("docs/state.md's rows:\n%s\nthe test's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
