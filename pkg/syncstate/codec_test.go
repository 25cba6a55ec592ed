package syncstate

import (
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"
)

// fullSnap has every field of every kind of entry set, paths that share
// prefixes with the one before them and ones that do not.
func fullSnap() *Snapshot {
	sum := sha256.Sum256([]byte("a"))
	es := []Entry{
		{Path: "", Type: 2, Mode: 0o755, MTime: -5},
		{Path: "dir/a.txt", Type: 1, Mode: 0o644, Size: 1 << 40, MTime: 1_700_000_000_123_456_789, Sum: sum[:], Ino: 1 << 63, CTime: 42},
		{Path: "dir/ab.txt", Type: 1, Mode: 0o600, Size: 0, Unknown: true},
		{Path: "dir", Type: 2, Mode: 0o700},
		{Path: "link", Type: 3, Mode: 0o777, Link: "../elsewhere/ü"},
	}
	return &Snapshot{
		Key:   "a=\"b\"\n",
		Saved: time.Unix(1_800_000_000, 17),
		Halves: []Half{
			{Stamp: "cid/mnt:[1]", Name: "ns/p/c", Saved: time.Unix(100, 0), Mappings: mappings(es, nil, []Entry{{Path: "x", Type: 1}}),
				Conflicts: []Conflict{
					{Mapping: 0, Path: "dir/a.txt", Exists: true, Mode: 0o644, Size: 3, MTime: 1_700_000_000_123_456_789, Ino: 1 << 63, CTime: -1,
						Remote: ConflictSide{Sum: sum[:]}},
					{Mapping: 2, Path: "x", Remote: ConflictSide{Absent: true}},
					{Mapping: 2, Path: "y/ü", Exists: true, Remote: ConflictSide{Stat: true, Size: 1 << 40, MTime: -7}},
					{Mapping: 0, Path: "dir"},
				}},
			{Stamp: "", Name: "", Mappings: nil},
		},
	}
}

// mappings encodes each list of entries (nil: no mapping).
func mappings(ess ...[]Entry) []Mapping {
	out := make([]Mapping, len(ess))
	for i, es := range ess {
		out[i] = MappingOf(es)
	}
	return out
}

// sameSnap compares two snapshots by what they say: instants, not time
// zones; no mapping and an empty one alike.
func sameSnap(t *testing.T, got, want *Snapshot) {
	t.Helper()
	if got.Key != want.Key || !got.Saved.Equal(want.Saved) || len(got.Halves) != len(want.Halves) {
		t.Fatalf("snapshot: got %+v, want %+v", got, want)
	}
	for i, h := range want.Halves {
		g := got.Halves[i]
		if g.Stamp != h.Stamp || g.Name != h.Name || !g.Saved.Equal(h.Saved) || len(g.Mappings) != len(h.Mappings) {
			t.Fatalf("half %d: got %+v, want %+v", i, g, h)
		}
		if (len(g.Conflicts) != 0 || len(h.Conflicts) != 0) && !reflect.DeepEqual(g.Conflicts, h.Conflicts) {
			t.Fatalf("half %d's conflicts:\n got %+v\nwant %+v", i, g.Conflicts, h.Conflicts)
		}
		for j, m := range h.Mappings {
			es, ges := m.Entries(), g.Mappings[j].Entries()
			if len(es) == 0 && len(ges) == 0 {
				continue
			}
			if !reflect.DeepEqual(ges, es) {
				t.Fatalf("half %d mapping %d:\n got %+v\nwant %+v", i, j, ges, es)
			}
		}
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	var b bytes.Buffer
	want := fullSnap()
	if _, err := encode(&b, want, 1<<20); err != nil {
		t.Fatal(err)
	}
	got, err := decode(bytes.NewReader(b.Bytes()), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	sameSnap(t, got, want)
	// Every cut, and any bit flipped, is refused.
	for n := range b.Len() {
		if _, err := decode(bytes.NewReader(b.Bytes()[:n]), 1<<20); err == nil {
			t.Fatalf("cut at %d of %d bytes: decoded", n, b.Len())
		}
	}
	for i := range b.Len() {
		d := bytes.Clone(b.Bytes())
		d[i] ^= 0x10
		if _, err := decode(bytes.NewReader(d), 1<<20); err == nil {
			t.Fatalf("bit flipped at %d: decoded", i)
		}
	}
	if _, err := decode(bytes.NewReader(append(bytes.Clone(b.Bytes()), 0)), 1<<20); err == nil {
		t.Fatal("a byte more after the checksum: decoded")
	}
}

// encodeV1 writes a file as version 1 did: a gob of the whole snapshot
// behind its checksum.
func encodeV1(t *testing.T, snap *Snapshot) []byte {
	v1 := snapshotV1{Key: snap.Key, Saved: snap.Saved}
	for _, h := range snap.Halves {
		hv := halfV1{Stamp: h.Stamp, Name: h.Name, Saved: h.Saved}
		for _, m := range h.Mappings {
			hv.Mappings = append(hv.Mappings, m.Entries())
		}
		v1.Halves = append(v1.Halves, hv)
	}
	var body bytes.Buffer
	if err := gob.NewEncoder(&body).Encode(v1); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body.Bytes())
	return append([]byte(magicV1+hex.EncodeToString(sum[:])+"\n"), body.Bytes()...)
}

// A state saved by the previous version is still read, and one of its
// damaged still refused.
func TestLoadVersion1(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	k := testKey("/src")
	want := fullSnap()
	want.Key = k.String()
	v1 := encodeV1(t, want)
	if err := os.WriteFile(s.Path(k), v1, 0o600); err != nil {
		t.Fatal(err)
	}
	got, note := s.Load(k)
	if got == nil {
		t.Fatalf("version 1 not read: %s", note)
	}
	for i := range want.Halves {
		want.Halves[i].Conflicts = nil // version 1 had none
	}
	sameSnap(t, got, want)
	v1[len(v1)-3] ^= 1
	if err := os.WriteFile(s.Path(k), v1, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(k); got != nil {
		t.Fatal("a damaged version 1 file was read")
	}
}

// A state saved by version 2 is still read, without conflicts.
func TestLoadVersion2(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	k := testKey("/src")
	want := fullSnap()
	want.Key = k.String()
	var b bytes.Buffer
	if _, err := encodeVersion(&b, want, 1<<20, false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path(k), b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got, note := s.Load(k)
	if got == nil {
		t.Fatalf("version 2 not read: %s", note)
	}
	for i := range want.Halves {
		want.Halves[i].Conflicts = nil
	}
	sameSnap(t, got, want)
}

// Save streams: a snapshot over the bound fails with ErrTooLarge before it
// is written whole.
func TestEncodeStopsAtBound(t *testing.T) {
	var b bytes.Buffer
	_, err := encode(&b, testSnap(5000), 4<<10)
	if !errors.Is(err, ErrTooLarge) || b.Len() > 4<<10 {
		t.Fatalf("err %v after %d bytes", err, b.Len())
	}
}
