package syncstate

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"time"
)

// The file format. Version 3 is version 2 with each half's standing
// conflicts after its mappings (see Conflict); versions 2 and 1 are still
// read, without conflicts. Version 2 streams: each field as a varint or a
// length-prefixed string, each path as the length it shares with the path
// before it and the rest, and a sha256 of everything before it at the end,
// so that neither Save nor Load holds the file in memory: version 1 (a
// gob of the whole snapshot behind a checksum in the header) cost a
// session of 100,000 files about 40 MiB of buffers per save. Version 1 is
// still read.
const (
	magicV1 = "kubectl-livesync state v1\n"
	magicV2 = "kubectl-livesync state v2\n"
	magic   = "kubectl-livesync state v3\n"
)

// Bounds of what decode believes of a damaged file before its checksum
// says so: the lengths of one string and the room it makes for a count.
const (
	maxString   = 1 << 20
	maxPrealloc = 1 << 16
)

// Entry flags of version 2.
const (
	flagSum     = 1 << iota // 32 bytes of Sum follow
	flagUnknown             // Entry.Unknown
)

// Conflict flags of version 3.
const (
	conflictExists = 1 << iota // Conflict.Exists
	conflictSum                // 32 bytes of Remote.Sum follow
	conflictAbsent             // Remote.Absent
	conflictStat               // Remote.Size and Remote.MTime follow
)

// encoder writes version 3 a buffer at a time, to the file and the hash,
// counting what it wrote.
type encoder struct {
	w   io.Writer
	h   hash.Hash
	buf []byte // not yet written
	n   int64
	max int64 // ErrTooLarge beyond it
	err error
}

func (e *encoder) flush() {
	if e.err != nil || len(e.buf) == 0 {
		return
	}
	e.h.Write(e.buf)
	_, e.err = e.w.Write(e.buf)
	e.buf = e.buf[:0]
}

// room makes sure n more bytes are within the bound, flushing the buffer
// when they would not fit in it.
func (e *encoder) room(n int) bool {
	if e.err != nil {
		return false
	}
	if e.n += int64(n); e.n > e.max {
		e.err = ErrTooLarge
		return false
	}
	if len(e.buf)+n > cap(e.buf) {
		e.flush()
	}
	return e.err == nil
}

func (e *encoder) write(b []byte) {
	if !e.room(len(b)) {
		return
	}
	if len(b) > cap(e.buf)-len(e.buf) { // room flushed: a block of a Mapping goes as it is
		e.h.Write(b)
		_, e.err = e.w.Write(b)
		return
	}
	e.buf = append(e.buf, b...)
}

func (e *encoder) uvarint(v uint64) {
	if e.room(binary.MaxVarintLen64) {
		l := len(e.buf)
		e.buf = binary.AppendUvarint(e.buf, v)
		e.n -= int64(binary.MaxVarintLen64 - (len(e.buf) - l))
	}
}

func (e *encoder) varint(v int64) {
	if e.room(binary.MaxVarintLen64) {
		l := len(e.buf)
		e.buf = binary.AppendVarint(e.buf, v)
		e.n -= int64(binary.MaxVarintLen64 - (len(e.buf) - l))
	}
}

func (e *encoder) string(s string) {
	e.uvarint(uint64(len(s)))
	if e.room(len(s)) {
		e.buf = append(e.buf, s...)
	}
}

func (e *encoder) time(t time.Time) {
	if t.IsZero() {
		e.varint(0)
		return
	}
	e.varint(t.UnixNano())
}

// encode writes snap to w in version 2, failing with ErrTooLarge as soon
// as it passes max bytes. A mapping's entries are written as they are held
// (see Mapping).
func encode(w io.Writer, snap *Snapshot, max int64) (int64, error) {
	return encodeVersion(w, snap, max, true)
}

// encodeVersion is encode, in version 3 or (tests of what older versions
// wrote) version 2, which has no conflicts.
func encodeVersion(w io.Writer, snap *Snapshot, max int64, v3 bool) (int64, error) {
	e := &encoder{w: w, h: sha256.New(), buf: make([]byte, 0, 1<<16), max: max}
	if v3 {
		e.write([]byte(magic))
	} else {
		e.write([]byte(magicV2))
	}
	e.string(snap.Key)
	e.time(snap.Saved)
	e.uvarint(uint64(len(snap.Halves)))
	for _, hf := range snap.Halves {
		e.string(hf.Stamp)
		e.string(hf.Name)
		e.time(hf.Saved)
		e.uvarint(uint64(len(hf.Mappings)))
		for _, m := range hf.Mappings {
			e.uvarint(uint64(m.n))
			for _, b := range m.blocks {
				e.write(b)
			}
			if e.err != nil {
				return e.n, e.err
			}
		}
		if v3 {
			e.uvarint(uint64(len(hf.Conflicts)))
			for _, c := range hf.Conflicts {
				e.conflict(c)
			}
		}
	}
	e.flush()
	if e.err == nil && e.room(sha256.Size) {
		e.buf = e.h.Sum(e.buf) // not summed itself: flush below writes it alone
		_, e.err = e.w.Write(e.buf)
	}
	return e.n, e.err
}

// conflict writes c (version 3).
func (e *encoder) conflict(c Conflict) {
	var flags byte
	if c.Exists {
		flags |= conflictExists
	}
	if len(c.Remote.Sum) == sha256.Size {
		flags |= conflictSum
	}
	if c.Remote.Absent {
		flags |= conflictAbsent
	}
	if c.Remote.Stat {
		flags |= conflictStat
	}
	e.uvarint(uint64(c.Mapping))
	e.string(c.Path)
	e.write([]byte{flags})
	e.uvarint(uint64(c.Mode))
	e.varint(c.Size)
	e.varint(c.MTime)
	e.uvarint(c.Ino)
	e.varint(c.CTime)
	if flags&conflictSum != 0 {
		e.write(c.Remote.Sum)
	}
	if c.Remote.Stat {
		e.varint(c.Remote.Size)
		e.varint(c.Remote.MTime)
	}
}

// reader is a buffered reader that hashes what was consumed of it, a
// buffer at a time (a hash per byte cost more than the rest of a load);
// with no hash (a Mapping read back), it only reads.
type reader struct {
	r            io.Reader
	h            hash.Hash
	buf          []byte
	lo, pos, end int // buf[lo:pos] consumed but not yet hashed, buf[pos:end] not consumed
	err          error
}

func (r *reader) fill() bool {
	if r.err != nil {
		return false
	}
	if r.h != nil {
		r.h.Write(r.buf[r.lo:r.pos])
	}
	r.lo, r.pos, r.end = 0, 0, 0
	n, err := io.ReadAtLeast(r.r, r.buf, 1)
	r.end = n
	if n == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		r.err = err
		return false
	}
	return true
}

func (r *reader) ReadByte() (byte, error) {
	if r.pos == r.end && !r.fill() {
		return 0, r.err
	}
	r.pos++
	return r.buf[r.pos-1], nil
}

// full reads len(b) bytes into b.
func (r *reader) full(b []byte) {
	for len(b) > 0 {
		if r.pos == r.end && !r.fill() {
			return
		}
		n := copy(b, r.buf[r.pos:r.end])
		r.pos += n
		b = b[n:]
	}
}

// sum returns the hash of everything consumed so far.
func (r *reader) sum() []byte {
	r.h.Write(r.buf[r.lo:r.pos])
	r.lo = r.pos
	return r.h.Sum(nil)
}

// decoder reads the fields of version 2.
type decoder struct {
	r   *reader
	buf []byte // the string being read
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) byte() byte {
	b, err := d.r.ReadByte()
	if err != nil {
		d.fail(err)
	}
	return b
}

func (d *decoder) uvarint() uint64 {
	v, err := binary.ReadUvarint(d.r)
	if err != nil {
		d.fail(err)
	}
	return v
}

func (d *decoder) varint() int64 {
	v, err := binary.ReadVarint(d.r)
	if err != nil {
		d.fail(err)
	}
	return v
}

// appendString appends a length-prefixed string to b.
func (d *decoder) appendString(b []byte) []byte {
	n := d.uvarint()
	if d.err != nil {
		return b
	}
	if n > maxString {
		d.fail(errors.New("a string longer than any saved"))
		return b
	}
	start := len(b)
	b = append(b, make([]byte, n)...)
	d.r.full(b[start:])
	if d.r.err != nil {
		d.fail(d.r.err)
	}
	return b
}

func (d *decoder) string() string {
	d.buf = d.appendString(d.buf[:0])
	if d.err != nil || len(d.buf) == 0 {
		return ""
	}
	return string(d.buf)
}

func (d *decoder) time() time.Time {
	if v := d.varint(); v != 0 {
		return time.Unix(0, v)
	}
	return time.Time{}
}

// count reads a count and returns it with the room to make for it: no
// more than maxPrealloc before the file proved whole.
func (d *decoder) count() (int, int) {
	n := d.uvarint()
	if n > 1<<40 {
		d.fail(errors.New("a count larger than any saved"))
		return 0, 0
	}
	return int(n), int(min(n, maxPrealloc))
}

// entry reads one entry of a mapping into r, its path into *path (after
// the path before it, which *path holds), its sum into *sum (r.Sum is a
// slice of it); false when the bytes are cut short or damaged.
func (d *decoder) entry(path *[]byte, r *Entry, sum *[sha256.Size]byte) bool {
	shared := int(d.uvarint())
	if d.err == nil && shared > len(*path) {
		d.err = errors.New("a path shares more than the path before it")
	}
	if d.err != nil {
		return false
	}
	*path = d.appendString((*path)[:shared])
	t, flags := d.byte(), d.byte()
	r.Type, r.Unknown = t, flags&flagUnknown != 0
	r.Mode = uint32(d.uvarint())
	r.Size = d.varint()
	r.MTime = d.varint()
	r.Link = d.string()
	if flags&flagSum != 0 {
		r.Sum = sum[:]
		d.r.full(r.Sum)
		d.fail(d.r.err)
	}
	r.Ino = d.uvarint()
	r.CTime = d.varint()
	return d.err == nil
}

// conflict reads one conflict (version 3).
func (d *decoder) conflict() Conflict {
	var c Conflict
	c.Mapping = int(d.uvarint())
	c.Path = d.string()
	flags := d.byte()
	c.Exists = flags&conflictExists != 0
	c.Mode = uint32(d.uvarint())
	c.Size = d.varint()
	c.MTime = d.varint()
	c.Ino = d.uvarint()
	c.CTime = d.varint()
	if flags&conflictSum != 0 {
		c.Remote.Sum = make([]byte, sha256.Size)
		d.r.full(c.Remote.Sum)
		d.fail(d.r.err)
	}
	c.Remote.Absent = flags&conflictAbsent != 0
	if flags&conflictStat != 0 {
		c.Remote.Stat = true
		c.Remote.Size = d.varint()
		c.Remote.MTime = d.varint()
	}
	return c
}

// decodeV2 reads a version 2 body from r, whose hash has summed the magic;
// with v3, a version 3 body (conflicts after each half's mappings).
func decodeV2(r *reader, v3 bool) (*Snapshot, error) {
	d := &decoder{r: r}
	snap := &Snapshot{Key: d.string(), Saved: d.time()}
	nh, room := d.count()
	snap.Halves = make([]Half, 0, room)
	for range nh {
		if d.err != nil {
			break
		}
		hf := Half{Stamp: d.string(), Name: d.string(), Saved: d.time()}
		nm, room := d.count()
		hf.Mappings = make([]Mapping, 0, room)
		for range nm {
			if d.err != nil {
				break
			}
			ne, _ := d.count()
			var (
				b    MappingBuilder
				path []byte
				sum  [sha256.Size]byte
			)
			for range ne {
				var r Entry
				if !d.entry(&path, &r, &sum) {
					break
				}
				add(&b, path, &r)
			}
			hf.Mappings = append(hf.Mappings, b.Mapping())
		}
		if v3 {
			nc, room := d.count()
			hf.Conflicts = make([]Conflict, 0, room)
			for range nc {
				if d.err != nil {
					break
				}
				hf.Conflicts = append(hf.Conflicts, d.conflict())
			}
		}
		snap.Halves = append(snap.Halves, hf)
	}
	if d.err != nil {
		return nil, fmt.Errorf("cut short or damaged: %w", d.err)
	}
	want := r.sum()
	got := make([]byte, sha256.Size)
	if r.full(got); r.err != nil || !bytes.Equal(got, want) {
		return nil, errors.New("checksum mismatch (cut short or damaged)")
	}
	if _, err := r.ReadByte(); !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, errors.New("checksum mismatch (more after its end)")
	}
	return snap, nil
}

// decode reads a file written by Save, of either version, at most limit
// bytes of it.
func decode(r io.Reader, limit int64) (*Snapshot, error) {
	lr := &io.LimitedReader{R: r, N: limit + 1}
	rd := &reader{r: lr, h: sha256.New(), buf: make([]byte, 1<<16)}
	head := make([]byte, len(magic))
	if rd.full(head); rd.err != nil {
		return nil, errors.New("not a state file of this version")
	}
	switch string(head) {
	case magic, magicV2:
		snap, err := decodeV2(rd, string(head) == magic)
		if lr.N <= 0 {
			return nil, errors.New("larger than its bound")
		}
		return snap, err
	case magicV1:
		// What the reader holds beyond the magic goes first.
		rest := io.MultiReader(bytes.NewReader(rd.buf[rd.pos:rd.end]), lr)
		return decodeV1(bufio.NewReader(rest), lr)
	}
	return nil, errors.New("not a state file of this version")
}

// decodeV1 reads the rest of a version 1 file after its magic.
func decodeV1(br *bufio.Reader, lr *io.LimitedReader) (*Snapshot, error) {
	line, err := br.ReadString('\n')
	want, herr := hex.DecodeString(strings.TrimSuffix(line, "\n"))
	if err != nil || herr != nil || len(want) != sha256.Size {
		return nil, errors.New("damaged header")
	}
	body, err := io.ReadAll(br)
	if err != nil {
		return nil, err
	}
	if lr.N <= 0 {
		return nil, errors.New("larger than its bound")
	}
	if got := sha256.Sum256(body); !bytes.Equal(got[:], want) {
		return nil, errors.New("checksum mismatch (cut short or damaged)")
	}
	var v1 snapshotV1
	if err := gob.NewDecoder(bytes.NewReader(body)).Decode(&v1); err != nil {
		return nil, fmt.Errorf("damaged: %w", err)
	}
	snap := &Snapshot{Key: v1.Key, Saved: v1.Saved}
	for _, h := range v1.Halves {
		hf := Half{Stamp: h.Stamp, Name: h.Name, Saved: h.Saved}
		for _, es := range h.Mappings {
			if es == nil {
				es = []Entry{} // a mapping gob kept empty was one
			}
			hf.Mappings = append(hf.Mappings, MappingOf(es))
		}
		snap.Halves = append(snap.Halves, hf)
	}
	return snap, nil
}

// snapshotV1 and halfV1 are Snapshot and Half as version 1 wrote them
// (gob matches fields by name).
type (
	snapshotV1 struct {
		Key    string
		Saved  time.Time
		Halves []halfV1
	}
	halfV1 struct {
		Stamp, Name string
		Saved       time.Time
		Mappings    [][]Entry
	}
)
