package syncstate

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func testKey(root string) Key {
	return Key{{Name: "cluster", Value: "https://127.0.0.1:6443"}, {Name: "namespace", Value: "ns"}, {Name: "local", Value: root}}
}

func testSnap(n int) *Snapshot {
	var es []Entry
	for i := range n {
		es = append(es, Entry{Path: "f" + strings.Repeat("x", i%7), Type: 1, Mode: 0o644, Size: int64(i), MTime: int64(i) * 1e9, Ino: uint64(i), CTime: 7, Sum: make([]byte, 32)})
	}
	return &Snapshot{Halves: []Half{{Stamp: "cid/mnt:[1]", Name: "ns/p/c", Saved: time.Unix(100, 0), Mappings: mappings(es)}}}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "state")}
	k := testKey("/src")
	if snap, note := s.Load(k); snap != nil || note != "" {
		t.Fatalf("empty store: got %v %q", snap, note)
	}
	if err := s.Save(k, testSnap(10)); err != nil {
		t.Fatal(err)
	}
	snap, note := s.Load(k)
	if snap == nil || note != "" {
		t.Fatalf("load: %v %q", snap, note)
	}
	h, ok := snap.Half("cid/mnt:[1]")
	if !ok || len(h.Mappings) != 1 || h.Mappings[0].Len() != 10 || h.Mappings[0].Entries()[3].Ino != 3 {
		t.Fatalf("half: %+v %v", h, ok)
	}
	if _, ok := snap.Half("other"); ok {
		t.Fatal("another stamp matched")
	}
	if _, ok := snap.Half(""); ok {
		t.Fatal("an empty stamp matched")
	}
	fi, err := os.Stat(s.Path(k))
	wantMode := os.FileMode(0o600)
	if runtime.GOOS == "windows" {
		wantMode = 0o666 // no owner-only mode there: the user's profile's ACL guards the file
	}
	if err != nil || fi.Mode().Perm() != wantMode {
		t.Fatalf("file mode: %v %v", fi, err)
	}
	if err := s.Forget(k); err != nil {
		t.Fatal(err)
	}
	if snap, _ := s.Load(k); snap != nil {
		t.Fatal("forgotten state loaded")
	}
}

// A save replaces the file whole and leaves no temp file behind.
func TestSaveAtomic(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	k := testKey("/src")
	for i := range 3 {
		if err := s.Save(k, testSnap(100*(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	des, _ := os.ReadDir(s.Dir)
	if len(des) != 1 || des[0].Name() != k.ID()+suffix {
		t.Fatalf("directory holds %v", des)
	}
	snap, _ := s.Load(k)
	if snap.Halves[0].Mappings[0].Len() != 300 {
		t.Fatal("not the last save")
	}
}

func TestLoadDamaged(t *testing.T) {
	k := testKey("/src")
	for name, damage := range map[string]func([]byte) []byte{
		"cut short":   func(b []byte) []byte { return b[:len(b)-10] },
		"flipped bit": func(b []byte) []byte { b[len(b)-5] ^= 1; return b },
		"other magic": func(b []byte) []byte { return append([]byte("kubectl-livesync state v0\n"), b[len(magic):]...) },
		"empty":       func([]byte) []byte { return nil },
		"garbage":     func([]byte) []byte { return []byte("{\"json\": true}\n") },
		"bad header":  func(b []byte) []byte { return append([]byte(magic+"zz\n"), b[len(magic)+65:]...) },
	} {
		t.Run(name, func(t *testing.T) {
			s := &Store{Dir: t.TempDir()}
			if err := s.Save(k, testSnap(20)); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(s.Path(k))
			if err := os.WriteFile(s.Path(k), damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			snap, note := s.Load(k)
			if snap != nil || !strings.Contains(note, "ignored") {
				t.Fatalf("got %v, note %q", snap, note)
			}
			// The next save replaces it.
			if err := s.Save(k, testSnap(2)); err != nil {
				t.Fatal(err)
			}
			if snap, note := s.Load(k); snap == nil || note != "" {
				t.Fatalf("after a new save: %v %q", snap, note)
			}
		})
	}
}

// A file saved under another key (a hash collision, or a file copied over)
// is never read as this key's.
func TestLoadForeignKey(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	a, b := testKey("/a"), testKey("/b")
	if err := s.Save(a, testSnap(5)); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(s.Path(a))
	if err := os.WriteFile(s.Path(b), data, 0o600); err != nil {
		t.Fatal(err)
	}
	snap, note := s.Load(b)
	if snap != nil || !strings.Contains(note, "another sync") {
		t.Fatalf("got %v, note %q", snap, note)
	}
}

func TestKeyDistinguishesParts(t *testing.T) {
	a := Key{{Name: "a", Value: "x\ny"}, {Name: "b", Value: ""}}
	b := Key{{Name: "a", Value: "x"}, {Name: "b", Value: "y"}}
	if a.ID() == b.ID() || a.String() == b.String() {
		t.Fatal("keys with different parts are the same")
	}
}

func TestSizeBound(t *testing.T) {
	s := &Store{Dir: t.TempDir(), MaxFile: 4 << 10}
	k := testKey("/src")
	if err := s.Save(k, testSnap(5)); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(k, testSnap(5000)); err == nil {
		t.Fatal("an oversized snapshot was saved")
	}
	// The older, smaller ancestor is gone too: it would be older than what
	// the container confirmed since.
	if snap, _ := s.Load(k); snap != nil {
		t.Fatal("the previous state outlived an unsaved newer one")
	}
	// A file over the bound is not read.
	big := &Store{Dir: s.Dir}
	if err := big.Save(k, testSnap(5000)); err != nil {
		t.Fatal(err)
	}
	if snap, note := s.Load(k); snap != nil || !strings.Contains(note, "bound") {
		t.Fatalf("oversized file loaded: %v %q", snap, note)
	}
}

func TestPrune(t *testing.T) {
	now := time.Now()
	s := &Store{Dir: t.TempDir(), MaxAge: time.Hour, Now: func() time.Time { return now }}
	old, fresh := testKey("/old"), testKey("/fresh")
	for _, k := range []Key{old, fresh} {
		if err := s.Save(k, testSnap(5)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(s.Path(old), now.Add(-2*time.Hour), now.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(s.Dir, tempPrefix+"123")
	if err := os.WriteFile(stray, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(stray, now.Add(-time.Hour), now.Add(-time.Hour))
	other := filepath.Join(s.Dir, "notes.txt") // not the store's: never touched
	if err := os.WriteFile(other, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(fresh, testSnap(6)); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{s.Path(old): false, stray: false, s.Path(fresh): true, other: true} {
		if _, err := os.Stat(name); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", name, err == nil, want)
		}
	}

	// Beyond MaxTotal the oldest go first; the one just saved stays.
	s2 := &Store{Dir: t.TempDir()}
	var keys []Key
	for i := range 4 {
		k := testKey(strings.Repeat("/d", i+1))
		keys = append(keys, k)
		if err := s2.Save(k, testSnap(50)); err != nil {
			t.Fatal(err)
		}
		_ = os.Chtimes(s2.Path(k), now.Add(time.Duration(i-10)*time.Minute), now.Add(time.Duration(i-10)*time.Minute))
	}
	fi, _ := os.Stat(s2.Path(keys[0]))
	s2.MaxTotal = 2*fi.Size() + fi.Size()/2
	if err := s2.Save(keys[0], testSnap(50)); err != nil { // now the newest
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, false, true} {
		if _, err := os.Stat(s2.Path(keys[i])); (err == nil) != want {
			t.Errorf("key %d: exists %v, want %v", i, err == nil, want)
		}
	}
	n, err := s2.ForgetAll()
	if err != nil || n != 2 {
		t.Fatalf("ForgetAll: %d %v", n, err)
	}
}

func TestDefaultDir(t *testing.T) {
	abs := func(p string) string { // absolute on Windows needs a volume
		if runtime.GOOS == "windows" {
			p = "C:" + p
		}
		return filepath.FromSlash(p)
	}
	t.Setenv("XDG_STATE_HOME", abs("/xdg/state"))
	if d, _ := DefaultDir(); d != abs("/xdg/state/kubectl-livesync") {
		t.Fatal(d)
	}
	t.Setenv("XDG_STATE_HOME", "relative") // the spec says: ignore it
	t.Setenv("XDG_CACHE_HOME", "/xdg/cache")
	if d, _ := DefaultDir(); d != filepath.Join("/xdg/cache", "kubectl-livesync", "state") && !strings.HasSuffix(d, filepath.Join("kubectl-livesync", "state")) {
		t.Fatal(d)
	}
}

// A save that fails leaves no older ancestor behind: the warning says the
// next start will not use saved state, and it must not. When the old file
// cannot be removed either, the error says so.
func TestFailedSaveRemovesOld(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	k := testKey("/src")
	if err := s.Save(k, testSnap(3)); err != nil {
		t.Fatal(err)
	}
	disk := errors.New("no space left on device")
	s.write = func(string, string, func(io.Writer) error) error { return disk }
	err := s.Save(k, testSnap(4))
	if !errors.Is(err, disk) || errors.Is(err, ErrOldKept) {
		t.Fatalf("failed save: %v", err)
	}
	if snap, note := s.Load(k); snap != nil || note != "" {
		t.Fatalf("the old state outlived a failed save: %v %q", snap != nil, note)
	}

	// The old one cannot go, but its claim can: without it the old one is
	// never trusted.
	if err := os.MkdirAll(filepath.Join(s.Path(k), "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(k, []string{"/app"}); err == nil {
		t.Fatal("a state without a claim that cannot be removed: no error")
	}
	err = s.Save(k, testSnap(4))
	if !errors.Is(err, disk) || errors.Is(err, ErrOldKept) || s.Claimed(k) {
		t.Fatalf("failed save, claim removed: %v", err)
	}
	// Neither can go: a directory with something in it stands in each place.
	if err := os.MkdirAll(filepath.Join(s.claimPath(k.ID()), "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	err = s.Save(k, testSnap(4))
	if !errors.Is(err, disk) || !errors.Is(err, ErrOldKept) {
		t.Fatalf("failed save and removal: %v", err)
	}
}
