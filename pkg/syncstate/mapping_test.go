package syncstate

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"
)

// manyEntries returns n entries over a few directories, with and without
// sums and links, enough of them to fill several blocks.
func manyEntries(n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		e := Entry{Path: fmt.Sprintf("dir%03d/sub/file%06d.txt", i/100, i), Type: 1, Mode: 0o644, Size: int64(i) * 7, MTime: int64(i) * 1e9, Ino: uint64(i), CTime: -int64(i)}
		switch i % 5 {
		case 0:
			e.Type, e.Link = 3, fmt.Sprintf("../target%d", i)
		case 1:
			e.Unknown = true
		default:
			s := sha256.Sum256([]byte(e.Path))
			e.Sum = s[:]
		}
		es[i] = e
	}
	return es
}

func TestMappingRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 3, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			es := manyEntries(n)
			m := MappingOf(es)
			if m.IsZero() || m.Len() != n {
				t.Fatalf("zero %v, len %d", m.IsZero(), m.Len())
			}
			if n == 5000 && len(m.blocks) < 2 {
				t.Fatalf("%d entries in %d block(s): the test should cross a block", n, len(m.blocks))
			}
			for _, b := range m.blocks {
				if cap(b) > mappingBlock {
					t.Fatalf("a block of %d bytes", cap(b))
				}
			}
			got := m.Entries()
			if len(got) != n || n > 0 && !reflect.DeepEqual(got, es) {
				t.Fatalf("entries differ after encoding (%d of %d)", len(got), n)
			}
			// What All yields is the caller's: changing it changes nothing in m.
			for e := range m.All() {
				if e.Sum != nil {
					e.Sum[0] ^= 0xff
				}
			}
			if n > 0 && !reflect.DeepEqual(m.Entries(), es) {
				t.Fatal("changing a yielded sum changed the mapping")
			}
		})
	}
}

// The zero Mapping is no mapping, as nil was; no entries is a mapping.
func TestMappingZero(t *testing.T) {
	if !MappingOf(nil).IsZero() || MappingOf(nil).Entries() != nil {
		t.Fatal("MappingOf(nil) is a mapping")
	}
	if e := MappingOf([]Entry{}); e.IsZero() || e.Entries() == nil || e.Len() != 0 {
		t.Fatal("MappingOf([]Entry{}) is no mapping")
	}
	var b MappingBuilder
	if b.Mapping().IsZero() {
		t.Fatal("a builder's mapping of nothing is no mapping")
	}
}

// encodeEntriesV2 is how version 2 wrote a mapping's entries before they
// were held encoded: the file must not change.
func encodeEntriesV2(es []Entry) []byte {
	var buf []byte
	prev := ""
	for _, r := range es {
		shared := 0
		for shared < min(len(prev), len(r.Path)) && prev[shared] == r.Path[shared] {
			shared++
		}
		buf = binary.AppendUvarint(buf, uint64(shared))
		buf = binary.AppendUvarint(buf, uint64(len(r.Path)-shared))
		buf = append(buf, r.Path[shared:]...)
		prev = r.Path
		var flags byte
		if len(r.Sum) == sha256.Size {
			flags |= flagSum
		}
		if r.Unknown {
			flags |= flagUnknown
		}
		buf = append(buf, r.Type, flags)
		buf = binary.AppendUvarint(buf, uint64(r.Mode))
		buf = binary.AppendVarint(buf, r.Size)
		buf = binary.AppendVarint(buf, r.MTime)
		buf = binary.AppendUvarint(buf, uint64(len(r.Link)))
		buf = append(buf, r.Link...)
		if flags&flagSum != 0 {
			buf = append(buf, r.Sum...)
		}
		buf = binary.AppendUvarint(buf, r.Ino)
		buf = binary.AppendVarint(buf, r.CTime)
	}
	return buf
}

func TestMappingBytesAreTheFormat(t *testing.T) {
	es := append(manyEntries(3000), fullSnap().Halves[0].Mappings[0].Entries()...)
	m := MappingOf(es)
	if got, want := bytes.Join(m.blocks, nil), encodeEntriesV2(es); !bytes.Equal(got, want) {
		t.Fatalf("encoded %d bytes, version 2 wrote %d (or other bytes)", len(got), len(want))
	}
	// And the file of a snapshot holding it is what it was: its mappings'
	// bytes in place.
	var b bytes.Buffer
	snap := &Snapshot{Key: "k", Halves: []Half{{Stamp: "s", Mappings: []Mapping{m}}}}
	if _, err := encode(&b, snap, 1<<30); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), encodeEntriesV2(es)) {
		t.Fatal("the file does not hold the mapping's entries as version 2 wrote them")
	}
	got, err := decode(bytes.NewReader(b.Bytes()), 1<<30)
	if err != nil || !reflect.DeepEqual(got.Halves[0].Mappings[0].Entries(), es) {
		t.Fatalf("decoded: %v", err)
	}
}
