package planner

import (
	"crypto/sha256"
	"slices"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// Unconfirm keeps, for each file it marks unknown, what the container may
// hold there: what it held before and what the plan sent, across plans
// that fail again, until the path is confirmed; where either is not known,
// nothing (the path is just unknown).
func TestUnconfirmKeepsWhatTheContainerMayHold(t *testing.T) {
	sum := func(s string) *[32]byte { h := sha256.Sum256([]byte(s)); return &h }
	x := NewIndex()
	x.Put("", Entry{Type: TypeDir})
	x.Put("a", Entry{Type: TypeFile, Size: 2, Sum: sum("v1")})
	x.Put("nosum", Entry{Type: TypeFile, Size: 2})
	x.Put("gone", Entry{Type: TypeFile, Size: 2, Sum: sum("g")})
	copyOf := func(rel string) Copy { return Copy{Rel: rel, Name: rel, Entry: Entry{Type: TypeFile, Size: 2}} }
	p := &Plan{Copies: []Copy{copyOf("a"), copyOf("new"), copyOf("nosum"), copyOf("unsent")}, Deletes: []string{"gone"}}
	x.Unconfirm(p, map[string]*[32]byte{"a": sum("v2"), "new": sum("n"), "nosum": sum("x")})
	same := func(got []*[32]byte, want ...*[32]byte) bool {
		return slices.EqualFunc(got, want, func(a, b *[32]byte) bool { return a == b || a != nil && b != nil && *a == *b })
	}
	for _, tt := range []struct {
		rel  string
		want []*[32]byte
		ok   bool
	}{
		{"a", []*[32]byte{sum("v1"), sum("v2")}, true},
		{"new", []*[32]byte{nil, sum("n")}, true},
		{"gone", []*[32]byte{sum("g"), nil}, true},
		{"nosum", nil, false},  // what it held is not known
		{"unsent", nil, false}, // what was sent is not known
	} {
		if got, ok := x.Maybe(tt.rel); ok != tt.ok || !same(got, tt.want...) {
			t.Errorf("Maybe(%q) = %v, %v; want %v, %v", tt.rel, got, ok, tt.want, tt.ok)
		}
	}
	// A second plan that fails adds what it sent.
	x.Unconfirm(&Plan{Copies: []Copy{copyOf("a")}}, map[string]*[32]byte{"a": sum("v3")})
	if got, _ := x.Maybe("a"); !same(got, sum("v1"), sum("v2"), sum("v3")) {
		t.Errorf("after a second failed plan: %v", got)
	}
	// Confirmed: known again.
	x.Put("a", Entry{Type: TypeFile, Size: 2, Sum: sum("v3")})
	if _, ok := x.Maybe("a"); ok {
		t.Error("a confirmed entry still has alternatives")
	}
	x.DeleteTree("new")
	if _, ok := x.Maybe("new"); ok {
		t.Error("a deleted entry still has alternatives")
	}
}

// A file that changed while its batch archived it is sent again, checked
// against what the confirmed archive left in the container: the bytes its
// entry carried, or what the container held before where none went out.
// Before, Apply recorded it stale with nothing known, and the next upload
// of it went unchecked, over a container save made in between (TestModel
// seed 5929211823724421172, round 468: a `cp -p`'s write then its mtime).
func TestApplyRacedKeepsWhatTheContainerHolds(t *testing.T) {
	sum := func(s string) *[32]byte { h := sha256.Sum256([]byte(s)); return &h }
	x := NewIndex()
	x.Put("", Entry{Type: TypeDir})
	x.Put("a", Entry{Type: TypeFile, Size: 2, Sum: sum("v1")})
	x.Put("b", Entry{Type: TypeFile, Size: 2, Sum: sum("b1")})
	copyOf := func(rel string) Copy { return Copy{Rel: rel, Name: rel, Entry: Entry{Type: TypeFile, Size: 2}} }
	p := &Plan{Copies: []Copy{copyOf("a"), copyOf("b"), copyOf("new")}}
	x.Apply(p, tarstream.Result{
		Raced:   map[string]struct{}{"a": {}, "b": {}, "new": {}},
		Carried: map[string]*[32]byte{"a": sum("v2 as read")},
	})
	same := func(got []*[32]byte, want ...*[32]byte) bool {
		return slices.EqualFunc(got, want, func(a, b *[32]byte) bool { return a == b || a != nil && b != nil && *a == *b })
	}
	for _, tt := range []struct {
		rel  string
		want []*[32]byte
	}{
		{"a", []*[32]byte{sum("v2 as read")}}, // its entry went out
		{"b", []*[32]byte{sum("b1")}},         // none went out (gone while archived)
		{"new", []*[32]byte{nil}},
	} {
		if e, _ := x.Get(tt.rel); !e.Stale() {
			t.Errorf("%s: not stale", tt.rel)
		}
		if got, ok := x.Maybe(tt.rel); !ok || !same(got, tt.want...) {
			t.Errorf("Maybe(%q) = %v, %v; want %v", tt.rel, got, ok, tt.want)
		}
	}
}
