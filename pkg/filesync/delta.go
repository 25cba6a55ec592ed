package filesync

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5" //nolint:gosec // matching blocks locally; the container checks the result's sha256
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// Deltas of large files. A changed file of at least deltaMin whose old
// version the container holds goes as a patch: the blocks of the old file
// it still contains, found by rsync's rolling match (a weak checksum rolled
// over every offset of the new file, confirmed by a strong one, so bytes
// inserted or removed don't shift every block after them), and the bytes
// between them. The container builds the new file beside the old one from
// both (dd), checks its sha256 against the local file's and renames it
// over the old one (apply.sh, mode p); anything else leaves the old file as
// it was, and the file is sent whole.
//
// The old version's block signatures are the client's: the container's
// tools (dd, sha256sum, md5sum) hash blocks but can't give the weak
// checksums a rolling match needs. They are taken from the local file
// right after it was sent (see learnSigs), keyed by its sha256, which the
// container then checks before it patches: a signature is only used for
// the content it was taken from. A session that has none (the first save
// after it started) sends the file whole.
const (
	deltaMin   = 1 << 20
	deltaMax   = 256 << 20 // read whole into memory to be matched
	deltaBlock = 64 << 10
	// sigCacheMax is how many files' signatures are kept (16 bytes and a
	// checksum per block: 11 KiB for a 35 MB file).
	sigCacheMax = 64
)

// signature is a file's blocks' weak and strong checksums (full blocks only).
type signature struct {
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

// signatureOf returns data's signature.
func signatureOf(data []byte) *signature {
	n := len(data) / deltaBlock
	s := &signature{weak: make([]uint32, n), strong: make([][16]byte, n), index: make(map[uint32][]int, n)}
	var r rollsum
	for k := range n {
		blk := data[k*deltaBlock : (k+1)*deltaBlock]
		r.init(blk)
		s.weak[k] = r.sum()
		s.strong[k] = md5.Sum(blk) //nolint:gosec // see the import
		s.index[s.weak[k]] = append(s.index[s.weak[k]], k)
	}
	return s
}

// deltaOf matches data against old's blocks and returns apply.sh's patch
// operations (see remote.PatchArgs) and the literal bytes they read.
func deltaOf(data []byte, old *signature) (ops []string, lit []byte) {
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
	if len(data) >= deltaBlock {
		r.init(data[:deltaBlock])
	}
	for i+deltaBlock <= len(data) {
		if k := old.match(data[i:i+deltaBlock], r.sum()); k >= 0 {
			flushLit(i)
			if runLen > 0 && run+runLen == k {
				runLen++
			} else {
				flushRun()
				run, runLen = k, 1
			}
			i += deltaBlock
			litStart = i
			if i+deltaBlock <= len(data) {
				r.init(data[i : i+deltaBlock])
			}
			continue
		}
		if i+deltaBlock < len(data) {
			r.roll(data[i], data[i+deltaBlock], deltaBlock)
		}
		i++
	}
	flushLit(len(data))
	flushRun()
	return ops, lit
}

// match returns the old block whose checksums are w's, or -1.
func (s *signature) match(w []byte, weak uint32) int {
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

// sigCache holds the signatures of what was last sent, by content sha256.
type sigCache struct {
	mu    sync.Mutex
	m     map[[32]byte]*signature
	order [][32]byte
	// reading holds the one file being read to learn its signature: an
	// initial sync of many large files reads them one at a time, not all
	// into memory at once.
	reading sync.Mutex
}

func (c *sigCache) get(sum [32]byte) *signature {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[sum]
}

func (c *sigCache) put(sum [32]byte, s *signature) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]*signature{}
	}
	if _, ok := c.m[sum]; ok {
		return
	}
	c.m[sum] = s
	c.order = append(c.order, sum)
	if len(c.order) > sigCacheMax {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}

// learnSigs takes, in the background, the signatures of p's large files
// that res says were sent (with their sha256), from the local files, for a
// later patch; a file that changed since (another sha256) is left out.
func (e *Engine) learnSigs(t Target, p *Plan, res tarstream.Result) {
	if !deltaLink(e.streams.Link(t), deltaMin) {
		return
	}
	for _, c := range p.Copies {
		sum, ok := res.Sums[c.Rel]
		if !ok || sum == nil || c.Type != TypeFile || c.Size < deltaMin || c.Size > deltaMax || e.sigs.get(*sum) != nil {
			continue
		}
		// Off the batch's path; bounded by the file.
		go func(src string, want [32]byte) {
			e.sigs.reading.Lock()
			defer e.sigs.reading.Unlock()
			if e.sigs.get(want) != nil {
				return
			}
			data, err := readRegular(src)
			if err == nil && sha256.Sum256(data) == want {
				e.sigs.put(want, signatureOf(data))
			}
		}(c.Src, *sum)
	}
}

// readRegular reads a regular file whole, without following a link.
func readRegular(name string) ([]byte, error) {
	f, _, err := localtree.OpenRegular(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, deltaMax+1))
}

// patch is a copy sent as a delta of the file the container holds.
type patch struct {
	old, new [32]byte
	ops      []string
	lit      []byte
	// zlit is lit gzip-compressed, where that pays (see findPatches), else nil.
	zlit []byte
}

// zipped returns b gzip-compressed at level 1 where that shrinks it by a
// fifth or more, else nil.
func zipped(b []byte) []byte {
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed) // a valid level: no error
	_, _ = zw.Write(b)                                 // into memory: no error
	_ = zw.Close()
	if out.Len()*5 > len(b)*4 {
		return nil
	}
	return out.Bytes()
}

// deltaWorth is how long a whole send must be expected to take, on the
// link's measured rate, for a delta to be tried: on loopback a 35 MB file
// goes in well under that, and matching and patching it cost about as much.
const deltaWorth = time.Second

// deltaLink reports whether a file of size goes as a delta over l: it
// would take deltaWorth or more to send whole at l's measured rate, or
// without one l is slow.
func deltaLink(l remote.Link, size int64) bool {
	if l.Rate > 0 {
		return time.Duration(float64(size)/l.Rate*float64(time.Second)) >= deltaWorth
	}
	return l.Slow()
}

// findPatches sets p.Patches: the large files p copies over an old version
// the container confirmed, whose signature is known, over a link where the
// send takes long (see deltaWorth), and whose delta sends less than half of
// them. Only where the container has sha256sum (alg).
func (e *Engine) findPatches(tg *target, i int, m *mapping, p *Plan) {
	if tg.alg != "sha256sum" {
		return
	}
	l := e.streams.Link(tg.Target)
	for _, c := range p.Copies {
		if c.Type != TypeFile || c.Size < deltaMin || c.Size > deltaMax {
			continue
		}
		if _, moved := p.Moves[c.Rel]; moved {
			continue
		}
		if !deltaLink(l, c.Size) {
			continue
		}
		old, ok := tg.idx[i].Get(c.Rel)
		if !ok || old.Type != TypeFile || old.stale || old.Sum == nil {
			continue
		}
		sig := e.sigs.get(*old.Sum)
		if sig == nil {
			continue
		}
		data, err := readRegular(c.Src)
		if err != nil || int64(len(data)) != c.Size || !sameFile(m, c) {
			continue
		}
		// The new file's sha256 (which the container checks what it builds
		// against) beside the match; its signature, for the next save, off
		// the batch's path.
		sumc := make(chan [32]byte, 1)
		go func() { sumc <- sha256.Sum256(data) }()
		ops, lit := deltaOf(data, sig)
		sum := <-sumc
		go func() { e.sigs.put(sum, signatureOf(data)) }()
		args := 0
		for _, o := range ops {
			args += len(o) + 1
		}
		if len(lit) > len(data)/2 || args > remote.MaxArgBytes/2 {
			continue
		}
		if p.Patches == nil {
			p.Patches = map[string]*patch{}
		}
		pt := &patch{old: *old.Sum, new: sum, ops: ops, lit: lit}
		if tg.gzip && len(lit) >= batchCompressMin && l.Slow() {
			pt.zlit = zipped(lit) // by the batches' rule (see compressBatch)
		}
		p.Patches[c.Rel] = pt
	}
}

// patched is a patch the container applied: the new file's sha256, and the
// bytes its exec sent.
type patched struct {
	sum   [32]byte
	bytes int64
}

// applyPatches runs p's patches (see findPatches), each in an exec of its
// own with the file's precondition (see applyGuarded) checked first, and
// returns the copies left to send whole: those without one, and those whose
// patch the container refused. One applied is recorded in p.patched, and a
// later try of p leaves it out. A precondition that failed ends the apply
// with its *remote.ChangedError, the file as it was; a patch that failed
// otherwise (the stream cut) is dropped from p, so the retry sends the file
// whole, and ends the apply.
func applyPatches(ctx context.Context, ex Executor, t Target, m *mapping, p *Plan, sent []Copy) ([]Copy, error) {
	if len(p.Patches)+len(p.patched) == 0 {
		return sent, nil
	}
	var whole []Copy
	for _, c := range sent {
		if _, done := p.patched[c.Rel]; done {
			continue
		}
		pt, ok := p.Patches[c.Rel]
		if !ok {
			whole = append(whole, c)
			continue
		}
		a := &remote.ApplyArgs{Root: string(m.remoteDir()), Expect: p.expectAt(c.Rel),
			Patch: remote.PatchArgs("./"+c.Name, pt.old, pt.new, c.Mode, deltaBlock, pt.ops)}
		if m.file {
			a.File = "./" + m.remoteName("")
		}
		in := pt.lit
		if pt.zlit != nil {
			a.Gz, in = true, pt.zlit
		}
		_, err := remote.Apply(ctx, ex, t, "patching files", a, bytes.NewReader(in))
		var ce *remote.ChangedError
		switch {
		case err == nil:
			if p.patched == nil {
				p.patched = map[string]patched{}
			}
			p.patched[c.Rel] = patched{sum: pt.new, bytes: int64(len(in))}
			delete(p.Patches, c.Rel)
		case errors.As(err, &ce):
			return nil, err
		case remote.IsPatchRefused(err):
			delete(p.Patches, c.Rel)
			whole = append(whole, c)
		default:
			delete(p.Patches, c.Rel)
			return nil, withMapping(err, t, m)
		}
	}
	return whole, nil
}
