package remote

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// MaxArgBytes bounds the paths (checks, deletes, rmdirs, chmods) in one
// exec. The command travels in the exec URL's query string, which proxies
// and apiservers limit, and percent-encoding can triple it; 32 KiB leaves
// room.
const MaxArgBytes = 32 << 10

// ApplyArgs is what apply.sh gets for one batch, by step; its header says
// what each step does. Paths are relative to Root, "./"-prefixed.
type ApplyArgs struct {
	Root string // the remote directory the script works in
	File string // "./name": the one entry to write in Root (a file's sync); "" for all of Root
	// Unswap are recoveries from a batch killed mid-way (see UnswapArgs):
	// before anything else, in the first exec.
	Unswap  []string
	Expect  []string    // preconditions (ExpectFile, ExpectAbsent): tested before anything else
	Checks  []string    // "p./dir", "k./dir", "w./dir", parents first
	Moves   [][2]string // what the container moves or copies itself (see MoveArgs), after the checks
	Patch   []string    // one file patched from stdin (see PatchArgs), after the moves; no tar then
	Deletes []string    // "./name"
	// Takes are files deleted only if they still hold what their
	// precondition says, checked as they go (see TakeArgs); with the
	// deletes, before the rmdirs.
	Takes  []string
	Rmdirs []string // "./dir", deepest first
	// Places are files the archive brings in beside their paths (see
	// StagedName), each put there after the tar only if the path still
	// holds what its precondition says (see PlaceArgs).
	Places []string
	Chmods []string // "555./dir", deepest first
	Tar    bool     // extract the archive (after rmdirs, before chmods)
	Gz     bool     // the archive (a patch: its bytes) is gzip-compressed
}

// Empty reports whether a has nothing to do.
func (a *ApplyArgs) Empty() bool {
	return len(a.Unswap)+len(a.Expect)+len(a.Checks)+len(a.Moves)+len(a.Patch)+len(a.Deletes)+len(a.Takes)+len(a.Rmdirs)+len(a.Places)+len(a.Chmods) == 0 && !a.Tar
}

// Argv returns the exec's command line.
func (a *ApplyArgs) Argv() []string {
	mode := "d"
	switch {
	case len(a.Patch) > 0 && a.Gz:
		mode = "q"
	case len(a.Patch) > 0:
		mode = "p"
	case a.Tar && a.Gz:
		mode = "z"
	case a.Tar:
		mode = "x"
	}
	out := make([]string, 0, 10+len(a.Unswap)+len(a.Expect)+len(a.Checks)+2*len(a.Moves)+len(a.Takes)+len(a.Rmdirs)+len(a.Places)+len(a.Chmods)+len(a.Deletes))
	out = append(out, "sh", "-c", applyScript, "livesync", a.Root, mode, a.File,
		strconv.Itoa(len(a.Unswap)+len(a.Expect)+len(a.Checks)+2*len(a.Moves)+len(a.Patch)), strconv.Itoa(len(a.Takes)+len(a.Rmdirs)), strconv.Itoa(len(a.Places)+len(a.Chmods)))
	out = append(out, a.Unswap...)
	out = append(out, a.Expect...)
	out = append(out, a.Checks...)
	for _, m := range a.Moves {
		out = append(out, m[0], m[1])
	}
	out = append(out, a.Patch...)
	out = append(out, a.Takes...)
	out = append(out, a.Rmdirs...)
	out = append(out, a.Places...)
	out = append(out, a.Chmods...)
	return append(out, a.Deletes...)
}

// Split cuts a into execs of at most max bytes of paths each, keeping the
// order of the steps across them: recoveries, preconditions, checks,
// deletes, rmdirs, tar, chmods. A single longer path gets an exec of its own. Preconditions
// go first, so every one of them is tested before the first exec changes
// anything.
func (a *ApplyArgs) Split(max int) []*ApplyArgs {
	var (
		out  []*ApplyArgs
		cur  = &ApplyArgs{Root: a.Root, File: a.File}
		size int
	)
	add := func(list func(*ApplyArgs) *[]string, p string) {
		if n := len(p) + 1; size+n > max && !cur.Empty() {
			out = append(out, cur)
			cur, size = &ApplyArgs{Root: a.Root, File: a.File}, 0
		}
		l := list(cur)
		*l = append(*l, p)
		size += len(p) + 1
	}
	for _, p := range a.Unswap {
		add(func(a *ApplyArgs) *[]string { return &a.Unswap }, p)
	}
	for _, p := range a.Expect {
		add(func(a *ApplyArgs) *[]string { return &a.Expect }, p)
	}
	for _, p := range a.Checks {
		add(func(a *ApplyArgs) *[]string { return &a.Checks }, p)
	}
	for _, m := range a.Moves {
		// Both halves in one exec, after the checks of their paths.
		if n := len(m[0]) + len(m[1]) + 2; size+n > max && !cur.Empty() {
			out = append(out, cur)
			cur, size = &ApplyArgs{Root: a.Root, File: a.File}, 0
		}
		cur.Moves = append(cur.Moves, m)
		size += len(m[0]) + len(m[1]) + 2
	}
	if len(a.Patch) > 0 {
		cur.Patch = a.Patch // whole, with its stdin (PatchArgs keeps it short)
	}
	for _, p := range a.Deletes {
		add(func(a *ApplyArgs) *[]string { return &a.Deletes }, p)
	}
	for _, p := range a.Takes {
		add(func(a *ApplyArgs) *[]string { return &a.Takes }, p)
	}
	for _, p := range a.Rmdirs {
		add(func(a *ApplyArgs) *[]string { return &a.Rmdirs }, p)
	}
	// The places go whole in the tar's exec, which alone brings what they
	// put (their caller keeps them short).
	if n := argBytes(a.Places); n > 0 && size+n > max && !cur.Empty() {
		out = append(out, cur)
		cur, size = &ApplyArgs{Root: a.Root, File: a.File}, 0
	}
	cur.Places, size = a.Places, size+argBytes(a.Places)
	cur.Tar, cur.Gz = a.Tar, a.Gz
	for _, p := range a.Chmods {
		add(func(a *ApplyArgs) *[]string { return &a.Chmods }, p)
	}
	if !cur.Empty() || len(out) == 0 {
		out = append(out, cur)
	}
	return out
}

// argBytes is what list adds to an exec's paths (see Split).
func argBytes(list []string) int {
	n := 0
	for _, p := range list {
		n += len(p) + 1
	}
	return n
}

// Apply runs one exec of a in t, with archive (nil without a.Tar) on its
// stdin, and returns the directories it found as symlinks and replaced with
// empty ones (apply.sh's "R./dir" reports, without "./"), whether or not it
// failed, and its failure classified under op; a precondition that failed
// (see ExpectFile) is a *ChangedError: before anything changed, or, with
// Applied, as a take or a place checked it again (see TakeArgs, PlaceArgs),
// the rest of a done.
func Apply(ctx context.Context, ex Executor, t Target, op string, a *ApplyArgs, archive io.Reader) (replaced []string, err error) {
	stdout := &TailBuffer{Max: 2 * MaxArgBytes}
	err = Run(ctx, ex, t, op, a.Root, a.Argv(), archive, stdout)
	replaced, changed := reportsIn(stdout.String())
	var ee ExitError
	if len(changed) > 0 && errors.As(err, &ee) {
		switch ee.ExitStatus() {
		case statusChanged:
			err = &ChangedError{Changed: changed, Err: err}
		case statusChangedLate:
			err = &ChangedError{Changed: changed, Err: err, Applied: true}
		}
	}
	return replaced, err
}

// statusChanged is apply.sh's exit status when a precondition failed.
const statusChanged = 5

// statusChangedLate is apply.sh's exit status when a take or a place found
// its path changed since the preconditions were tested, and left it as the
// container holds it; the rest of the batch is done.
const statusChangedLate = 8

// StagedName is the name, beside name ("./"-prefixed or a rel), that the
// archive gives a file placed after the tar (see PlaceArgs).
func StagedName(name string) string {
	dir, base := path.Split(name)
	return dir + ".livesync-new." + base
}

// CanStage reports whether name's StagedName fits in a directory entry,
// and the name apply.sh renames what is there aside to
// (".livesync-old.<name>.<pid>").
func CanStage(name string) bool {
	return len(".livesync-old.")+len(path.Base(name))+len(".4294967295") <= 255
}

// Guards reports whether check, a precondition (ExpectFile and the like),
// can guard a take or a place: a file's, not a directory's (ExpectAtMost).
func Guards(check string) bool {
	return check != "" && strings.ContainsRune("hao", rune(check[0]))
}

// PlaceArgs is apply.sh's place of the file the archive brought in beside
// the path check names (at StagedName): after the tar, what is at the path
// is renamed aside and checked against check, and the new file linked in,
// which fails where the container made anything at the path since. A path
// that changed is left as the container holds it, and reported.
func PlaceArgs(check string) string { return "S" + check }

// UnswapArgs is apply.sh's recovery of the path check, a precondition
// (ExpectFile and the like), names, from a batch that may have been killed
// as it placed or took the file there (see PlaceArgs, TakeArgs): what it
// renamed aside goes back where the path is missing, or where what it
// linked in replaced a save that fails check; its staged file goes.
func UnswapArgs(check string) string { return "U" + check }

// TakeArgs is apply.sh's delete of the file check names: renamed aside and
// checked against check first; one that changed goes back, unless the
// container made anything at the path since, and is reported.
func TakeArgs(check string) string { return "D" + check }

// statusMoveRefused is apply.sh's exit status when a move's source is not
// what the client confirmed there, or a move failed (see MoveArgs).
const statusMoveRefused = 6

// MoveArgs is apply.sh's move of the regular file src (its content's
// sha256 sum, as the client confirmed it there) to dst, both "./"-prefixed,
// with mode: renamed where keep is false (the batch deletes src), else
// copied.
func MoveArgs(src, dst string, sum [32]byte, keep bool, mode fs.FileMode) [2]string {
	k := "m"
	if keep {
		k = "c"
	}
	return [2]string{k + hex.EncodeToString(sum[:]) + src, fmt.Sprintf("t%o%s", mode.Perm(), dst)}
}

// statusPatchRefused is apply.sh's exit status when a patch's old file is
// not what the client confirmed, or the patched file is not the new one.
const statusPatchRefused = 7

// PatchArgs is apply.sh's patch of name ("./"-prefixed), the regular file
// whose sha256 is old, into the file whose sha256 is new, with mode: ops, in
// order, are "B<start>:<count>" (blocks of bs bytes of the old file) and
// "L<len>" (bytes of the patch's stdin).
func PatchArgs(name string, old, new [32]byte, mode fs.FileMode, bs int, ops []string) []string {
	out := make([]string, 0, len(ops)+2)
	out = append(out, fmt.Sprintf("P%x:%x:%o:%d%s", old, new, mode.Perm(), bs, name))
	out = append(out, ops...)
	return append(out, "E")
}

// IsPatchRefused reports whether err is an apply whose patch the container
// refused: the old file changed, stdin ended short, or what it built is not
// the new file. The old file is as it was.
func IsPatchRefused(err error) bool {
	var ee ExitError
	return errors.As(err, &ee) && ee.ExitStatus() == statusPatchRefused
}

// IsMoveRefused reports whether err is an apply whose moves the container
// refused (a source that changed or is reached through a symlink) or that
// failed (a destination in the way): what it moved holds the right content,
// and the batch is to be sent again without moves.
func IsMoveRefused(err error) bool {
	var ee ExitError
	return errors.As(err, &ee) && ee.ExitStatus() == statusMoveRefused
}

// ExpectFile is apply.sh's precondition that name ("./"-prefixed) in the
// container is still the regular file the client last confirmed there:
// with sum (sha256) where the container has sha256sum and sum is not nil,
// else by size and mtime (seconds), which tar keeps.
func ExpectFile(name string, sum *[32]byte, size, mtime int64) string {
	h := ""
	if sum != nil {
		h = hex.EncodeToString(sum[:])
	}
	return fmt.Sprintf("h%s:%d:%d%s", h, size, mtime, name)
}

// ExpectOneOf is apply.sh's precondition that the container holds one of
// sums at name ("./"-prefixed), a nil sum meaning nothing there: what a
// path may hold after plans the container never confirmed (see
// planner.Index.Maybe). Where the container has no sha256sum, a regular
// file passes (nothing else tells the contents apart).
func ExpectOneOf(name string, sums []*[32]byte) string {
	parts := make([]string, len(sums))
	for i, s := range sums {
		parts[i] = "-"
		if s != nil {
			parts[i] = hex.EncodeToString(s[:])
		}
	}
	return "o" + strings.Join(parts, ",") + name
}

// WidenExpect returns check, a precondition of ExpectFile with a sum,
// ExpectAbsent or ExpectOneOf, widened to pass where the container holds one
// of sums too (what tries of the same batch that the container never
// acknowledged carried there); any other check as it is. Where the container
// has no sha256sum, ExpectOneOf passes any regular file: widen only where it
// has one.
func WidenExpect(check string, sums []*[32]byte) string {
	at := strings.Index(check, "./")
	if at < 1 || len(sums) == 0 {
		return check
	}
	name, head := check[at:], check[:at]
	var have []*[32]byte
	switch head[0] {
	case 'a':
		have = []*[32]byte{nil}
	case 'h':
		h, _, _ := strings.Cut(head[1:], ":")
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 32 {
			return check // no sum: size and mtime only, which nothing widens
		}
		have = []*[32]byte{(*[32]byte)(b)}
	case 'o':
		for part := range strings.SplitSeq(head[1:], ",") {
			if part == "-" {
				have = append(have, nil)
				continue
			}
			b, err := hex.DecodeString(part)
			if err != nil || len(b) != 32 {
				return check
			}
			have = append(have, (*[32]byte)(b))
		}
	default:
		return check
	}
	for _, s := range sums {
		if !slices.ContainsFunc(have, func(h *[32]byte) bool { return h == s || h != nil && s != nil && *h == *s }) {
			have = append(have, s)
		}
	}
	return ExpectOneOf(name, have)
}

// ExpectAbsent is apply.sh's precondition that nothing is at name
// ("./"-prefixed) in the container.
func ExpectAbsent(name string) string { return "a" + name }

// ExpectAtMost is apply.sh's precondition that the directory name
// ("./"-prefixed) holds at most n entries at and under it in the container:
// the ones the client knows of, so that deleting it takes nothing else.
func ExpectAtMost(name string, n int) string { return fmt.Sprintf("n%d%s", n, name) }

// Changed is a precondition that failed: what the container holds at Name.
type Changed struct {
	Name string // "./"-prefixed
	// Now is its sha256 (hex), or "<size>:<mtime>" where the container
	// has no sha256sum or none was expected, "-" for nothing, "!" for
	// something else than a regular file, "+<n>" for a directory's entries.
	Now string
}

// Sum returns c.Now when it is a sha256, else "".
func (c Changed) Sum() string {
	if b, err := hex.DecodeString(c.Now); err == nil && len(b) == 32 {
		return c.Now
	}
	return ""
}

// ChangedError is an apply that changed nothing because paths it was to
// replace or delete are no longer what the client last confirmed there.
type ChangedError struct {
	Changed []Changed
	Err     error // the classified exit
	// Applied: the rest of the batch was done; Changed were found as the
	// batch was about to replace or delete them, and left as they are.
	Applied bool
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("%d paths changed in the container since they were last synced: %s", len(e.Changed), e.Changed[0].Name)
}

// Unwrap returns the classified exit, which is not transient.
func (e *ChangedError) Unwrap() error { return e.Err }

// IsChanged reports whether err is a precondition that failed before the
// batch changed anything (a *ChangedError, not Applied).
func IsChanged(err error) bool {
	var ce *ChangedError
	return errors.As(err, &ce) && !ce.Applied
}

// reportsIn parses apply.sh's stdout: the "R./dir\0" reports (directories
// replaced, without "./") and the "C<now>./name\0" ones (preconditions that
// failed).
func reportsIn(out string) (replaced []string, changed []Changed) {
	for tok := range strings.SplitSeq(out, "\x00") {
		if dir, ok := strings.CutPrefix(tok, "R./"); ok {
			replaced = append(replaced, dir)
		} else if c, ok := strings.CutPrefix(tok, "C"); ok {
			if now, name, ok := strings.Cut(c, "./"); ok {
				changed = append(changed, Changed{Name: "./" + name, Now: now})
			}
		}
	}
	return replaced, changed
}

// Run runs argv, one of this package's scripts working on the remote
// directory root, in t, and classifies a failure under op (see Classify).
func Run(ctx context.Context, ex Executor, t Target, op, root string, argv []string, stdin io.Reader, stdout io.Writer) error {
	stderr := &TailBuffer{Max: 4 << 10}
	return Classify(ex.Exec(ctx, t, argv, stdin, stdout, stderr), t, op, root, stderr.String())
}
