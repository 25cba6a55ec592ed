package syncstate

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"iter"
)

// Mapping is one mapping's entries of a Half, held the way the file holds
// them (version 2: each path as the length it shares with the path before
// it and the rest, each number a varint, the sum as 32 bytes) in blocks of
// at most mappingBlock bytes. A session of 100,000 paths hands one over
// every 2 s and keeps the last one (and the one it loaded) for its life:
// as []Entry each cost 10 MiB of pointers the collector scans, besides the
// strings and sums they share with the index; encoded, about 7 MiB of
// bytes it never scans, and nothing shared. Save copies the blocks into
// the file as they are. The zero Mapping is no mapping at all, as a nil
// []Entry was; one built from entries, even none, is a mapping.
type Mapping struct {
	n      int
	blocks [][]byte
	set    bool
}

// mappingBlock bounds a block of a Mapping: a builder wastes less than one
// block, where one slice grown by doubling wasted up to half.
const mappingBlock = 64 << 10

// Len returns how many entries m holds.
func (m Mapping) Len() int { return m.n }

// IsZero reports whether m is no mapping (the zero Mapping), as against a
// mapping of no entries.
func (m Mapping) IsZero() bool { return !m.set }

// All yields m's entries in the order they were added. Each Entry is the
// caller's: its Path, Link and Sum are its own, not m's.
func (m Mapping) All() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		if m.n == 0 {
			return
		}
		rs := make([]io.Reader, len(m.blocks))
		for i, b := range m.blocks {
			rs[i] = bytes.NewReader(b)
		}
		d := &decoder{r: &reader{r: io.MultiReader(rs...), buf: make([]byte, 4096)}}
		var (
			path []byte
			sum  [sha256.Size]byte
		)
		for range m.n {
			var r Entry
			if !d.entry(&path, &r, &sum) {
				return // never, for bytes a MappingBuilder wrote
			}
			r.Path = string(path)
			if r.Sum != nil {
				r.Sum = bytes.Clone(r.Sum)
			}
			if !yield(r) {
				return
			}
		}
	}
}

// Entries returns m's entries as a slice; nil for the zero Mapping.
func (m Mapping) Entries() []Entry {
	if !m.set {
		return nil
	}
	out := make([]Entry, 0, m.n)
	for e := range m.All() {
		out = append(out, e)
	}
	return out
}

// MappingOf encodes es; nil gives the zero Mapping.
func MappingOf(es []Entry) Mapping {
	if es == nil {
		return Mapping{}
	}
	var b MappingBuilder
	for i := range es {
		b.Add(&es[i])
	}
	return b.Mapping()
}

// MappingBuilder encodes entries into a Mapping, one at a time. Entries that
// share a directory in a row cost less (the path they share is written once).
type MappingBuilder struct {
	m    Mapping
	cur  []byte
	prev []byte
}

// Add appends e.
func (b *MappingBuilder) Add(e *Entry) { add(b, e.Path, e) }

// add appends e at path to b (e.Path is not read: decode adds what it
// reads without making a string of every path).
func add[S ~string | ~[]byte](b *MappingBuilder, path S, e *Entry) {
	if need := entryMax(len(path), e); len(b.cur)+need > cap(b.cur) {
		b.seal()
		b.cur = make([]byte, 0, max(mappingBlock, need))
	}
	b.cur = appendEntry(b.cur, b.prev, path, e)
	b.prev = append(b.prev[:0], path...)
	b.m.n++
}

func (b *MappingBuilder) seal() {
	if len(b.cur) > 0 {
		b.m.blocks = append(b.m.blocks, b.cur)
	}
	b.cur = nil
}

// Mapping returns what was added; the builder starts over empty.
func (b *MappingBuilder) Mapping() Mapping {
	b.seal()
	m := b.m
	m.set = true
	*b = MappingBuilder{}
	return m
}

// entryMax bounds what appendEntry writes for e at a path of n bytes.
func entryMax(n int, e *Entry) int {
	return 7*binary.MaxVarintLen64 + 2 + n + len(e.Link) + sha256.Size
}

// appendEntry appends version 2's encoding of e at path, after the path
// prev, to buf.
func appendEntry[S ~string | ~[]byte](buf, prev []byte, path S, e *Entry) []byte {
	shared := commonPrefix(prev, path)
	buf = binary.AppendUvarint(buf, uint64(shared))
	buf = binary.AppendUvarint(buf, uint64(len(path)-shared))
	buf = append(buf, path[shared:]...)
	var flags byte
	if len(e.Sum) == sha256.Size {
		flags |= flagSum
	}
	if e.Unknown {
		flags |= flagUnknown
	}
	buf = append(buf, e.Type, flags)
	buf = binary.AppendUvarint(buf, uint64(e.Mode))
	buf = binary.AppendVarint(buf, e.Size)
	buf = binary.AppendVarint(buf, e.MTime)
	buf = binary.AppendUvarint(buf, uint64(len(e.Link)))
	buf = append(buf, e.Link...)
	if flags&flagSum != 0 {
		buf = append(buf, e.Sum...)
	}
	buf = binary.AppendUvarint(buf, e.Ino)
	buf = binary.AppendVarint(buf, e.CTime)
	return buf
}

func commonPrefix[S ~string | ~[]byte](a []byte, b S) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
