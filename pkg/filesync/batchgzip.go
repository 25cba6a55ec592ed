package filesync

import (
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// batchCompressMin is the smallest batch archive sent gzip-compressed: below
// it the whole send is a round trip or two either way.
const batchCompressMin = 256 << 10

// compressBatch says whether p, a batch's plan for a container whose gzip
// works as gz says, goes compressed over l: by the initial sync's rule (big
// enough, and a sample of its files shrinks; see compressible), on a link
// that was measured slow (see remote.Link.Slow).
func compressBatch(gz bool, p *planner.Plan, l remote.Link) bool {
	sent := p.Sent()
	return gz && copiesBytes(sent) >= batchCompressMin && l.Slow() && planner.Compressible(sent)
}

// copiesBytes is the file content of copies.
func copiesBytes(copies []planner.Copy) int64 {
	var n int64
	for _, c := range copies {
		n += c.Size
	}
	return n
}

// batchGzip is compressBatch for p in tg, over what tg's stream measured.
func (e *Engine) batchGzip(tg *target, p *planner.Plan) bool {
	return compressBatch(tg.gzip, p, e.streams.Link(tg.Target))
}

// initialGzip says whether p, tg's initial sync of a mapping listed as l,
// goes compressed: where planner.CompressInitial says it would shrink, over a
// link its stream did not find fast (remote.Link.Slow: the stream opened
// while the container was listed, and its first heartbeat's ack measured
// the round trip; nothing measured, it does). On loopback and links as
// near, gzip spends both ends' CPU for nothing, and a plain archive goes in
// parts that the container extracts as they come (see remote.Parted).
func (e *Engine) initialGzip(tg *target, l *planner.Listing, p *planner.Plan) bool {
	return planner.CompressInitial(l, p) && e.streams.Link(tg.Target).Slow()
}

// batchProgressAfter is how long a batch's send runs before its progress is
// reported, as the initial sync's is from the start.
const batchProgressAfter = time.Second

// batchExec is the executor of p's sends in tg: e.exec, reporting progress
// once a send of p takes more than batchProgressAfter.
func (e *Engine) batchExec(tg *target, p *planner.Plan) Executor {
	sent := p.Sent()
	if copiesBytes(sent) < batchCompressMin {
		return e.exec
	}
	return &progressExecutor{Executor: e.exec, clk: e.clk, start: e.clk.Now(), after: batchProgressAfter,
		report: func(p Progress) { e.rep.Report(p) },
		base:   Progress{Target: tg.Target, Files: len(sent), TotalBytes: copiesBytes(sent)}}
}
