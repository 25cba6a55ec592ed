//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// The model-based two-way test: see TestModel.

var (
	modelSteps = flag.Int("model.steps", 0, "TestModel: operations to run (default 120, or LIVESYNC_MODEL_STEPS)")
	modelSeed  = flag.Uint64("model.seed", 0, "TestModel: the seed to replay (default the fixed seeds 4 and 99; LIVESYNC_MODEL_SEED=N or random)")
)

// defaultModelSteps bounds the run of `make test`: about 80 s of operations on the local
// cluster, under the 3 minutes it may take. 120 plain steps took 80 s (0.65 s a step,
// 2026-12-04); the operations of LIVESYNC_MODEL_OPS cost more a step (a second session, 80
// files removed one by one, a stream frozen past --exec-timeout): 80 steps took 120 s, so 60.
const defaultModelSteps = 60

// The paths the model writes, slash-separated under LOCAL (and /app). modelListed come back
// (--sync-back lock.json --sync-back 'gen/**'); modelUnlisted go one way, local -> container.
// No path is another's parent: every path is a file, never a directory.
var (
	modelListed   = []string{"lock.json", "gen/a.txt", "gen/b.txt", "gen/sub/c.txt", "gen/sub/d.txt", "gen/e/f.txt", "gen/e/g.txt"}
	modelUnlisted = []string{"README.md", "src/main.py", "src/util.py", "src/pkg/x.py", "src/pkg/y.py"}
	// modelDirs are the directories replaced whole: the container replaces only listed ones.
	modelDirs = []string{"gen/sub", "gen/e", "src/pkg"}
)

// The markers that make a quiescent point: the local one goes up (unlisted), the container's
// comes home (listed). Neither is a path of the model.
const (
	modelLocalMark  = ".model-mark"
	modelRemoteMark = "gen/.model-mark"
	// modelBarriers is the container directory of the model's second mapping (see quiesceLocal).
	modelBarriers = "/tmp/model-barriers"
)

// TestModel is a model-based two-way test of the real binary on the real cluster. From a seed it
// runs a random sequence of operations on both sides of one --sync-back session (deploy/web,
// one replica): on the local tree, writes (in place or temp + rename), deletes, renames and
// directory replaces on any path; in the container, through exec, the same on the listed paths.
// Among them: Ctrl-C of the session with operations on both sides while it is stopped, then a
// new session (the same state directory: it starts from what the last one saved); container
// restarts (kill 1, then pod replacements); cut streams (the stream's loop in the container
// killed). --sync-back-deletes and the image (busybox, or GNU tools with inotifywait) come from
// the seed. The kinds of operation LIVESYNC_MODEL_OPS lists (all by default; see modelOpKinds)
// join them: large files, copies, a stream frozen past its deadline, touch -r saves, sessions of
// another key between stops, and slow removers.
//
// After each round the test waits for a quiescent point (a marker file goes up and its
// container twin comes home, by the session's own sync and sync-back: every change of the
// round was seen by then) and reads both trees. Every path must then be one of what the
// documented rules allow (model.verdict, itself tested by TestModelVerdict): equal on both
// sides, or a reported conflict that holds both versions; no write lost. A failure prints the
// seed, the replay command and the log of operations (each with when it ran, to read against
// the events' times). LIVESYNC_MODEL_STEPS (or -model.steps) runs longer;
// LIVESYNC_MODEL_SEED (or -model.seed) replays a seed (the operations are the seed's; what the
// product does with them may vary with timing); LIVESYNC_MODEL_KEEP_GOING=1 reports every
// violation and goes on from what it found, instead of stopping at the first.
func TestModel(t *testing.T) {
	steps := *modelSteps
	if v := os.Getenv("LIVESYNC_MODEL_STEPS"); steps == 0 && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("LIVESYNC_MODEL_STEPS=%q: want a positive number of operations", v)
		}
		steps = n
	}
	if steps == 0 {
		steps = defaultModelSteps
	}
	// make test runs fixed seeds, so that a run is the same sequence every time (one on
	// busybox with --sync-back-deletes, one on GNU without); LIVESYNC_MODEL_SEED=random
	// draws one, a number replays it.
	seeds := []uint64{4, 99}
	if *modelSeed != 0 {
		seeds = []uint64{*modelSeed}
	} else if v := os.Getenv("LIVESYNC_MODEL_SEED"); v == "random" {
		seeds = []uint64{rand.Uint64()}
	} else if v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			t.Fatalf("LIVESYNC_MODEL_SEED=%q: want a number, or random", v)
		}
		seeds = []uint64{n}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { runModel(t, seed, steps) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	m := &model{t: t, seed: seed, steps: steps, rng: rand.New(rand.NewPCG(seed, 0x6d6f64656c)), state: map[string]pair{},
		keepGoing: os.Getenv("LIVESYNC_MODEL_KEEP_GOING") == "1", kinds: modelKinds(t)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("TestModel failed: seed %d, %d steps; replay: LIVESYNC_MODEL_SEED=%d LIVESYNC_MODEL_STEPS=%d LIVESYNC_MODEL_OPS=%s E2E_RUN=TestModel hack/e2e.sh\noperations:\n%s",
				m.seed, m.steps, m.seed, m.steps, m.kindsString(), strings.Join(m.log, "\n"))
		}
	})
	m.run()
}

// pair is what both sides hold at a path at a quiescent point: the first 16 hex digits of the
// file's sha256, "" when absent, or what else is there.
type pair struct{ L, R string }

func (p pair) String() string { return "local " + show(p.L) + ", container " + show(p.R) }

func show(v string) string {
	if v == "" {
		return "absent"
	}
	return v
}

// change is one write or delete the test made at a path: side 'L' or 'C', sum as in pair.
type change struct {
	side byte
	sum  string
	at   evPos // the events printed before it
	op   int
}

// evPos is a place in the events of the run's sessions.
type evPos struct{ session, event int }

type roundKind int

const (
	running    roundKind = iota // the session runs through the round
	stopped                     // no session ran while the operations were made
	restarted                   // the container restarted, no operation
	oneway                      // a session without --sync-back started and ran; local operations only
	firstStart                  // stopped, and the start had no usable ancestor (see verdict)
)

type model struct {
	t         *testing.T
	seed      uint64
	steps     int
	rng       *rand.Rand
	keepGoing bool

	deletes                     bool
	kind                        string
	kinds                       map[string]bool // the operation kinds LIVESYNC_MODEL_OPS switched on
	key                         modelKey        // the running (or last) session's
	transport                   string          // the running (or last) session's: stream or exec
	startFrom                   string          // the last start's ancestor event: saved, discarded or none
	freezes, others, slowrms    int
	ns, pod, local, stage       string
	barriers                    string // the local side of modelBarriers: see quiesceLocal
	stateDir                    string // every session's: each starts from what the last one saved
	agent                       *agent // runs the container's commands: see agentFor
	sessions                    []*sessiontest.Session
	printed                     []func() []sessiontest.Event // each session's events so far
	running                     bool
	state                       map[string]pair // at the last quiescent point
	changes                     map[string][]change
	at                          evPos     // the events before the operation that runs began
	began                       time.Time // when it began
	log                         []string
	round, ops, marks           int
	spent                       map[string]time.Duration // wall time by phase: see timed
	stops, restarts, cuts, errs int
}

// logf logs a line of the operation log, stamped with the time it was done (UTC, as the
// events' times are) and its round.
func (m *model) logf(format string, args ...any) {
	stamp := time.Now().UTC().Format("15:04:05.000")
	if !m.began.IsZero() {
		stamp = m.began.UTC().Format("15:04:05.000") + "-" + stamp[6:] // an operation: from its start to its end
	}
	m.log = append(m.log, stamp+fmt.Sprintf(" r%d ", m.round)+fmt.Sprintf(format, args...))
}

func (m *model) run() {
	t := m.t
	began := time.Now()
	m.spent = map[string]time.Duration{}
	m.deletes = m.rng.IntN(2) == 0
	m.kind = syncBackImages[m.rng.IntN(len(syncBackImages))]
	m.logf("seed %d: image %s, --sync-back-deletes %v, operations %s", m.seed, m.kind, m.deletes, m.kindsString())
	m.ns, m.pod = webOf(t, m.kind)
	dir := t.TempDir()
	m.local, m.stage, m.stateDir = filepath.Join(dir, "tree"), filepath.Join(dir, "stage"), filepath.Join(dir, "state")
	m.barriers = filepath.Join(dir, "barriers")
	for _, d := range []string{m.local, m.stage, m.stateDir, m.barriers} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// The initial tree, made before any session: a stopped round from nothing.
	m.begin()
	for _, p := range append(slices.Clone(modelListed[:4]), modelUnlisted[:3]...) {
		m.localWrite(p, false)
	}
	m.start(keyMain)
	m.check(stopped)

	// The special rounds come where the seed puts them, each at least once.
	total := m.steps
	stopAt, restartAt, cutAt := m.rng.IntN(total/3+1), total/3+m.rng.IntN(total/3+1), m.rng.IntN(total*2/3+1)
	otherAt, slowAt, freezeAt := m.rng.IntN(total*2/3+1), m.rng.IntN(total*2/3+1), m.rng.IntN(total*2/3+1)
	for m.ops < total {
		switch r := m.rng.IntN(100); {
		case m.restarts == 0 && m.ops >= restartAt, r < 4:
			m.restartContainer()
		case m.stops == 0 && m.ops >= stopAt, r < 16:
			m.stoppedRound(1 + m.rng.IntN(5))
		case m.kinds["otherkey"] && (m.others == 0 && m.ops >= otherAt || r < 20):
			m.otherKeyRound()
		case m.kinds["slowrm"] && (m.slowrms == 0 && m.ops >= slowAt || r < 22):
			m.slowRemoverRound()
		case m.kinds["freeze"] && m.transport == "stream" && (m.freezes == 0 && m.ops >= freezeAt || r < 26):
			m.freezeRound()
		default:
			cut := m.cuts == 0 && m.ops >= cutAt || m.rng.IntN(100) < 15
			m.runningRound(1+m.rng.IntN(5), cut)
		}
	}
	// One more quiescent point with no operation: nothing moves on its own.
	m.begin()
	m.check(running)
	m.stop()
	t.Logf("TestModel: seed %d, %d operations in %d rounds (%d stopped, %d container restarts, %d cut streams, %d other keys, %d slow removers, %d frozen streams), %d conflicts reported; sync-back-deletes %v, image %s",
		m.seed, m.ops, m.round, m.stops, m.restarts, m.cuts, m.others, m.slowrms, m.freezes, m.conflicts(), m.deletes, m.kind)
	wall := time.Since(began)
	t.Logf("TestModel: seed %d, %s in %d rounds, %.2f s a round: %s", m.seed, wall.Round(time.Second), m.round, wall.Seconds()/float64(m.round), m.spentString(wall))
	if m.errs > 0 {
		t.Fatalf("%d model violations (LIVESYNC_MODEL_KEEP_GOING=1 went on after each)", m.errs)
	}
}

// begin starts a round.
func (m *model) begin() {
	m.round++
	m.changes = map[string][]change{}
}

func (m *model) runningRound(n int, cut bool) {
	m.begin()
	cutBefore := -1
	if cut {
		cutBefore = m.rng.IntN(n + 1)
	}
	for i := range n {
		if i == cutBefore {
			m.cutStream()
		}
		m.randomOp(false)
	}
	if cutBefore == n {
		m.cutStream()
	}
	m.check(running)
}

// stoppedRound stops the session (Ctrl-C), makes n operations on both sides, and starts a new
// session.
func (m *model) stoppedRound(n int) {
	m.begin()
	m.stop()
	m.stops++
	for range n {
		m.randomOp(false)
	}
	m.start(keyMain)
	m.check(stopped)
}

// randomOp makes one operation, on the local side only when localOnly (no session brings the
// container's home).
func (m *model) randomOp(localOnly bool) {
	defer m.beginOp()()
	if localOnly || m.rng.IntN(100) < 55 {
		// Local: any path, listed more often (they are where both sides meet).
		p := m.listed()
		if m.rng.IntN(100) < 30 {
			p = modelUnlisted[m.rng.IntN(len(modelUnlisted))]
		}
		if m.newLocalOp(p) {
			return
		}
		switch r := m.rng.IntN(100); {
		case r < 50:
			m.localWrite(p, m.rng.IntN(2) == 0)
		case r < 70:
			m.localDelete(p)
		case r < 90:
			to := modelListed[m.rng.IntN(len(modelListed))]
			if m.rng.IntN(100) < 30 {
				to = modelUnlisted[m.rng.IntN(len(modelUnlisted))]
			}
			m.localRename(p, to)
		default:
			m.localReplaceDir(modelDirs[m.rng.IntN(len(modelDirs))])
		}
		return
	}
	p := m.listed()
	if m.newRemoteOp(p) {
		return
	}
	switch r := m.rng.IntN(100); {
	case r < 50:
		m.remoteWrite(p, m.rng.IntN(2) == 0)
	case r < 70:
		m.remoteDelete(p)
	case r < 90:
		m.remoteRename(p, modelListed[m.rng.IntN(len(modelListed))])
	default:
		m.remoteReplaceDir(modelDirs[m.rng.IntN(2)]) // gen/sub, gen/e: listed
	}
}

// beginOp counts an operation and marks where the events and the clock stand as it begins;
// the function it returns ends it.
func (m *model) beginOp() func() {
	m.ops++
	m.at, m.began = m.pos(), time.Now()
	return func() { m.began = time.Time{} }
}

// listed picks a listed path, one of the first two (lock.json, gen/a.txt) two times in five:
// both sides meet there often, in the same round.
func (m *model) listed() string {
	if m.rng.IntN(5) < 2 {
		return modelListed[m.rng.IntN(2)]
	}
	return modelListed[m.rng.IntN(len(modelListed))]
}

// --- operations --------------------------------------------------------------------------------

// content is what the op-th operation writes at p: unique in the run.
func (m *model) content(p string) string {
	return fmt.Sprintf("seed %d op %d round %d: %s\n", m.seed, m.ops, m.round, p)
}

func sum16(content []byte) string {
	s := sha256.Sum256(content)
	return hex.EncodeToString(s[:8])
}

// pos is where the events stand now: a change is seen by an event printed after its operation
// began (a pass may see a container write before its exec returns).
func (m *model) pos() evPos {
	if !m.running {
		return evPos{len(m.printed), 0}
	}
	return evPos{len(m.printed) - 1, len(m.printed[len(m.printed)-1]())}
}

func (m *model) record(side byte, p, sum string) {
	m.changes[p] = append(m.changes[p], change{side: side, sum: sum, at: m.at, op: m.ops})
}

func (m *model) abs(p string) string { return filepath.Join(m.local, filepath.FromSlash(p)) }

func (m *model) must(err error) {
	m.t.Helper()
	if err != nil {
		m.t.Fatal(err)
	}
}

// localWrite saves p, in place or as editors do (a temp file renamed over it).
func (m *model) localWrite(p string, atomic bool) {
	c := []byte(m.content(p))
	m.must(os.MkdirAll(filepath.Dir(m.abs(p)), 0o755))
	if atomic {
		tmp := filepath.Join(m.stage, "save.tmp")
		m.must(os.WriteFile(tmp, c, 0o644))
		m.must(os.Rename(tmp, m.abs(p)))
	} else {
		m.must(os.WriteFile(m.abs(p), c, 0o644))
	}
	m.record('L', p, sum16(c))
	m.logf("local write %s %s (atomic %v)", p, sum16(c), atomic)
}

func (m *model) localDelete(p string) {
	err := os.Remove(m.abs(p))
	if errors.Is(err, fs.ErrNotExist) {
		m.logf("local delete %s: absent, nothing done", p)
		return
	}
	m.must(err)
	m.record('L', p, "")
	m.logf("local delete %s", p)
}

// localRename moves from over to; what moved is read through the file it opened first, the
// same inode (nothing writes in place but this test).
func (m *model) localRename(from, to string) {
	if from == to {
		m.localWrite(from, true)
		return
	}
	f, err := os.Open(m.abs(from))
	if errors.Is(err, fs.ErrNotExist) {
		m.logf("local rename %s -> %s: absent, nothing done", from, to)
		return
	}
	m.must(err)
	defer f.Close()
	m.must(os.MkdirAll(filepath.Dir(m.abs(to)), 0o755))
	if err := os.Rename(m.abs(from), m.abs(to)); errors.Is(err, fs.ErrNotExist) {
		m.logf("local rename %s -> %s: gone meanwhile, nothing done", from, to)
		return
	} else {
		m.must(err)
	}
	var moved []byte
	fi, err1 := f.Stat()
	now, err2 := os.Lstat(m.abs(to))
	if err1 == nil && err2 == nil && os.SameFile(fi, now) {
		moved, err = io.ReadAll(f)
	} else {
		moved, err = os.ReadFile(m.abs(to))
	}
	m.must(err)
	m.record('L', from, "")
	m.record('L', to, sum16(moved))
	m.logf("local rename %s -> %s (%s)", from, to, sum16(moved))
}

// localReplaceDir replaces dir whole: the old one renamed away, a new one with one or two of
// the model's files renamed in. What it held when it went is what was deleted.
func (m *model) localReplaceDir(dir string) {
	newDir, oldDir := filepath.Join(m.stage, "new"), filepath.Join(m.stage, "old")
	m.must(os.RemoveAll(newDir))
	m.must(os.RemoveAll(oldDir))
	m.must(os.Mkdir(newDir, 0o755))
	written := map[string]string{}
	for _, p := range m.under(dir) {
		if len(written) == 0 || m.rng.IntN(2) == 0 {
			c := []byte(m.content(p))
			m.must(os.WriteFile(filepath.Join(newDir, path.Base(p)), c, 0o644))
			written[p] = sum16(c)
		}
	}
	had := m.renameAway(m.abs(dir), oldDir)
	m.must(os.MkdirAll(filepath.Dir(m.abs(dir)), 0o755))
	m.must(os.Rename(newDir, m.abs(dir)))
	m.must(os.RemoveAll(oldDir))
	m.recordReplace('L', dir, had, written)
}

// renameAway renames dir to old and returns the model's paths it held.
func (m *model) renameAway(dir, old string) map[string]bool {
	had := map[string]bool{}
	if err := os.Rename(dir, old); errors.Is(err, fs.ErrNotExist) {
		return had
	} else {
		m.must(err)
	}
	m.must(filepath.WalkDir(old, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(old, p)
		had[rel] = true
		return nil
	}))
	return had
}

// recordReplace records a directory replaced on one side: had (names in it) went, written came.
func (m *model) recordReplace(side byte, dir string, had map[string]bool, written map[string]string) {
	var desc []string
	for _, p := range m.under(dir) {
		switch s, ok := written[p]; {
		case ok:
			m.record(side, p, s)
			desc = append(desc, p+"="+s)
			delete(had, path.Base(p))
		case had[path.Base(p)]:
			m.record(side, p, "")
			desc = append(desc, p+" deleted")
			delete(had, path.Base(p))
		}
	}
	for name := range had {
		desc = append(desc, fmt.Sprintf("%s/%s deleted (STRAY: not a path of the model)", dir, name))
	}
	m.logf("%s replace dir %s: %s", sideName(side), dir, strings.Join(desc, ", "))
}

func sideName(side byte) string {
	if side == 'L' {
		return "local"
	}
	return "container"
}

func (m *model) under(dir string) []string {
	var out []string
	for _, p := range append(slices.Clone(modelListed), modelUnlisted...) {
		if strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

// sh runs a script in the container; exit 3 says "nothing there, nothing done".
func (m *model) sh(script string, args ...string) result {
	m.t.Helper()
	r := m.exec(context.Background(), append([]string{"sh", "-c", "cd /app || exit 1\n" + script, "sh"}, args...)...)
	if r.code != 0 && r.code != 3 {
		m.t.Fatalf("in the container: %s\n%s", script, r)
	}
	return r
}

// vanished ends a container operation whose source was there when it was tested and was gone
// when the tool opened it ($e: its error) with 3, "nothing there, nothing done". A batch that
// replaces a listed file renames it aside for as long as ln takes to start (see apply.sh's swap):
// a reader finds nothing there then, as it may while tar replaces a file.
const vanished = `case $e in *"No such file"*) exit 3 ;; esac; printf '%s\n' "$e" >&2; exit 1;`

// mkParent is the container's `mkdir -p "$(dirname "$1")"` with only the shell (GNU's image has
// no dirname).
const mkParent = `case "$1" in */*) mkdir -p "${1%/*}" ;; esac
`

func (m *model) remoteWrite(p string, atomic bool) {
	c := m.content(p)
	script := mkParent + `printf %s "$2" > "$1"`
	if atomic {
		script = mkParent + `printf %s "$2" > /.model-save && mv -f /.model-save "$1"`
	}
	m.sh(script, p, c)
	m.record('C', p, sum16([]byte(c)))
	m.logf("container write %s %s (atomic %v)", p, sum16([]byte(c)), atomic)
}

func (m *model) remoteDelete(p string) {
	if r := m.sh(`[ -f "$1" ] || exit 3; rm -f "$1"`, p); r.code == 3 {
		m.logf("container delete %s: absent, nothing done", p)
		return
	}
	m.record('C', p, "")
	m.logf("container delete %s", p)
}

func (m *model) remoteRename(from, to string) {
	if from == to {
		m.remoteWrite(from, true)
		return
	}
	// Hashed through a descriptor opened before the move: the file the container moved,
	// whatever a batch's swap shows at the path for a moment after.
	r := m.sh(`[ -f "$1" ] || exit 3
set -- "$2" "$1"
`+mkParent+`exec 3<"$2" || exit 3
e=$(mv -f "$2" "$1" 2>&1) || { `+vanished+` }
sha256sum <&3`, from, to)
	if r.code == 3 {
		m.logf("container rename %s -> %s: absent, nothing done", from, to)
		return
	}
	if len(r.stdout) < 16 {
		m.t.Fatalf("container rename %s -> %s: no sum: %s", from, to, r)
	}
	m.record('C', from, "")
	m.record('C', to, r.stdout[:16])
	m.logf("container rename %s -> %s (%s)", from, to, r.stdout[:16])
}

// remoteReplaceDir is localReplaceDir in the container: the new directory is made outside
// /app and renamed in; the names the old one held when it went are printed.
func (m *model) remoteReplaceDir(dir string) {
	written := map[string]string{}
	args := []string{dir}
	for _, p := range m.under(dir) {
		if len(written) == 0 || m.rng.IntN(2) == 0 {
			c := m.content(p)
			written[p] = sum16([]byte(c))
			args = append(args, path.Base(p), c)
		}
	}
	r := m.sh(`d=$1; shift
rm -rf /.model-new /.model-old && mkdir /.model-new || exit 1
while [ $# -gt 0 ]; do printf %s "$2" > "/.model-new/$1" || exit 1; shift 2; done
set -- "$d"
`+mkParent+`if [ -d "$d" ]; then mv "$d" /.model-old || exit 1; fi
mv /.model-new "$d" || exit 1
if [ -d /.model-old ]; then cd /.model-old && find . -type f && cd / && rm -rf /.model-old; fi`, args...)
	had := map[string]bool{}
	for _, l := range strings.Fields(r.stdout) {
		had[strings.TrimPrefix(l, "./")] = true
	}
	m.recordReplace('C', dir, had, written)
}

// cutStream kills the session's stream in the container (its loop and the loop's subshells,
// whose command line ends with livesync-stream): the batch or scan on it is cut short, and the
// session opens a new one.
func (m *model) cutStream() {
	m.cuts++
	r := m.sh(`n=0
for f in /proc/[0-9]*/cmdline; do
	case "$(cat "$f" 2>/dev/null)" in *livesync-stream) p=${f#/proc/}; kill -9 "${p%/cmdline}" 2>/dev/null && n=$((n+1)) ;; esac
done
echo "$n"`)
	m.logf("cut the stream: killed %s processes of its loop", strings.TrimSpace(r.stdout))
}

// restartContainer restarts the container at a quiescent point: the new one starts with the
// image's empty /app, gets the local tree by the session's initial sync of it, and sends nothing
// back. The first restart kills the container's process 1; later ones replace the pod (a
// container that exits again and again is held back by the kubelet, CrashLoopBackOff).
func (m *model) restartContainer() {
	m.begin()
	done := m.timed("container restarts")
	m.restarts++
	s := m.sessions[len(m.sessions)-1]
	syncs := s.Count("initial-sync")
	ctx := context.Background()
	if m.restarts == 1 {
		before := m.restartCount()
		kexec(m.t, m.ns, m.pod, "sh", "-c", "kill 1") // the exec may end with its container: its result says nothing
		m.dropAgent()                                 // it ended with its container
		m.logf("container restarted (kill 1)")
		waitFor(m.t, "the container to restart", 2*time.Minute, func() (bool, error) {
			p, err := e.client.CoreV1().Pods(m.ns).Get(ctx, m.pod, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st := p.Status.ContainerStatuses[0]
			return st.RestartCount > before && st.State.Running != nil, nil
		})
	} else {
		old := m.pod
		m.must(e.client.CoreV1().Pods(m.ns).Delete(ctx, old, metav1.DeleteOptions{}))
		m.dropAgent() // its pod goes
		waitFor(m.t, "the pod replaced", 2*time.Minute, func() (bool, error) {
			list, err := e.client.CoreV1().Pods(m.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil || len(list.Items) != 1 || list.Items[0].Name == old {
				return false, err
			}
			p := list.Items[0]
			m.pod = p.Name
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil, nil
		})
		m.logf("pod replaced: %s -> %s", old, m.pod)
	}
	s.WaitCount("initial-sync", syncs+1)
	done()
	m.check(restarted)
}

func (m *model) restartCount() int32 {
	p, err := e.client.CoreV1().Pods(m.ns).Get(context.Background(), m.pod, metav1.GetOptions{})
	m.must(err)
	return p.Status.ContainerStatuses[0].RestartCount
}

// start starts a session of key from the state directory every session shares, on a transport
// the seed draws (exec, whose link is not measured fast, sends large files as deltas; see
// TestSyncBigSaveDelta), and records the ancestor its start reports.
func (m *model) start(key modelKey) {
	defer m.timed("session starts and stops")()
	m.key, m.transport = key, "stream"
	if m.kinds["large"] && m.rng.IntN(3) == 0 {
		m.transport = "exec"
	}
	s := newSession(m.t, m.ns).StateDir(m.stateDir).Args(m.sessionArgs(key)...).Map(m.local, "/app").Map(m.barriers, modelBarriers).Start()
	m.sessions, m.printed = append(m.sessions, s), append(m.printed, s.Events)
	m.running = true
	s.WaitSynced()
	m.startFrom = ""
	for _, ev := range s.Events() {
		if ev.Type == "ancestor" {
			m.startFrom = ev.From
			break
		}
	}
	m.logf("session started: %s, transport %s, ancestor %s", key, m.transport, show(m.startFrom))
}

func (m *model) stop() {
	defer m.timed("session starts and stops")()
	if m.running {
		m.sessions[len(m.sessions)-1].Stop()
		m.running = false
		m.logf("session stopped (%s)", m.key)
	}
}

// --- quiescent points ---------------------------------------------------------------------------

// quiesce returns once a local marker written now is in the container and a container marker
// written after that is home, its pass over (its synced-back event printed), and then a second
// local marker is in the container: the session has sent every local change made before, a
// sync-back pass that started after every container change has run, and what that pass handed
// the uploads as it ended has gone up. A pass that finds a conflict's container side gone has
// the local file sent again (a modification wins over a deletion) after its synced-back event:
// read at once, the container lacked it, and the upload landed in the next round, which had
// not touched the path (TestModel seed 4, 300 steps, round 62, once the reads took
// milliseconds, not the second a kubectl exec took).
func (m *model) quiesce() {
	m.quiesceLocal()
	if m.key != keyOneWay { // else nothing comes home
		m.quiesceRemote()
		m.quiesceLocal()
	}
}

// quiesceLocal returns once a local marker written now is in the container, and every local
// change made before it has gone up or been held, or left as a conflict. The marker alone does
// not tell: while a batch is still open (changes keep coming), the session sends its copies
// ahead of it (a peek), and its deletes wait for it to close. So each call also replaces the
// one file of a second mapping (modelBarriers) by a new one: that delete goes with the batch,
// after every delete of the model's mapping in it and in the batches before it (TestModel seed
// 14463975535576635018 round 20 judged a local delete that was still to go). A mapping of its
// own, so that the mass-delete guard never holds it with a burst of the model's deletes.
func (m *model) quiesceLocal() {
	m.marks++
	n := strconv.Itoa(m.marks)
	old, err := os.ReadDir(m.barriers)
	if err != nil {
		m.t.Fatal(err)
	}
	write(m.t, filepath.Join(m.barriers, "b"+n), n)
	for _, e := range old {
		if err := os.Remove(filepath.Join(m.barriers, e.Name())); err != nil {
			m.t.Fatal(err)
		}
	}
	write(m.t, m.abs(modelLocalMark), n)
	m.waitFor("the local marker in the container", time.Minute, func() bool {
		r := m.exec(context.Background(), "cat", "/app/"+modelLocalMark)
		if r.code != 0 || r.stdout != n {
			return false
		}
		r = m.exec(context.Background(), "ls", "-A", modelBarriers)
		return r.code == 0 && strings.TrimSpace(r.stdout) == "b"+n
	})
}

// quiesceRemote returns once a container marker written now is home, its pass over.
func (m *model) quiesceRemote() {
	n := strconv.Itoa(m.marks)
	// The pass that brings it has ended when its synced-back event is printed.
	from := m.pos()
	m.sh(mkParent+`printf %s "$2" > "$1"`, modelRemoteMark, n)
	m.waitFor("the container marker's synced-back event", time.Minute, func() bool {
		b, _ := os.ReadFile(m.abs(modelRemoteMark))
		return string(b) == n && slices.ContainsFunc(m.events(from), func(ev sessiontest.Event) bool {
			return ev.Type == "synced-back" && slices.Contains(ev.Paths, m.abs(modelRemoteMark))
		})
	})
}

// waitFor is waitFor that fails with the session's last events. Its conditions are cheap (a
// command of the agent, a local read), so it polls often: a round waits for two of them.
func (m *model) waitFor(what string, timeout time.Duration, cond func() bool) {
	m.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		m.logf("NOT QUIESCENT: waiting for %s: %v", what, err)
		m.t.Fatalf("round %d: waiting for %s: %v\nlast events of the session:\n%s", m.round, what, err, m.tail())
	}
}

// check waits for a quiescent point and holds every path to the rules: polls until they hold
// (a download cut short waits for the next full scan, 30 s), or fails with what differs.
func (m *model) check(kind roundKind) {
	m.t.Helper()
	done := m.timed("quiescent points")
	m.quiesce()
	done()
	defer m.timed("reading both trees")()
	var last []string
	var cur map[string]pair
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		c, strays, err := m.observe(ctx)
		switch {
		case ctx.Err() != nil:
			return false, nil // the timeout cut the reading short: keep the last result
		case err != nil:
			last = []string{err.Error()}
			return false, nil
		}
		cur, last = c, strays
		for _, p := range append(slices.Clone(modelListed), modelUnlisted...) {
			if why := m.verdict(kind, p, cur[p]); why != "" {
				last = append(last, why)
			}
		}
		return len(last) == 0, nil
	})
	if err != nil {
		m.errs++
		msg := fmt.Sprintf("round %d (%s): the model's rules do not hold at the quiescent point:\n  %s\nlast events of the session:\n%s",
			m.round, [...]string{"running", "stopped", "container restarted", "one-way session", "first start"}[kind], strings.Join(last, "\n  "), m.tail())
		m.logf("VIOLATION:\n  %s", strings.Join(last, "\n  "))
		if !m.keepGoing || cur == nil {
			m.t.Fatal(msg)
		}
		m.t.Error(msg)
	}
	for _, p := range append(slices.Clone(modelListed), modelUnlisted...) {
		m.state[p] = cur[p]
	}
	var desc []string
	for _, p := range append(slices.Clone(modelListed), modelUnlisted...) {
		if v := cur[p]; v.L != "" || v.R != "" {
			if v.L == v.R {
				desc = append(desc, p+"="+v.L)
			} else {
				desc = append(desc, p+"=("+show(v.L)+" | "+show(v.R)+")")
			}
		}
	}
	m.logf("quiescent: %s", strings.Join(desc, " "))
}

func (m *model) tail() string {
	var lines []string
	for _, evs := range m.printed {
		for _, ev := range evs() {
			lines = append(lines, ev.Line)
		}
	}
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	return strings.Join(lines, "\n")
}

// observe reads both trees: the pair at every path of the model, and the files neither the model
// nor its markers made (strays).
func (m *model) observe(ctx context.Context) (map[string]pair, []string, error) {
	lt, err := readLocalTree(m.local)
	if err != nil {
		return nil, nil, err
	}
	rt, err := m.hashTree(ctx)
	if err != nil {
		return nil, nil, err
	}
	known := map[string]bool{modelLocalMark: true, modelRemoteMark: true}
	for p := range lt {
		known[p] = known[p] || isBulk(p) // the slow removers' files: see slowRemoverRound
	}
	for p := range rt {
		known[p] = known[p] || isBulk(p)
	}
	cur := map[string]pair{}
	for _, p := range append(slices.Clone(modelListed), modelUnlisted...) {
		known[p] = true
		cur[p] = pair{versionOf(lt[p]), versionOf(rt[p])}
	}
	var strays []string
	for side, tr := range map[string]tree{"local": lt, "container": rt} {
		for p, v := range tr {
			if v != "d" && !known[p] {
				strays = append(strays, fmt.Sprintf("%s: a %s file the model never made: %s", p, side, v))
			}
		}
	}
	sort.Strings(strays)
	return cur, strays, nil
}

// versionOf is a tree entry as a version: a file of mode 0644 (what both sides write) by its sum.
func versionOf(v string) string {
	switch {
	case v == "":
		return ""
	case strings.HasPrefix(v, "f:0:"):
		return strings.TrimPrefix(v, "f:0:")
	}
	return "(" + v + ")"
}

// readLocalTree is localTree returning its error: a test that polls goes on after one.
func readLocalTree(root string) (tree, error) {
	tr := tree{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case rel == ".":
		case d.IsDir():
			tr[filepath.ToSlash(rel)] = "d"
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			tr[filepath.ToSlash(rel)] = "l:" + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			tr[filepath.ToSlash(rel)] = fmt.Sprintf("f:%o:%s", info.Mode().Perm()&0o111, sum16(b))
		}
		return nil
	})
	return tr, err
}

// --- the rules ---------------------------------------------------------------------------------

// verdict holds the pair cur at path p after a round of kind to the documented rules, given
// the pair at the last quiescent point and the round's changes at p in the order they were
// made; "" when it holds, else why not.
//
// A running session (README, "Sync back"): the last write wins, made on either side (a local
// save is uploaded; a container change at a listed path is downloaded over a local file that
// has not changed since); or, when both sides changed, a conflict: each side holds its own last
// version and a conflict event names both sums. A container version that a later local write
// replaced must have been seen first (a synced-back event after it, or a conflict naming it):
// an upload never replaces a container change that no scan saw. A container delete comes home
// only with --sync-back-deletes, and never over a local change: the local file stays. Where
// one side's last change is a delete and the other's a modification, the modification may win
// on both sides (README: "a modification wins over a deletion").
//
// A stopped session (issue 31): what changed on one side while it was stopped is taken on the
// other at the start, a delete included (a container delete only with --sync-back-deletes);
// changed on both, a conflict, or where one side deleted, the other's modification on both;
// unchanged, it stays (a conflict may be settled the local side's way).
//
// A start without a usable ancestor (its ancestor event says none or discarded: another key ran
// since, the saved state failed; docs/state.md) is judged by the rules of a first start instead:
// the local side wins, a listed file that differs in the container may stay as a reported
// conflict, and what only the container holds stays there (listed, it comes home).
//
// A session without --sync-back (another key, between stops; only local operations while it
// runs) sends the local tree: every local file on both sides, and where the local side has
// none, the container keeps its own or loses it (a start from that key's saved ancestor
// deletes what the local side deleted since); the local side never changes.
//
// A restarted container starts empty and gets the local tree; nothing comes back from it.
func (m *model) verdict(kind roundKind, p string, cur pair) string {
	prev, chs := m.state[p], m.changes[p]
	lastL, lastR := prev.L, prev.R
	var lastC, last *change
	localChanged := false
	var sinceLocal []string // what the container wrote after the last local change
	for i := range chs {
		c := &chs[i]
		if c.side == 'L' {
			lastL, localChanged, sinceLocal = c.sum, true, nil
		} else {
			lastR, lastC = c.sum, c
			if c.sum != "" {
				sinceLocal = append(sinceLocal, c.sum)
			}
		}
		last = c
	}
	both := func(v string) pair { return pair{v, v} }
	conflict := func() bool {
		return lastL != lastR && cur == pair{lastL, lastR} && m.conflictReported(p, lastL, lastR, evPos{})
	}
	bad := func(want string) string {
		return fmt.Sprintf("%s: %s; was %s, changes %s; want %s", p, cur, prev, describe(chs), want)
	}
	switch {
	case kind == stopped && m.startFrom != "" && m.startFrom != "saved":
		kind = firstStart
	}
	switch kind {
	case firstStart:
		listed := slices.Contains(modelListed, p)
		switch {
		case lastL != "" && cur == both(lastL):
		case lastL != "" && listed && lastR != "" && conflict():
		case lastL == "" && lastR != "" && cur == pair{"", lastR} && !listed:
		case lastL == "" && lastR != "" && cur == both(lastR) && listed:
		case lastL == "" && lastR == "" && cur == pair{}:
		default:
			return bad(fmt.Sprintf("as a start without a usable ancestor (%s) leaves it: the local version on both sides (or, listed, a conflict that holds both), or where only the container has it, the container's (listed: on both sides)", m.startFrom))
		}
	case oneway:
		switch {
		case localChanged && lastL == "":
			// Deleted locally in the end: the container loses it, or, where the local
			// side's create and delete never reached it as changes (one batch saw the
			// path absent), keeps what it had, which the session never sent.
			if cur.L != "" || cur.R != "" && cur.R != prev.R {
				return bad("absent locally, and in the container nothing, or what it had before (a session without --sync-back never deletes what it did not send)")
			}
		case localChanged:
			if cur != both(lastL) {
				return bad("the local change on both sides (a session without --sync-back sends it)")
			}
		case prev.L != "":
			if cur != both(prev.L) {
				return bad("the local version on both sides (a session without --sync-back sends the local tree)")
			}
		case cur.L != "" || cur.R != prev.R && cur.R != "":
			return bad("absent locally, and in the container what it had, or nothing")
		}
	case restarted:
		if cur != both(prev.L) {
			return bad("the local version on both sides (a new container gets the local tree, and sends nothing back)")
		}
	case stopped:
		lc, rc := lastL != prev.L, lastR != prev.R
		split := diverged(prev)
		switch {
		case !lc && !rc:
			// Where the sides differed: the start may settle it the local side's way, or where
			// one side had deleted the file, the other's way (a modification wins over a deletion).
			if cur != prev && !(split && (cur == both(prev.L) || prev.L == "" && cur == both(prev.R))) {
				return bad("what it was (or, where the sides differed, the local version on both, or the one that is not a delete)")
			}
		case lc && !rc:
			switch {
			case cur == both(lastL):
			case split && conflict():
			case split && lastL == "" && cur == both(prev.R): // the container's modification wins over the deletion
			default:
				return bad("the local change on both sides (made while stopped, it goes up at the start)")
			}
		case !lc && rc:
			switch {
			case cur == both(lastR):
			case lastR == "" && (!m.deletes || m.deleteHeld(chs[len(chs)-1].at)) && (cur == pair{prev.L, ""} || cur == both(prev.L)):
			case split && conflict():
			case split && lastR == "" && cur == both(prev.L): // the local modification wins over the deletion
			default:
				return bad("the container's change on both sides (made while stopped, it comes home at the start)")
			}
		default:
			switch {
			case lastL == lastR && cur == both(lastL):
			case conflict():
			case lastR == "" && cur == both(lastL), lastL == "" && cur == both(lastR): // a modification wins over a deletion
			case split && prev.R == "" && lastR == prev.L && cur == both(lastL):
				// The container deleted it, the local side kept it (the ancestor's bytes), and
				// while stopped the container put those bytes back: by content, which is what
				// a start compares with the ancestor, the container did not change, and the
				// local change goes, as in a running session (seed 14973667863215865530
				// round 93: a rename of the file away and back).
			default:
				return bad("a conflict: changed on both sides while stopped, each keeps its own, and a conflict event names both (or, one side's a delete, the modification on both)")
			}
		}
	case running:
		if last == nil {
			if cur != prev {
				return bad("what it was: nothing changed it")
			}
			return ""
		}
		switch {
		case cur == both(last.sum):
			// A local save replaces a container change only once it was seen (synced back,
			// or named by a conflict), after a conflict too: the save after a conflict goes
			// checked against what the conflict showed. A container delete is replaced by a
			// later local write: a modification wins over a deletion.
			// A container write that left the bytes it held (a copy of the same content over
			// it) changed nothing a check compares: the save goes (seed 8259734817451128789
			// round 117: `cp b.txt a.txt` with a.txt's own bytes).
			if last.side == 'L' && lastC != nil && lastC.sum != last.sum && lastC.sum != "" && !m.seen(p, lastC) && lastC.sum != prev.R {
				return bad(fmt.Sprintf("the container's change of op %d seen (synced back, or named by a conflict) before the later local write replaced it", lastC.op))
			}
		case conflict():
		case last.side == 'C' && last.sum == "" && cur.R == "" && (cur.L == lastL || slices.Contains(sinceLocal, cur.L)) &&
			(!m.deletes || diverged(prev) && !localChanged || m.deleteHeld(last.at)):
			// A container delete that does not come home (no --sync-back-deletes, or over a
			// local change, or held by sync-back's guard with a burst); what the container
			// wrote before it may have come home first.
		case lastL == "" && lastR != "" && cur == both(lastR) && (lastC != nil || diverged(prev)),
			lastR == "" && lastL != "" && cur == both(lastL) && (localChanged || diverged(prev)):
			// A modification wins over a deletion.
		case last.side == 'L' && lastC != nil && lastL == prev.L && !diverged(prev) &&
			(cur == both(lastR) || lastR == "" && !m.deletes && cur == pair{prev.L, ""}):
			// The local writes left it holding the bytes it held (a copy of the same content
			// over it): by content the local side did not change, and the container's change
			// stands (a delete stays in the container without --sync-back-deletes).
		case last.side == 'L' && lastC == nil && lastL == prev.L && prev.R == "" && !m.deletes && cur == prev:
			// The same, a round later: a container delete that stayed there, then local writes
			// that left the file holding the bytes it held. Before, only the round of the
			// delete allowed it (seeds 11282773897188738247 r314, 2447579629889017635 r209).
		case last.side == 'C' && localChanged && lastR == prev.R && !diverged(prev) && cur == both(lastL):
			// The container's writes left it holding what it held (a file renamed or copied
			// back over the path with the same bytes): by content, which is what a check can
			// compare, the container did not change, and the local change goes.
		case last.side == 'C' && localChanged && lastR == prev.R && diverged(prev) && cur == both(lastL) &&
			m.conflictReported(p, prev.L, prev.R, evPos{}):
			// The same over a standing conflict: the container wrote back the bytes the
			// conflict showed as its own, and a local save after a conflict goes checked
			// against what the conflict showed (docs/safety.md) (seed 15033824717683729371
			// round 297: `cp -p` over the file of a copy of it).
		default:
			return bad(fmt.Sprintf("the last change (op %d, %s) on both sides, or a conflict that holds %s", last.op, sideName(last.side),
				pair{lastL, lastR}))
		}
	}
	return ""
}

func diverged(p pair) bool { return p.L != p.R }

func describe(chs []change) string {
	if len(chs) == 0 {
		return "none"
	}
	var out []string
	for _, c := range chs {
		out = append(out, fmt.Sprintf("op %d %s %s", c.op, sideName(c.side), show(c.sum)))
	}
	return strings.Join(out, ", ")
}

// events returns the run's events from pos on.
func (m *model) events(from evPos) []sessiontest.Event {
	var out []sessiontest.Event
	for i := from.session; i < len(m.printed); i++ {
		evs := m.printed[i]()
		if i == from.session {
			evs = evs[min(from.event, len(evs)):]
		}
		out = append(out, evs...)
	}
	return out
}

// conflictReported says whether a conflict event at p named the pair (local, remote) after from.
func (m *model) conflictReported(p, local, remote string, from evPos) bool {
	abs := m.abs(p)
	for _, ev := range m.events(from) {
		if ev.Type == "conflict" && ev.Path == abs && sumIs(ev.LocalSha256, local) && sumIs(ev.RemoteSha256, remote) {
			return true
		}
	}
	return false
}

// deleteHeld says whether sync-back's guard held container deletes after from: a burst of them
// that passed the line (docs/safety.md), and every delete less than 2 s after it, whatever its
// path. Held files that stay held are a burst again at the next start (seeds
// 7033101746421219979 rounds 511 and 521: the files a slow remover's burst left held were held
// again at a start, with a container delete just after it). The hold names no paths.
func (m *model) deleteHeld(from evPos) bool {
	return slices.ContainsFunc(m.events(from), func(ev sessiontest.Event) bool {
		return ev.Type == "error" && strings.HasPrefix(ev.Error, "held ") && strings.Contains(ev.Error, "deletes from the container")
	})
}

func sumIs(full, v string) bool {
	if v == "" {
		return full == ""
	}
	return strings.HasPrefix(full, v)
}

// seen says whether the container change c at p was seen after it was made: brought home by a
// synced-back event, or named by a conflict.
func (m *model) seen(p string, c *change) bool {
	abs := m.abs(p)
	for _, ev := range m.events(c.at) {
		switch {
		case ev.Type == "synced-back" && (c.sum != "" && slices.Contains(ev.Paths, abs) || c.sum == "" && slices.Contains(ev.Delete, abs)):
			return true
		case ev.Type == "conflict" && ev.Path == abs && sumIs(ev.RemoteSha256, c.sum):
			return true
		}
	}
	return false
}

func (m *model) conflicts() int {
	return len(slices.DeleteFunc(m.events(evPos{}), func(ev sessiontest.Event) bool { return ev.Type != "conflict" }))
}
