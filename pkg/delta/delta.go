// Package delta is rsync's rolling match: a file's block signature, the
// patch that rebuilds a new version from the old one's blocks and literal
// bytes, and a small cache of signatures by content. It imports nothing of
// this module: pkg/filesync decides which files go as patches and sends
// them; apply.sh in the container builds the new file from the operations.
package delta

import (
	"crypto/md5" //nolint:gosec // matching blocks locally; the container checks the result's sha256
	"fmt"
	"sync"
)

// A patch names the old file's blocks it still contains and the bytes
// between them. The rolling match finds them wherever they moved: a weak
// checksum rolled over every offset of the new file, confirmed by a strong
// one, so bytes inserted or removed don't shift every block after them.
//
// The old version's block signatures are the client's: the container's
// tools (dd, sha256sum, md5sum) hash blocks but can't give the weak
// checksums a rolling match needs.
const (
	// Block is the size of a signature's blocks, and of the blocks a
	// patch's "B" operations count in (apply.sh's dd block size).
	Block = 64 << 10
	// CacheSize is how many files' signatures a Cache keeps (16 bytes and
	// a checksum per block: 11 KiB for a 35 MB file).
	CacheSize = 64
)

// Signature is a file's blocks' weak and strong checksums (full blocks only).
type Signature struct {
	weak   []uint32
	strong [][16]byte
	index  map[uint32][]int
}

// rollsum is rsync's weak checksum of a window.
type rollsum struct{ a, b uint32 }

func (r *rollsum) init(w []byte) {
	r.a, r.b = 0, 0
	n := uint32(len(w))
	for i, c := range w {
		r.a += uint32(c)
		r.b += (n - uint32(i)) * uint32(c)
	}
}

// roll moves the window one byte: out leaves, in enters; n is its length.
func (r *rollsum) roll(out, in byte, n uint32) {
	r.a += uint32(in) - uint32(out)
	r.b += r.a - n*uint32(out)
}

func (r *rollsum) sum() uint32 { return r.a&0xffff | r.b<<16 }

// SignatureOf returns data's signature.
func SignatureOf(data []byte) *Signature {
	n := len(data) / Block
	s := &Signature{weak: make([]uint32, n), strong: make([][16]byte, n), index: make(map[uint32][]int, n)}
	var r rollsum
	for k := range n {
		blk := data[k*Block : (k+1)*Block]
		r.init(blk)
		s.weak[k] = r.sum()
		s.strong[k] = md5.Sum(blk) //nolint:gosec // see the import
		s.index[s.weak[k]] = append(s.index[s.weak[k]], k)
	}
	return s
}

// Of matches data against old's blocks and returns the patch operations
// that rebuild data, in order, and the literal bytes they read: "Bk:n" is
// n old blocks from block k, "Ln" the next n literal bytes (see
// remote.PatchArgs).
func Of(data []byte, old *Signature) (ops []string, lit []byte) {
	var (
		run, runLen = -1, 0 // the current run of old blocks
		litStart    = 0
	)
	flushRun := func() {
		if runLen > 0 {
			ops = append(ops, fmt.Sprintf("B%d:%d", run, runLen))
		}
		run, runLen = -1, 0
	}
	flushLit := func(end int) {
		if end > litStart {
			flushRun()
			ops = append(ops, fmt.Sprintf("L%d", end-litStart))
			lit = append(lit, data[litStart:end]...)
		}
	}
	var r rollsum
	i := 0
	if len(data) >= Block {
		r.init(data[:Block])
	}
	for i+Block <= len(data) {
		if k := old.match(data[i:i+Block], r.sum()); k >= 0 {
			flushLit(i)
			if runLen > 0 && run+runLen == k {
				runLen++
			} else {
				flushRun()
				run, runLen = k, 1
			}
			i += Block
			litStart = i
			if i+Block <= len(data) {
				r.init(data[i : i+Block])
			}
			continue
		}
		if i+Block < len(data) {
			r.roll(data[i], data[i+Block], Block)
		}
		i++
	}
	flushLit(len(data))
	flushRun()
	return ops, lit
}

// match returns the old block whose checksums are w's, or -1.
func (s *Signature) match(w []byte, weak uint32) int {
	ks, ok := s.index[weak]
	if !ok {
		return -1
	}
	strong := md5.Sum(w) //nolint:gosec // see the import
	for _, k := range ks {
		if s.strong[k] == strong {
			return k
		}
	}
	return -1
}

// Cache holds the signatures of the last CacheSize contents it was given,
// by their sha256: a signature is only used for the content it was taken
// from. The zero value is ready; it is safe for concurrent use.
type Cache struct {
	mu    sync.Mutex
	m     map[[32]byte]*Signature
	order [][32]byte
}

// Get returns the signature of the content whose sha256 is sum, or nil.
func (c *Cache) Get(sum [32]byte) *Signature {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[sum]
}

// Put keeps s as the signature of the content whose sha256 is sum,
// dropping the oldest beyond CacheSize.
func (c *Cache) Put(sum [32]byte, s *Signature) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]*Signature{}
	}
	if _, ok := c.m[sum]; ok {
		return
	}
	c.m[sum] = s
	c.order = append(c.order, sum)
	if len(c.order) > CacheSize {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}
