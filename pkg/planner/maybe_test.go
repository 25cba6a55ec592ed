package planner

import (
	"crypto/sha256"
	"slices"
	"testing"
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
