package filesync

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/delta"
	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// Deltas of large files. A changed file of at least deltaMin whose old
// version the container holds goes as a patch: the blocks of the old file
// it still contains, found by rsync's rolling match (pkg/delta), and the
// bytes between them. The container builds the new file beside the old one from
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
	deltaBlock = delta.Block
)

// sigCache holds the signatures of what was last sent, by content sha256.
type sigCache struct {
	delta.Cache
	// reading holds the one file being read to learn its signature: an
	// initial sync of many large files reads them one at a time, not all
	// into memory at once.
	reading sync.Mutex
}

// learnSigs takes, in the background, the signatures of p's large files
// that res says were sent (with their sha256), from the local files, for a
// later patch; a file that changed since (another sha256) is left out.
func (e *Engine) learnSigs(t Target, p *planner.Plan, res tarstream.Result) {
	if !deltaLink(e.streams.Link(t), deltaMin) {
		return
	}
	for _, c := range p.Copies {
		sum, ok := res.Sums[c.Rel]
		if !ok || sum == nil || c.Type != planner.TypeFile || c.Size < deltaMin || c.Size > deltaMax || e.sigs.Get(*sum) != nil {
			continue
		}
		// Off the batch's path; bounded by the file.
		go func(src string, want [32]byte) {
			e.sigs.reading.Lock()
			defer e.sigs.reading.Unlock()
			if e.sigs.Get(want) != nil {
				return
			}
			data, err := readRegular(src)
			if err == nil && sha256.Sum256(data) == want {
				e.sigs.Put(want, delta.SignatureOf(data))
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
func (e *Engine) findPatches(tg *target, i int, m *planner.Resolved, p *sending) {
	if tg.alg != "sha256sum" {
		return
	}
	l := e.streams.Link(tg.Target)
	for _, c := range p.Copies {
		if c.Type != planner.TypeFile || c.Size < deltaMin || c.Size > deltaMax {
			continue
		}
		if _, moved := p.Moves[c.Rel]; moved {
			continue
		}
		if !deltaLink(l, c.Size) {
			continue
		}
		old, ok := tg.idx[i].Get(c.Rel)
		if !ok || old.Type != planner.TypeFile || old.Stale() || old.Sum == nil {
			continue
		}
		sig := e.sigs.Get(*old.Sum)
		if sig == nil {
			continue
		}
		data, err := readRegular(c.Src)
		if err != nil || int64(len(data)) != c.Size || !planner.SameFile(m, c) {
			continue
		}
		// The new file's sha256 (which the container checks what it builds
		// against) beside the match; its signature, for the next save, off
		// the batch's path.
		sumc := make(chan [32]byte, 1)
		go func() { sumc <- sha256.Sum256(data) }()
		ops, lit := delta.Of(data, sig)
		sum := <-sumc
		go func() { e.sigs.Put(sum, delta.SignatureOf(data)) }()
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
func applyPatches(ctx context.Context, ex Executor, t Target, m *planner.Resolved, p *sending, sent []planner.Copy) ([]planner.Copy, error) {
	if len(p.Patches)+len(p.patched) == 0 {
		return sent, nil
	}
	var whole []planner.Copy
	for _, c := range sent {
		if _, done := p.patched[c.Rel]; done {
			continue
		}
		pt, ok := p.Patches[c.Rel]
		if !ok {
			whole = append(whole, c)
			continue
		}
		a := &remote.ApplyArgs{Root: string(m.RemoteDir()), Expect: p.expectAt(c.Rel),
			Patch: remote.PatchArgs("./"+c.Name, pt.old, pt.new, c.Mode, deltaBlock, pt.ops)}
		if len(a.Expect) > 0 && remote.Guards(a.Expect[0]) {
			p.swap(c.Rel, a.Expect[0]) // its result goes in through swap
		}
		if m.File {
			a.File = "./" + m.RemoteName("")
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
