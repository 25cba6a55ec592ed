package syncstate

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func exists(t *testing.T, name string) bool {
	t.Helper()
	_, err := os.Lstat(name)
	return err == nil
}

// Entering a place removes the state of every other key that claims it
// under an overlapping root, and only those.
func TestEnterInvalidatesOverlapping(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	saved := func(name string, roots []string, places ...string) Key {
		k := Key{{Name: "k", Value: name}}
		l, err := s.Acquire(k, roots)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range places {
			if err := l.Enter(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Save(k, testSnap(1)); err != nil {
			t.Fatal(err)
		}
		return k
	}
	same := saved("same", []string{"/app"}, "c1")
	inside := saved("inside", []string{"/app/static"}, "c1")
	around := saved("around", []string{"/"}, "c1", "c9")
	otherRoot := saved("other root", []string{"/application", "/srv"}, "c1")
	otherPlace := saved("other place", []string{"/app"}, "c2")

	b := Key{{Name: "k", Value: "b"}}
	l, err := s.Acquire(b, []string{"/app"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Enter("c1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		k    Key
		kept bool
	}{{same, false}, {inside, false}, {around, false}, {otherRoot, true}, {otherPlace, true}} {
		if got := exists(t, s.Path(c.k)); got != c.kept {
			t.Errorf("%s: state kept %v, want %v", c.k[0].Value, got, c.kept)
		}
		if got := exists(t, s.claimPath(c.k.ID())); got != c.kept {
			t.Errorf("%s: claim kept %v, want %v", c.k[0].Value, got, c.kept)
		}
	}
	if !l.Held() {
		t.Error("the entering lease lost its claim")
	}
}

// A running session whose claim another took saves no more, and drops the
// other's state as well; a state without its claim is not trusted.
func TestHeldAndYield(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	a, b := Key{{Name: "k", Value: "a"}}, Key{{Name: "k", Value: "b"}}
	la, _ := s.Acquire(a, []string{"/app"})
	_ = la.Enter("c1")
	if err := s.Save(a, testSnap(1)); err != nil {
		t.Fatal(err)
	}
	lb, _ := s.Acquire(b, []string{"/app"})
	_ = lb.Enter("c1")
	if err := s.Save(b, testSnap(1)); err != nil {
		t.Fatal(err)
	}
	if la.Held() || !lb.Held() {
		t.Fatalf("held: a %v, b %v", la.Held(), lb.Held())
	}
	if err := la.Yield(); err != nil {
		t.Fatal(err)
	}
	if exists(t, s.Path(a)) || exists(t, s.Path(b)) || lb.Held() {
		t.Fatal("a yielded, a state is left")
	}

	// A second session of the same key takes the first one's claim.
	l1, _ := s.Acquire(a, []string{"/app"})
	l2, _ := s.Acquire(a, []string{"/app"})
	if l1.Held() || !l2.Held() {
		t.Fatalf("same key: held %v %v", l1.Held(), l2.Held())
	}

	// Unclaimed (an older version's file): removed at Acquire.
	c := Key{{Name: "k", Value: "c"}}
	if err := s.Save(c, testSnap(1)); err != nil {
		t.Fatal(err)
	}
	if s.Claimed(c) {
		t.Fatal("a state saved without a claim is claimed")
	}
	if _, err := s.Acquire(c, []string{"/app"}); err != nil || exists(t, s.Path(c)) {
		t.Fatalf("unclaimed state kept: %v", err)
	}
	// Claimed: kept, with its places.
	lc, _ := s.Acquire(c, []string{"/app"})
	_ = lc.Enter("c3")
	if err := s.Save(c, testSnap(1)); err != nil {
		t.Fatal(err)
	}
	lc, err := s.Acquire(c, []string{"/app"})
	if err != nil || !exists(t, s.Path(c)) || len(lc.c.Places) != 1 {
		t.Fatalf("claimed state: %v %v", err, lc.c.Places)
	}
	// A save holds only this session's halves: the claim names only where it wrote.
	_ = lc.Enter("c4")
	if err := lc.Saved(); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.readClaim(c.ID()); !slices.Equal(got.Places, []string{"c4"}) {
		t.Fatalf("places after a save: %v", got.Places)
	}
	if n, err := s.ForgetAll(); err != nil || exists(t, filepath.Join(s.Dir, c.ID()+claimSuffix)) {
		t.Fatalf("forget all: %d %v", n, err)
	}
}
