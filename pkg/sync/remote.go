package sync

import (
	"context"
	"errors"
	"io"
)

// applyScript is the whole remote side of a batch. Arguments:
//
//	$1     the remote directory (absolute), created if missing
//	$2     "x": extract the tar on stdin after deleting; "d": deletes only
//	$3...  paths to delete, each "./"-prefixed and relative to $1
//
// Paths travel as separate argv elements and are never parsed by a shell, so
// spaces, newlines, quotes and unicode are safe. Deletes run first so a type
// change (dir→file) extracts cleanly. `tar -o` (don't restore owner) means the
// same in GNU tar and busybox tar; mtimes are kept so an initial sync against
// an image without sha256sum/md5sum can still compare size+mtime. On failure
// the script adds the container user's uid to stderr for the error message,
// and a missing tar exits 127 with its own marker.
const applyScript = `set -e
fail() { s=$?; echo "livesync: $1 failed" >&2; echo "livesync: uid $(id -u 2>/dev/null || echo unknown)" >&2; exit $s; }
root=$1 mode=$2
shift 2
if [ "$mode" = x ] && ! command -v tar >/dev/null 2>&1; then echo "livesync: tar not found" >&2; exit 127; fi
mkdir -p "$root" || fail mkdir
cd "$root" || fail cd
[ $# -eq 0 ] || rm -rf -- "$@" || fail rm
[ "$mode" != x ] || tar -x -o -f - || fail tar
`

// maxDeleteArgBytes bounds the delete paths in one exec. The command travels
// in the exec URL's query string, which proxies and apiservers limit, and
// percent-encoding can triple it; 32 KiB leaves room.
const maxDeleteArgBytes = 32 << 10

func applyArgv(dir RemotePath, extract bool, deletes []string) []string {
	mode := "d"
	if extract {
		mode = "x"
	}
	return append([]string{"sh", "-c", applyScript, "livesync", string(dir), mode}, deletes...)
}

// chunkDeletes splits "./"-prefixed delete paths into groups of at most max
// argv bytes each (a single longer path gets a group of its own).
func chunkDeletes(paths []string, max int) [][]string {
	var (
		out  [][]string
		cur  []string
		size int
	)
	for _, p := range paths {
		if n := len(p) + 1; size+n > max && len(cur) > 0 {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, p)
		size += len(p) + 1
	}
	if len(cur) > 0 || len(out) == 0 {
		out = append(out, cur)
	}
	return out
}

// applyResult is what one apply sent.
type applyResult struct {
	archiveResult
	deleted int
}

// apply makes one plan happen in one target: usually one exec carrying the
// deletes in argv and the tar on stdin; extra deletes beyond the argv budget go
// first in exec calls of their own. Every attempt streams a fresh archive, so
// it can be retried as a whole.
func apply(ctx context.Context, ex Executor, t Target, m *mapping, p *Plan) (applyResult, error) {
	dir := m.remoteDir()
	deletes := make([]string, len(p.Deletes))
	for i, d := range p.Deletes {
		deletes[i] = "./" + m.remoteName(d)
	}
	chunks := chunkDeletes(deletes, maxDeleteArgBytes)
	last := chunks[len(chunks)-1]
	for _, c := range chunks[:len(chunks)-1] {
		if err := execScript(ctx, ex, t, "deleting files", dir, applyArgv(dir, false, c), nil); err != nil {
			return applyResult{}, err
		}
	}
	res := applyResult{deleted: len(p.Deletes)}
	if len(p.Copies) == 0 {
		return res, execScript(ctx, ex, t, "deleting files", dir, applyArgv(dir, false, last), nil)
	}
	r, wait := streamArchive(p.Copies)
	err := execScript(ctx, ex, t, "copying files", dir, applyArgv(dir, true, last), r)
	_ = r.Close()
	ares, aerr := wait()
	res.archiveResult = ares
	if aerr != nil && !errors.Is(aerr, io.ErrClosedPipe) {
		// A local read failure explains a remote one better than the
		// remote's view of a truncated stream.
		return res, aerr
	}
	// A closed pipe only means the remote side stopped reading, possibly
	// before the trailing end-of-archive blocks; its own result decides.
	return res, err
}

// execScript runs argv in t and classifies a failure.
func execScript(ctx context.Context, ex Executor, t Target, op string, dir RemotePath, argv []string, stdin io.Reader) error {
	stderr := &tailBuffer{max: 4 << 10}
	err := ex.Exec(ctx, t, argv, stdin, io.Discard, stderr)
	return classify(err, t, op, dir, stderr.String())
}
