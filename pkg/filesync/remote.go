package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// maxDeleteArgBytes bounds the paths (checks, deletes, rmdirs, chmods) in
// one exec. The command travels in the exec URL's query string, which
// proxies and apiservers limit, and percent-encoding can triple it; 32 KiB
// leaves room.
const maxDeleteArgBytes = 32 << 10

// scriptArgs is what applyScript gets for one plan, by step.
type scriptArgs struct {
	checks  []string // "p./dir", "k./dir", "w./dir", parents first
	deletes []string // "./name"
	rmdirs  []string // "./dir", deepest first
	chmods  []string // "555./dir", deepest first
	tar     bool     // extract the archive (after rmdirs, before chmods)
	gz      bool     // the archive is gzip-compressed
}

func (a *scriptArgs) empty() bool {
	return len(a.checks)+len(a.deletes)+len(a.rmdirs)+len(a.chmods) == 0 && !a.tar
}

// argv returns the exec's command line.
func (a *scriptArgs) argv(m *mapping) []string {
	mode, file := "d", ""
	switch {
	case a.tar && a.gz:
		mode = "z"
	case a.tar:
		mode = "x"
	}
	if m.file {
		file = "./" + m.remoteName("")
	}
	out := make([]string, 0, 10+len(a.checks)+len(a.rmdirs)+len(a.chmods)+len(a.deletes))
	out = append(out, "sh", "-c", applyScript, "livesync", string(m.remoteDir()), mode, file,
		strconv.Itoa(len(a.checks)), strconv.Itoa(len(a.rmdirs)), strconv.Itoa(len(a.chmods)))
	out = append(out, a.checks...)
	out = append(out, a.rmdirs...)
	out = append(out, a.chmods...)
	return append(out, a.deletes...)
}

// scriptArgsOf turns p into applyScript's arguments.
func scriptArgsOf(m *mapping, p *Plan) *scriptArgs {
	a := &scriptArgs{tar: len(p.Copies) > 0}
	for _, d := range p.Deletes {
		a.deletes = append(a.deletes, "./"+m.remoteName(d))
	}
	if m.file {
		// The one entry sits directly in the remote directory: no parents
		// below the root, which the user chose and which is followed.
		return a
	}
	for _, d := range p.Rmdirs {
		a.rmdirs = append(a.rmdirs, "./"+d)
	}
	deleted := make(map[string]bool, len(p.Deletes))
	for _, d := range p.Deletes {
		deleted[d] = true
	}
	// goneWith: rel is deleted with a parent before the tar runs. Checking
	// it first would look through a link that the delete removes.
	goneWith := func(rel string) bool {
		for r := rel; r != ""; r = parentRel(r) {
			if deleted[r] {
				return true
			}
		}
		return false
	}
	remoteOnly := make(map[string]bool, len(p.Rmdirs))
	for _, d := range p.Rmdirs {
		remoteOnly[d] = true
	}
	const (
		localDir      = 'p'
		remoteOnlyDir = 'k'
	)
	kind := map[string]byte{}
	mark := func(rel string, k byte) {
		if kind[rel] != localDir && !goneWith(rel) {
			kind[rel] = k
		}
	}
	modes := map[string]fs.FileMode{} // local modes of directories that are sent
	for _, c := range p.Copies {
		if c.Type == TypeDir {
			modes[c.Rel] = c.Mode
			mark(c.Rel, localDir)
		}
		for r := parentRel(c.Rel); r != "" && kind[r] != localDir; r = parentRel(r) {
			mark(r, localDir)
		}
	}
	for _, list := range [][]string{p.Deletes, p.Rmdirs} {
		for _, d := range list {
			for r := parentRel(d); r != ""; r = parentRel(r) {
				if remoteOnly[r] {
					mark(r, remoteOnlyDir)
				} else {
					mark(r, localDir)
				}
			}
		}
	}
	// Directories whose mode lacks u+rwx get it for the extraction, and
	// their own mode after it.
	fixed := map[string]fs.FileMode{}
	for rel, mode := range modes {
		if mode&0o700 != 0o700 {
			fixed[rel] = mode
		}
	}
	for rel, k := range kind {
		if _, ok := modes[rel]; ok || k != localDir {
			continue
		}
		if fi, err := os.Lstat(m.localPath(rel)); err == nil && fi.IsDir() && fi.Mode().Perm()&0o700 != 0o700 {
			fixed[rel] = fi.Mode().Perm()
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(kind)) {
		a.checks = append(a.checks, string(kind[rel])+"./"+rel)
		if _, ok := fixed[rel]; ok {
			a.checks = append(a.checks, "w./"+rel)
		}
	}
	rels := slices.Sorted(maps.Keys(fixed))
	slices.Reverse(rels) // a child sorts after its parent
	for _, rel := range rels {
		a.chmods = append(a.chmods, fmt.Sprintf("%o./%s", fixed[rel], rel))
	}
	return a
}

// split cuts a into execs of at most max bytes of paths each, keeping the
// order of the steps across them: checks, deletes, rmdirs, tar, chmods. A
// single longer path gets an exec of its own.
func (a *scriptArgs) split(max int) []*scriptArgs {
	var (
		out  []*scriptArgs
		cur  = &scriptArgs{}
		size int
	)
	add := func(list func(*scriptArgs) *[]string, p string) {
		if n := len(p) + 1; size+n > max && !cur.empty() {
			out = append(out, cur)
			cur, size = &scriptArgs{}, 0
		}
		l := list(cur)
		*l = append(*l, p)
		size += len(p) + 1
	}
	for _, p := range a.checks {
		add(func(a *scriptArgs) *[]string { return &a.checks }, p)
	}
	for _, p := range a.deletes {
		add(func(a *scriptArgs) *[]string { return &a.deletes }, p)
	}
	for _, p := range a.rmdirs {
		add(func(a *scriptArgs) *[]string { return &a.rmdirs }, p)
	}
	cur.tar, cur.gz = a.tar, a.gz
	for _, p := range a.chmods {
		add(func(a *scriptArgs) *[]string { return &a.chmods }, p)
	}
	if !cur.empty() || len(out) == 0 {
		out = append(out, cur)
	}
	return out
}

// applyResult is what one apply sent.
type applyResult struct {
	archiveResult
	deleted int
	// replaced holds directories (rels) where the container had a symlink,
	// now an empty directory: what the index holds under them is gone.
	replaced []string
}

// forgetReplaced makes idx forget what it holds under directories that
// apply found as symlinks and replaced, and returns them to be planned
// again, so their contents are sent again.
func (r applyResult) forgetReplaced(idx *Index) map[string]struct{} {
	if len(r.replaced) == 0 {
		return nil
	}
	out := make(map[string]struct{}, len(r.replaced))
	for _, rel := range r.replaced {
		idx.DeleteTree(rel)
		out[rel] = struct{}{}
	}
	return out
}

// apply makes one plan happen in one target: usually one exec carrying the
// paths in argv and the tar on stdin; paths beyond the argv budget go in
// exec calls of their own, before or after the one with the tar as their
// step requires. Every attempt streams a fresh archive, so it can be retried
// as a whole. With gz the archive goes gzip-compressed: only where the
// listing found gzip (see compressInitial).
func apply(ctx context.Context, ex Executor, t Target, m *mapping, p *Plan, o archiveOpts) (applyResult, error) {
	res := applyResult{deleted: len(p.Deletes)}
	args := scriptArgsOf(m, p)
	args.gz = o.gz && args.tar
	for _, a := range args.split(maxDeleteArgBytes) {
		stdout := &tailBuffer{max: 2 * maxDeleteArgBytes}
		if !a.tar {
			err := execScript(ctx, ex, t, "deleting files", m, a.argv(m), nil, stdout)
			res.replaced = append(res.replaced, replacedIn(stdout.String())...)
			if err != nil {
				return res, err
			}
			continue
		}
		r, wait := streamArchive(p.Copies, archiveOpts{gz: a.gz, owner: o.owner})
		err := execScript(ctx, ex, t, "copying files", m, a.argv(m), r, stdout)
		_ = r.Close()
		ares, aerr := wait()
		res.archiveResult = ares
		res.replaced = append(res.replaced, replacedIn(stdout.String())...)
		if aerr != nil && !errors.Is(aerr, io.ErrClosedPipe) {
			// A local read failure explains a remote one better than the
			// remote's view of a truncated stream.
			return res, aerr
		}
		// A closed pipe only means the remote side stopped reading, possibly
		// before the trailing end-of-archive blocks; its own result decides.
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// replacedIn parses the "R./dir\0" reports of applyScript into rels.
func replacedIn(out string) []string {
	var rels []string
	for tok := range strings.SplitSeq(out, "\x00") {
		if rel, ok := strings.CutPrefix(tok, "R./"); ok && validRel(rel) && rel != "" {
			rels = append(rels, rel)
		}
	}
	return rels
}

// execScript runs argv in t and classifies a failure.
func execScript(ctx context.Context, ex Executor, t Target, op string, m *mapping, argv []string, stdin io.Reader, stdout io.Writer) error {
	stderr := &tailBuffer{max: 4 << 10}
	err := classify(ex.Exec(ctx, t, argv, stdin, stdout, stderr), t, op, m.remoteDir(), stderr.String())
	var se *SyncError
	if errors.As(err, &se) && errors.Is(se.Kind, ErrTypeConflict) {
		c := remoteIsDir
		if strings.Contains(se.Stderr, markerNotDir) {
			c = remoteNotDir
		}
		ce := conflictError(m, fmt.Sprintf("container %q of pod %q", t.Container, t.Pod), c)
		ce.Target, ce.Op, ce.Stderr, ce.Err = t, op, se.Stderr, se.Err
		return ce
	}
	return err
}
