//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// TestModel's operations beyond writes, deletes, renames and directory replaces, each a kind
// that LIVESYNC_MODEL_OPS switches on (a comma-separated list of modelOpKinds; "all", the
// default, or "none"), so that a violation can be pinned on one:
//
//   - large: files over the delta threshold (1 MiB, pkg/filesync/delta.go) on both sides, written
//     whole or changed in place, in the middle or at the end; a session on --transport exec
//     (a third of them) sends a changed one as a patch.
//   - copy: a file copied on either side (cp, or cp -p keeping its mtime); a large one copied
//     or renamed locally is copied or moved in the container by the session, not sent.
//   - freeze: the stream's loop in the container stopped (kill -STOP) past --exec-timeout while
//     a local save is in flight on it; the session sends it again on a new stream, a later save
//     follows, and then the old loop goes on (kill -CONT) with the frame it held.
//   - touchr: a local save that keeps the file's size and mtime (touch -r, cp -p, archives).
//   - otherkey: between two sessions of the model's key, one of another key on the same state
//     directory: without --sync-back (local operations only), or with another --exclude.
//   - slowrm: 80 files removed one at a time with small gaps, on either side (locally, with an
//     unrelated save among them).
var modelOpKinds = []string{"large", "copy", "freeze", "touchr", "otherkey", "slowrm"}

// modelKinds reads LIVESYNC_MODEL_OPS.
func modelKinds(t interface{ Fatalf(string, ...any) }) map[string]bool {
	on := map[string]bool{}
	switch v := strings.TrimSpace(os.Getenv("LIVESYNC_MODEL_OPS")); v {
	case "", "all":
		for _, k := range modelOpKinds {
			on[k] = true
		}
	case "none":
	default:
		for _, k := range strings.Split(v, ",") {
			k = strings.TrimSpace(k)
			if !slices.Contains(modelOpKinds, k) {
				t.Fatalf("LIVESYNC_MODEL_OPS=%q: %q is not one of %s (or all, none)", v, k, strings.Join(modelOpKinds, ","))
			}
			on[k] = true
		}
	}
	return on
}

func (m *model) kindsString() string {
	var on []string
	for _, k := range modelOpKinds {
		if m.kinds[k] {
			on = append(on, k)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}

// modelKey is which sync a session is: the model's, or another on the same tree and pod.
type modelKey int

const (
	keyMain    modelKey = iota // --sync-back lock.json --sync-back 'gen/**'
	keyOneWay                  // no --sync-back
	keyExclude                 // the model's, with an --exclude that matches none of its paths
)

func (k modelKey) String() string {
	return [...]string{"the model's key", "another key (no --sync-back)", "another key (another --exclude)"}[k]
}

// modelExecTimeout is the model's --exec-timeout when streams are frozen: short, so a frozen
// stream is given up on in a few seconds.
const modelExecTimeout = 3 * time.Second

func (m *model) sessionArgs(key modelKey) []string {
	args := []string{"deploy/web"}
	if key != keyOneWay {
		args = append(args, "--sync-back", "lock.json", "--sync-back", "gen/**")
		if m.deletes {
			args = append(args, "--sync-back-deletes")
		}
	}
	if key == keyExclude {
		args = append(args, "--exclude", "*.model-other")
	}
	if m.kinds["freeze"] {
		args = append(args, "--exec-timeout", modelExecTimeout.String())
	}
	if m.transport == "exec" {
		args = append(args, "--transport", "exec")
	}
	return args
}

// --- large files and copies ---------------------------------------------------------------------

// modelLarge is the size of a large file the model writes whole: over deltaMin (1 MiB).
const modelLarge = 1<<20 + 200<<10

// newLocalOp makes one of the new kinds' local operations at p, or returns false.
func (m *model) newLocalOp(p string) bool {
	switch x := m.rng.IntN(100); {
	case m.kinds["large"] && x < 15:
		m.localLarge(p, m.rng.IntN(2) == 0)
	case m.kinds["copy"] && x < 25:
		m.localCopy(p, m.anyPath(), m.rng.IntN(2) == 0)
	case m.kinds["touchr"] && x < 35:
		m.localTouchR(p, m.rng.IntN(2) == 0)
	default:
		return false
	}
	return true
}

// newRemoteOp makes one of the new kinds' container operations at p (listed), or returns false.
func (m *model) newRemoteOp(p string) bool {
	switch x := m.rng.IntN(100); {
	case m.kinds["large"] && x < 15:
		m.remoteLarge(p, m.rng.IntN(2) == 0)
	case m.kinds["copy"] && x < 25:
		m.remoteCopy(p, modelListed[m.rng.IntN(len(modelListed))], m.rng.IntN(2) == 0)
	default:
		return false
	}
	return true
}

func (m *model) anyPath() string {
	if m.rng.IntN(100) < 30 {
		return modelUnlisted[m.rng.IntN(len(modelUnlisted))]
	}
	return modelListed[m.rng.IntN(len(modelListed))]
}

// largeContent is a large file's content for the op-th operation: its header, then bytes
// drawn from the seed and the operation.
func (m *model) largeContent(p string) []byte {
	b := make([]byte, 0, modelLarge)
	b = append(b, m.content(p)...)
	r := rand.New(rand.NewPCG(m.seed, uint64(m.ops)))
	for len(b) < modelLarge {
		b = fmt.Appendf(b, "%016x", r.Uint64())
	}
	return b[:modelLarge]
}

// localWriteBytes writes c at p, in place or as editors do.
func (m *model) localWriteBytes(p string, c []byte, atomic bool) {
	m.must(os.MkdirAll(filepath.Dir(m.abs(p)), 0o755))
	if atomic {
		tmp := filepath.Join(m.stage, "save.tmp")
		m.must(os.WriteFile(tmp, c, 0o644))
		m.must(os.Rename(tmp, m.abs(p)))
		return
	}
	m.must(os.WriteFile(m.abs(p), c, 0o644))
}

// localLarge writes a large file at p: where one is there, changed in place, with bytes
// inserted, or appended to (what a patch carries); else whole.
func (m *model) localLarge(p string, atomic bool) {
	old, err := os.ReadFile(m.abs(p))
	how := "whole"
	var c []byte
	if hdr := []byte(m.content(p)); err == nil && len(old) >= modelLarge/2 {
		off := m.rng.IntN(len(old) - len(hdr))
		switch m.rng.IntN(3) {
		case 0:
			c, how = slices.Clone(old), fmt.Sprintf("changed at %d", off)
			copy(c[off:], hdr)
		case 1:
			c, how = slices.Concat(old[:off], hdr, old[off:]), fmt.Sprintf("inserted at %d", off)
		default:
			c, how = slices.Concat(old, hdr), "appended"
		}
	} else {
		c = m.largeContent(p)
	}
	m.localWriteBytes(p, c, atomic)
	m.record('L', p, sum16(c))
	m.logf("local large write %s %s (%d bytes, %s, atomic %v)", p, sum16(c), len(c), how, atomic)
}

// remoteLarge is localLarge in the container: dd over a block, or an append, where a large
// file is there; else whole, from /dev/urandom.
func (m *model) remoteLarge(p string, atomic bool) {
	hdr := m.content(p)
	how := strconv.Itoa(m.rng.IntN(3))
	off := strconv.Itoa(m.rng.IntN(modelLarge / 2))
	// A whole write is made in /.model-src first, and hashed there: what the container
	// wrote, whatever a batch's swap shows at the path for a moment after (the batch's
	// file, until its check puts the container's back). Hashed at the path, the model took
	// a batch's file for the container's write (seed 14281087224256243295 round 44).
	src := `{ printf %s "$2"; head -c ` + strconv.Itoa(modelLarge) + ` /dev/urandom; } > /.model-src || exit 1; `
	save := src + `cat /.model-src > "$1"`
	if atomic {
		save = src + `cp /.model-src /.model-save && mv -f /.model-save "$1"`
	}
	save += ` || exit 1; echo whole; sha256sum /.model-src; rm -f /.model-src; exit 0`
	r := m.sh(mkParent+`n=0; if [ -f "$1" ]; then n=$(wc -c < "$1") || exit 1; fi
if [ $((n + 0)) -ge `+strconv.Itoa(modelLarge/2)+` ]; then
	case $3 in
	0) printf %s "$2" | dd of="$1" bs=1 seek="$4" conv=notrunc 2>/dev/null || exit 1; echo "changed at $4" ;;
	*) printf %s "$2" >> "$1" || exit 1; echo appended ;;
	esac
else
	`+save+`
fi
`+hashAfterSwap, p, hdr, how, off)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || len(lines[1]) < 16 {
		m.t.Fatalf("container large write %s: %s", p, r)
	}
	m.record('C', p, lines[1][:16])
	m.logf("container large write %s %s (%s, atomic %v)", p, lines[1][:16], lines[0], atomic)
}

// localCopy copies from to to (cp, or cp -p: keepTime keeps from's mtime); a large one the
// session copies in the container.
func (m *model) localCopy(from, to string, keepTime bool) {
	if from == to {
		m.localWrite(from, true)
		return
	}
	c, err := os.ReadFile(m.abs(from))
	if errors.Is(err, fs.ErrNotExist) {
		m.logf("local copy %s -> %s: absent, nothing done", from, to)
		return
	}
	m.must(err)
	fi, err := os.Stat(m.abs(from))
	m.must(err)
	m.localWriteBytes(to, c, m.rng.IntN(2) == 0)
	if keepTime {
		m.must(os.Chtimes(m.abs(to), fi.ModTime(), fi.ModTime()))
	}
	m.record('L', to, sum16(c))
	m.logf("local copy %s -> %s (%s, %d bytes, keeping mtime %v)", from, to, sum16(c), len(c), keepTime)
}

// hashAfterSwap prints the sha256 of "$1", a file the container just wrote. A batch that
// replaces the path swaps it (apply.sh's swap): for as long as ln takes to start, nothing is
// there, and then the container's write again or the batch's file, whichever the check kept;
// so a read that finds nothing tries again (seed 17324401297069201770 round 200: a cp -p, then
// sha256sum: No such file or directory).
const hashAfterSwap = `for i in 1 2 3 4 5 6 7 8 9 10; do sha256sum "$1" 2>/dev/null && exit 0; [ ! -e "$1" ] || break; sleep 0.05 2>/dev/null || usleep 50000; done
sha256sum "$1"`

func (m *model) remoteCopy(from, to string, keepTime bool) {
	if from == to {
		m.remoteWrite(from, true)
		return
	}
	cp := "cp"
	if keepTime {
		cp = "cp -p"
	}
	// Copied through /.model-src, hashed there: what the container wrote, whatever a batch's
	// swap shows at the path for a moment after (seed 13898766368913822032 round 496: a
	// cp -p hashed as the local file a batch was checking in).
	r := m.sh(`[ -f "$1" ] || exit 3
set -- "$2" "$1"
`+mkParent+`rm -f /.model-src; e=$(`+cp+` "$2" /.model-src 2>&1) || { `+vanished+` }
`+cp+` /.model-src "$1" || exit 1; sha256sum /.model-src; rm -f /.model-src`, from, to)
	if r.code == 3 {
		m.logf("container copy %s -> %s: absent, nothing done", from, to)
		return
	}
	if len(r.stdout) < 16 {
		m.t.Fatalf("container copy %s -> %s: no sum: %s", from, to, r)
	}
	m.record('C', to, r.stdout[:16])
	m.logf("container %s %s -> %s (%s)", cp, from, to, r.stdout[:16])
}

// localTouchR saves p with new content of the same size and puts its old mtime back, as touch
// -r (or cp -p over it) does: only the inode (atomic) or ctime tell it changed.
func (m *model) localTouchR(p string, atomic bool) {
	fi, err := os.Stat(m.abs(p))
	if errors.Is(err, fs.ErrNotExist) {
		m.logf("local touch -r save %s: absent, nothing done", p)
		return
	}
	m.must(err)
	old, err := os.ReadFile(m.abs(p))
	m.must(err)
	hdr := []byte(m.content(p)) // "seed S op N ...": unique within its first bytes
	c := slices.Clone(old)
	if len(hdr) > len(c) {
		hdr = hdr[:len(c)]
	}
	copy(c, hdr)
	if bytes.Equal(c, old) {
		m.logf("local touch -r save %s: the same bytes, nothing done", p)
		return
	}
	m.localWriteBytes(p, c, atomic)
	m.must(os.Chtimes(m.abs(p), fi.ModTime(), fi.ModTime()))
	m.record('L', p, sum16(c))
	m.logf("local touch -r save %s %s (%d bytes, mtime %s kept, atomic %v)", p, sum16(c), len(c), fi.ModTime().UTC().Format("15:04:05.000000000"), atomic)
}

// --- a frozen stream -----------------------------------------------------------------------------

// freezeRound stops the stream's loop in the container (its processes, as cutStream finds
// them) and saves a file locally: its frame waits in the frozen loop. The session gives the
// stream up after --exec-timeout and sends the save again on a new one; once the container
// holds it, a second save of the same file goes, and only then the old loop goes on (kill
// -CONT) with the frame it held: it must not land over the second save.
func (m *model) freezeRound() {
	m.begin()
	if m.transport != "stream" {
		m.logf("freeze: the session runs on --transport exec, no stream; a plain round instead")
		m.runningRound(1+m.rng.IntN(3), false)
		return
	}
	m.freezes++
	r := m.sh(`for f in /proc/[0-9]*/cmdline; do
	case "$(cat "$f" 2>/dev/null)" in *livesync-stream) p=${f#/proc/}; p=${p%/cmdline}; kill -STOP "$p" 2>/dev/null && echo "$p" ;; esac
done`)
	pids := strings.Fields(r.stdout)
	m.logf("froze the stream: stopped processes %s", strings.Join(pids, " "))
	p := m.anyPath()
	wrote := func() string {
		done := m.beginOp()
		defer done()
		if m.kinds["large"] && m.rng.IntN(3) == 0 {
			m.localLarge(p, false)
		} else {
			m.localWrite(p, false)
		}
		return m.changes[p][len(m.changes[p])-1].sum
	}
	in := func(what, sum string) {
		m.waitFor(what, 2*time.Minute, func() bool {
			r := m.exec(context.Background(), "sh", "-c", `sha256sum "/app/$1" 2>/dev/null`, "sh", p)
			return r.code == 0 && strings.HasPrefix(r.stdout, sum)
		})
	}
	first := wrote()
	in("the save sent again on a new stream (the frozen one given up on)", first)
	m.logf("the container holds %s: sent again on a new stream", first)
	second := wrote()
	in("the second save in the container", second)
	m.sh(`for p; do kill -CONT "$p" 2>/dev/null; done; :`, pids...)
	m.logf("the frozen loop goes on (kill -CONT %s) with the frame of %s it held", strings.Join(pids, " "), first)
	m.check(running)
}

// --- another key --------------------------------------------------------------------------------

// otherKeyRound stops the model's session, runs one of another key on the same state directory
// (without --sync-back, with local operations only; or with another --exclude, as the model's
// with operations on both sides), stops it, makes operations on both sides while no session
// runs, and starts the model's key again: its saved ancestor is older than what the other
// session left, and must not decide as if it were not (docs/state.md).
func (m *model) otherKeyRound() {
	m.begin()
	m.stop()
	m.others++
	key := keyOneWay
	if m.rng.IntN(2) == 0 {
		key = keyExclude
	}
	m.start(key)
	if key == keyExclude {
		m.check(stopped) // its own start, from its own (older) saved state
		m.begin()
		for range 1 + m.rng.IntN(4) {
			m.randomOp(false)
		}
		m.check(running)
	} else {
		for range 1 + m.rng.IntN(4) {
			m.randomOp(true)
		}
		m.check(oneway)
	}
	m.begin()
	m.stop()
	for range 1 + m.rng.IntN(3) {
		m.randomOp(false)
	}
	m.start(keyMain)
	m.check(stopped)
}

// --- slow removers -------------------------------------------------------------------------------

// modelBulk is how many files a slow remover removes: over the guards' floor (50), and more
// than half of what the model's tree holds.
const modelBulk = 80

// isBulk reports whether p is under a slow remover's directory, which the model's rules leave to
// slowRemoverRound.
func isBulk(p string) bool {
	return strings.HasPrefix(p, "gen/bulk") || strings.HasPrefix(p, "src/bulk")
}

// slowRemoverRound makes modelBulk files locally (a round of their own, until both sides hold
// them), then removes them one at a time, 40 ms apart: locally (with an unrelated save every
// 20, as a dev server's log beside a build's rm -rf), or in the container (a listed directory).
// At the next quiescent point the remover's side holds none of them, the other side holds
// none that a guard did not report holding (without --sync-back-deletes, the container's
// deletes stay there: the local side holds them all), and a burst of over 50 deletes that is
// more than half of what the guard counts must have been held (docs/safety.md).
func (m *model) slowRemoverRound() {
	m.begin()
	m.slowrms++
	side := byte('L')
	if m.rng.IntN(2) == 0 {
		side = 'C'
	}
	dir := fmt.Sprintf("gen/bulk%d", m.slowrms)
	if side == 'L' && m.rng.IntN(2) == 0 {
		dir = fmt.Sprintf("src/bulk%d", m.slowrms)
	}
	var names []string
	made := map[string][]byte{}
	for i := range modelBulk {
		p := fmt.Sprintf("%s/%03d.txt", dir, i)
		names, made[p] = append(names, p), []byte(m.content(p))
		m.must(os.MkdirAll(filepath.Dir(m.abs(p)), 0o755))
		m.must(os.WriteFile(m.abs(p), made[p], 0o644))
	}
	m.logf("slow remover: made %d files under %s locally", modelBulk, dir)
	m.check(running)
	m.bulkMade(dir, names)

	m.begin()
	lt, err := readLocalTree(m.local)
	m.must(err)
	rt, err := m.hashTree(context.Background())
	m.must(err)
	from := m.pos()
	if side == 'L' {
		tick := time.NewTicker(40 * time.Millisecond) // the remover's own pace, not a wait for anything
		for i, p := range names {
			m.must(os.Remove(m.abs(p)))
			if i%20 == 10 {
				done := m.beginOp()
				m.localWrite("README.md", false)
				done()
			}
			<-tick.C
		}
		tick.Stop()
		m.must(os.Remove(m.abs(dir)))
	} else {
		m.sh(`for f; do rm -f "$f" || exit 1; sleep 0.04 2>/dev/null || usleep 40000 2>/dev/null || :; done`, names...)
	}
	m.ops++
	m.logf("slow remover: removed the %d files under %s, one at a time, %s", modelBulk, dir, map[byte]string{'L': "locally", 'C': "in the container"}[side])
	// Deletes the upload guard holds hold sync-back too (its passes wait for them: the index is
	// no ancestor meanwhile), so the quiescent point is the local marker's alone until the
	// files it holds are made again locally, as a user who answers no would: a local change
	// under them decides them again (docs/safety.md), and nothing is left to delete.
	m.quiesceLocal()
	uploadHeld := slices.ContainsFunc(m.events(from), func(ev sessiontest.Event) bool { return ev.Type == "held" })
	if !uploadHeld {
		m.quiesceRemote()
	}
	// What the guard on the way counts: entries in the container (uploads), listed local
	// entries (sync-back): files and directories, gen itself too (the product may not count
	// it: one more here is the lenient side). Counting files alone, 154 against the guard's
	// 161, the model wanted a hold for 80 deletes that the guard rightly let go (seed
	// 11097650013474087737 round 206).
	total := 0
	if side == 'L' {
		total = len(rt)
	} else {
		for p := range lt {
			if p == "lock.json" || p == "gen" || strings.HasPrefix(p, "gen/") {
				total++
			}
		}
	}
	m.bulkRemoved(side, dir, names, from, total)
	if uploadHeld {
		_, rt := m.bulkTrees()
		n := 0
		for _, p := range names {
			if rt[p] != "" {
				m.localWriteBytes(p, made[p], false)
				n++
			}
		}
		m.logf("slow remover: made the %d files the container still holds again locally, releasing the hold", n)
	}
	m.check(running)
	// The remover's user pauses before the next delete: a delete less than 2 s after the burst
	// counts with it (docs/safety.md), and one more delete after a burst that stopped just
	// under the line is held, by design (seed 2422517140238890368 round 139: 80 of 162, then
	// one more a second later). The model judges holds in this round only.
	time.Sleep(modelBurstGap)
}

// modelBurstGap is the pause after a slow remover's round: past the guards' 2 s burst window.
const modelBurstGap = 2500 * time.Millisecond

// bulkMade fails unless both sides hold names.
func (m *model) bulkMade(dir string, names []string) {
	m.t.Helper()
	lt, rt := m.bulkTrees()
	var missing []string
	for _, p := range names {
		if lt[p] == "" || rt[p] == "" {
			missing = append(missing, fmt.Sprintf("%s (local %s, container %s)", p, show(lt[p]), show(rt[p])))
		}
	}
	if len(missing) > 0 {
		m.violation(fmt.Sprintf("slow remover: made under %s locally, not on both sides at the quiescent point: %s", dir, strings.Join(missing, ", ")))
	}
}

func (m *model) bulkTrees() (tree, tree) {
	lt, err := readLocalTree(m.local)
	m.must(err)
	rt, err := m.hashTree(context.Background())
	m.must(err)
	return lt, rt
}

// bulkRemoved holds the outcome of a slow remover on side to the rules (see slowRemoverRound).
func (m *model) bulkRemoved(side byte, dir string, names []string, from evPos, total int) {
	m.t.Helper()
	lt, rt := m.bulkTrees()
	mine, other := lt, rt
	if side == 'C' {
		mine, other = rt, lt
	}
	held := slices.ContainsFunc(m.events(from), func(ev sessiontest.Event) bool {
		return ev.Type == "held" || ev.Type == "error" && strings.Contains(ev.Error+ev.Message, "held")
	})
	var back []string
	kept := 0
	for _, p := range names {
		if mine[p] != "" {
			back = append(back, p)
		}
		if other[p] != "" {
			kept++
		}
	}
	went := len(names) - kept
	m.logf("slow remover: %d of %d deletes reached the other side, %d stayed; a hold reported: %v (the guard counts %d)", went, len(names), kept, held, total)
	var why []string
	if len(back) > 0 {
		why = append(why, fmt.Sprintf("removed %s, back there: %s", map[byte]string{'L': "locally", 'C': "in the container"}[side], strings.Join(back, " ")))
	}
	switch {
	case side == 'C' && !m.deletes && kept != len(names):
		why = append(why, fmt.Sprintf("%d container deletes came home without --sync-back-deletes", went))
	case (side == 'L' || m.deletes) && kept > 0 && !held:
		why = append(why, fmt.Sprintf("%d deletes did not reach the other side, and no hold was reported", kept))
	case (side == 'L' || m.deletes) && went > 50 && 2*went > total && !held:
		why = append(why, fmt.Sprintf("GUARD: a burst of %d deletes, more than 50 and more than half of the %d entries the guard counts, went through with no hold", went, total))
	}
	if len(why) > 0 {
		m.violation("slow remover under " + dir + ": " + strings.Join(why, "; "))
	}
}

// violation records a violation of the rules outside check's (a slow remover's), as check does.
func (m *model) violation(msg string) {
	m.t.Helper()
	m.errs++
	m.logf("VIOLATION:\n  %s", msg)
	msg = fmt.Sprintf("round %d: %s\nlast events of the session:\n%s", m.round, msg, m.tail())
	if !m.keepGoing {
		m.t.Fatal(msg)
	}
	m.t.Error(msg)
}
