//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// --- trees by content hash, read in the container -----------------------------------------------

// hashScript prints every entry under $1 (nothing when $1 is missing) as NUL-terminated tokens:
//
//	F name... "" modes hashes   per chunk of regular files that find hands over: `stat -c %a`
//	                            lines and `sha256sum` lines, both in the order of the names
//	D name | L name target | O name   directories, symlinks, anything else
//
// Hashing in the container keeps the check's traffic to a few bytes per file, where streaming the
// tree out (remoteTree) would move the whole tree for every replica after every burst.
const hashScript = `cd "$1" 2>/dev/null || exit 0
find . ! -name . -type f -exec sh -c 'printf "F\0"; printf "%s\0" "$@"; printf "\0"; stat -c %a "$@"; printf "\0"; sha256sum "$@"; printf "\0"' sh {} +
find . ! -name . ! -type f -exec sh -c 'for p; do if [ -L "$p" ]; then printf "L\0%s\0" "$p"; readlink "$p"; printf "\0"; elif [ -d "$p" ]; then printf "D\0%s\0" "$p"; else printf "O\0%s\0" "$p"; fi; done' sh {} +
`

// remoteHashTree reads a directory in a container as localTree reads a local one, hashing the
// files in the container.
func remoteHashTree(ctx context.Context, ns, pod, container, root string) (tree, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "exec", pod, "-c", container, "--",
		"sh", "-c", hashScript, "sh", root)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("hashing %s in pod %s: %w: %s", root, pod, err, strings.TrimSpace(errb.String()))
	}
	tr, err := parseHashTree(out.String())
	if err != nil {
		return nil, fmt.Errorf("hashing %s in pod %s: %w", root, pod, err)
	}
	return tr, nil
}

var hexRE = regexp.MustCompile(`^[0-9a-f]{64}  `)

func parseHashTree(s string) (tree, error) {
	toks := strings.Split(s, "\x00")
	toks = toks[:len(toks)-1] // after the last NUL
	i := 0
	next := func() (string, error) {
		if i >= len(toks) {
			return "", errors.New("output ends early")
		}
		i++
		return toks[i-1], nil
	}
	rel := func(name string) string { return strings.TrimPrefix(name, "./") }
	tr := tree{}
	for i < len(toks) {
		kind, _ := next()
		name, err := next()
		if err != nil {
			return nil, err
		}
		switch kind {
		case "D":
			tr[rel(name)] = "d"
		case "O":
			tr[rel(name)] = "o"
		case "L":
			target, err := next()
			if err != nil {
				return nil, err
			}
			tr[rel(name)] = "l:" + strings.TrimSuffix(target, "\n")
		case "F":
			var names []string
			for ; name != ""; name, err = next() {
				if err != nil {
					return nil, err
				}
				names = append(names, name)
			}
			modes, err := next()
			if err != nil {
				return nil, err
			}
			hashes, err := next()
			if err != nil {
				return nil, err
			}
			ms := strings.Fields(modes)
			if len(ms) != len(names) {
				return nil, fmt.Errorf("%d modes for %d files (a file changed while hashed)", len(ms), len(names))
			}
			for j, n := range names {
				line := "  " + n + "\n"
				if !hexRE.MatchString(hashes) || !strings.HasPrefix(hashes[64:], line) {
					return nil, fmt.Errorf("no hash for %q (a file changed while hashed)", n)
				}
				mode, err := strconv.ParseUint(ms[j], 8, 32)
				if err != nil {
					return nil, fmt.Errorf("mode %q of %q: %w", ms[j], n, err)
				}
				tr[rel(n)] = fmt.Sprintf("f:%o:%s", mode&0o111, hashes[:16])
				hashes = hashes[64+len(line):]
			}
		default:
			return nil, fmt.Errorf("unexpected token %q", kind)
		}
	}
	return tr, nil
}

// mismatches counts the entries two trees disagree on.
func (tr tree) mismatches(other tree) int {
	n := 0
	for k, v := range tr {
		if other[k] != v {
			n++
		}
	}
	for k := range other {
		if _, ok := tr[k]; !ok {
			n++
		}
	}
	return n
}

// checkStats counts what the tree checks of a test compared.
type checkStats struct {
	trees, entries, files, mismatches int
}

// converge waits until exactly want running pods match sel, each running its container, and
// each one's tree under remote equals the local tree by content hash. It tolerates API and exec
// errors while it waits (a restarted apiserver, a container coming back) and returns the last
// difference when timeout passes. The stats count the successful comparison, and the mismatches
// seen last when it fails.
func converge(t *testing.T, ns, sel string, want int, local, remote string, timeout time.Duration, st *checkStats) error {
	t.Helper()
	lt := localTree(t, local)
	files := 0
	for _, v := range lt {
		if strings.HasPrefix(v, "f:") {
			files++
		}
	}
	last, lastMismatches := "nothing checked yet", 0
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := e.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			last = "listing pods: " + err.Error()
			return false, nil
		}
		var pods []string
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
				last = "pod " + p.Name + " not running"
				return false, nil
			}
			pods = append(pods, p.Name)
		}
		if len(pods) != want {
			last = fmt.Sprintf("%d running pods, want %d", len(pods), want)
			return false, nil
		}
		trees := make([]tree, len(pods))
		errs := make([]error, len(pods))
		var wg sync.WaitGroup
		for i, p := range pods {
			wg.Go(func() { trees[i], errs[i] = remoteHashTree(ctx, ns, p, "app", remote) })
		}
		wg.Wait()
		if ctx.Err() != nil {
			return false, nil // the timeout cut the check short: keep the last result
		}
		if err := errors.Join(errs...); err != nil {
			last = err.Error()
			return false, nil
		}
		var diffs []string
		n := 0
		for i, rt := range trees {
			if m := lt.mismatches(rt); m > 0 {
				n += m
				diffs = append(diffs, fmt.Sprintf("pod %s: %d mismatches:\n%s", pods[i], m, lt.diff(rt)))
			}
		}
		if n > 0 {
			last, lastMismatches = strings.Join(diffs, "\n"), n
			return false, nil
		}
		st.trees += want
		st.entries += want * len(lt)
		st.files += want * files
		return true, nil
	})
	if err != nil {
		st.mismatches += lastMismatches
		return fmt.Errorf("replicas did not converge within %s: %s", timeout, last)
	}
	return nil
}

// copyTree copies a local tree (files with their modes, directories, symlinks) into dst, which
// it creates.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.IsDir():
			return os.Mkdir(to, info.Mode().Perm())
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, b, info.Mode().Perm()); err != nil {
				return err
			}
			return os.Chmod(to, info.Mode().Perm()) // WriteFile's mode passes through the umask
		}
	})
}

// --- the local cluster's daemons -----------------------------------------------------------------

// localCluster is the cluster of hack/localcluster named by LIVESYNC_E2E_LOCALCLUSTER (its
// LIVESYNC_CLUSTER_DIR). The fault suite kills its daemons by the pids in pids/NAME and starts
// them again with hack/localcluster/restart.sh.
type localCluster struct {
	dir  string
	lock *os.File // the cluster lock, held from a kill until the restart
}

// localClusterFromEnv returns the local cluster, or nil and why the component faults can't run.
// It fails the test when LIVESYNC_E2E_LOCALCLUSTER is set and the daemons are not found there:
// hack/e2e.sh sets it on the local cluster, where those faults must never be skipped silently.
func localClusterFromEnv(t *testing.T) (*localCluster, string) {
	t.Helper()
	dir := os.Getenv("LIVESYNC_E2E_LOCALCLUSTER")
	if dir == "" {
		return nil, "LIVESYNC_E2E_LOCALCLUSTER is not set: the cluster is not hack/localcluster's, whose daemons this test may kill (hack/e2e.sh sets it on the local cluster)"
	}
	c := &localCluster{dir: dir}
	for _, n := range []string{"kubelet", "kube-apiserver"} {
		if _, err := c.pid(n); err != nil {
			t.Fatalf("LIVESYNC_E2E_LOCALCLUSTER=%s, but %v: is the local cluster up (hack/localcluster/up.sh)?", dir, err)
		}
	}
	return c, ""
}

// pid returns the pid of a running daemon of the cluster.
func (c *localCluster) pid(name string) (int, error) {
	f := filepath.Join(c.dir, "pids", name)
	b, err := os.ReadFile(f)
	if err != nil {
		return 0, fmt.Errorf("no pid file for %s: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("pid file %s: %w", f, err)
	}
	if !c.alive(pid) {
		return 0, fmt.Errorf("%s (pid %d in %s) is not running", name, pid, f)
	}
	return pid, nil
}

// alive says whether pid runs and is the cluster's: like lc_alive, it wants a file under the
// cluster dir on the command line, against reused pids and another cluster's dir beside it.
func (c *localCluster) alive(pid int) bool {
	if exited(pid) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(cmdline, []byte(filepath.Clean(c.dir)+"/"))
}

// nodeDaemon returns the name of node's daemon of a kind ("kubelet", "containerd"): pids/KIND
// for node 1, pids/KIND-N for node N. The nodes file up.sh writes has a line "N NAME IP" per node;
// a cluster without it (an older up.sh's) has one node, whose daemons have no number.
func (c *localCluster) nodeDaemon(kind, node string) (string, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, "nodes"))
	if errors.Is(err, os.ErrNotExist) {
		return kind, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the local cluster's nodes: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != node {
			continue
		}
		if f[0] == "1" {
			return kind, nil
		}
		return kind + "-" + f[0], nil
	}
	return "", fmt.Errorf("node %q is not in %s", node, filepath.Join(c.dir, "nodes"))
}

// exited says whether pid is gone or a zombie. A killed process loses its command line before it
// has closed its files: only then are its ports free for the restarted daemon.
func exited(pid int) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return true
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if state, ok := strings.CutPrefix(line, "State:"); ok {
			return strings.HasPrefix(strings.TrimSpace(state), "Z") || strings.HasPrefix(strings.TrimSpace(state), "X")
		}
	}
	return false
}

// lockCluster takes the cluster lock that up.sh and down.sh take, so that no up.sh (another
// test run's) finds the cluster unhealthy while a daemon is down and rebuilds it. It waits for
// a running up.sh (it holds the lock through a cold build, which takes minutes).
func (c *localCluster) lockCluster(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(c.dir+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("opening the cluster lock: %v", err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		_ = f.Close()
		t.Fatalf("taking the cluster lock %s.lock (held by a running up.sh or down.sh): %v", c.dir, err)
	}
	c.lock = f
	t.Cleanup(c.unlock)
}

func (c *localCluster) unlock() {
	if c.lock != nil {
		_ = c.lock.Close() // releases the flock
		c.lock = nil
	}
}

// restart runs hack/localcluster/restart.sh: it starts each named daemon that is not running and
// waits until all are healthy. The caller holds the lock.
func (c *localCluster) restart(names ...string) error {
	if c.lock == nil {
		return errors.New("restarting without the cluster lock")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack/localcluster/restart.sh"), names...)
	cmd.Env = append(os.Environ(), "LIVESYNC_CLUSTER_DIR="+c.dir, "LIVESYNC_CLUSTER_LOCK_HELD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/localcluster/restart.sh %s: %w:\n%s", strings.Join(names, " "), err, out)
	}
	return nil
}

// outage kills the daemon name with SIGKILL and registers its restart for the end of the test,
// should the test fail before it restarts the daemon itself. The caller holds the lock.
func (c *localCluster) outage(t *testing.T, name string, pid int) {
	t.Helper()
	t.Cleanup(func() {
		if _, err := c.pid(name); err == nil {
			return
		}
		if c.lock == nil {
			c.lockCluster(t)
		}
		if err := c.restart(name); err != nil {
			t.Errorf("restarting %s after the test: %v", name, err)
		}
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing %s (pid %d): %v", name, pid, err)
	}
	waitFor(t, fmt.Sprintf("%s (pid %d) to exit", name, pid), 30*time.Second, func() (bool, error) {
		return exited(pid), nil
	})
}

// --- inotify ---------------------------------------------------------------------------------------

const maxUserWatchesFile = "/proc/sys/fs/inotify/max_user_watches"

func readSysctl(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// inotifyWatches counts the inotify watches a process holds.
func inotifyWatches(pid int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, _ := os.ReadDir(dir)
	n := 0
	for _, fd := range fds {
		if l, _ := os.Readlink(filepath.Join(dir, fd.Name())); l != "anon_inode:inotify" {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		n += bytes.Count(b, []byte("inotify wd:"))
	}
	return n
}

// userInotifyWatches counts the inotify watches of every process of this user, which is what
// max_user_watches bounds.
func userInotifyWatches() int {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	uid := os.Getuid()
	n := 0
	for _, p := range procs {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(p)); err == nil {
			n += inotifyWatches(pid)
		}
	}
	return n
}

// --- the session's events ----------------------------------------------------------------------

// errorsSince returns the session's events from the i-th on that carry an error.
func errorsSince(s *sessiontest.Session, i int) []string {
	evs := s.Events()
	var out []string
	for _, ev := range evs[min(i, len(evs)):] {
		if ev.Error != "" {
			out = append(out, ev.Type+": "+ev.Error)
		}
	}
	return out
}

// --- the report --------------------------------------------------------------------------------------

// faultRecord is how one fault went.
type faultRecord struct {
	Name            string  `json:"name"`
	AfterOps        int     `json:"afterOps"`
	Skipped         string  `json:"skipped,omitempty"`
	Recovered       bool    `json:"recovered"`
	RecoverySeconds float64 `json:"recoverySeconds,omitempty"`
	SessionErrors   int     `json:"sessionErrors"`    // events with an error the session printed meanwhile
	Detail          string  `json:"detail,omitempty"` // what the fault saw, where it checks more than convergence
	Error           string  `json:"error,omitempty"`
}

// faultReport is _output/fault-recovery.json.
type faultReport struct {
	Seed           uint64         `json:"seed"`
	Ops            int            `json:"ops"`
	Bursts         int            `json:"bursts"`
	TreesChecked   int            `json:"treesChecked"`
	EntriesChecked int            `json:"entriesChecked"`
	FilesChecked   int            `json:"filesChecked"`
	Mismatches     int            `json:"mismatches"`
	Faults         []*faultRecord `json:"faults"`
}

func (r *faultReport) write(t *testing.T) {
	t.Helper()
	dir, err := filepath.Abs("../../_output")
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	var b []byte
	if err == nil {
		b, err = json.MarshalIndent(r, "", "  ")
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "fault-recovery.json"), append(b, '\n'), 0o644)
	}
	if err != nil {
		t.Errorf("writing _output/fault-recovery.json: %v", err)
		return
	}
	t.Logf("recovery times in %s", filepath.Join(dir, "fault-recovery.json"))
}

// sortedPods lists the running pods of sel by name.
func sortedPods(t *testing.T, ns, sel string) []corev1.Pod {
	t.Helper()
	pods := runningPods(t, ns, sel)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// --- the random tree ------------------------------------------------------------------------------

// Bounds of the random tree.
const (
	maxDepth = 5 // path components below the root, files included
	// maxBurstRemoves bounds the entries bursts take away from the container's view (deletes
	// and the old names of renames, a directory counting with all it holds) until the tree is
	// quiet (see beginBurst). A burst that would delete more than 50 files AND more than half the
	// tree is held by the mass-delete guard until the user allows it; staying at 50 keeps every
	// count under the first bound, whatever the tree. (The guard does not count a rename whose
	// new name its batch writes; one cut between two batches it may.)
	maxBurstRemoves = 50
	maxRemoveDir    = 20       // a larger directory is renamed, never removed: the tree grows
	maxTreeBytes    = 24 << 20 // above this, a "large" write is a small one: traffic stays moderate
	maxFileBytes    = 5 << 20
)

type entryKind byte

const (
	kindFile entryKind = iota
	kindDir
	kindLink
)

// fsGen makes seeded random changes to a local tree and keeps a model of it. Every pick goes
// through sorted lists of the model, never map order or a directory listing, so a seed replays
// the same operations. What it never does, and why:
//   - empty the root: a vanished or emptied root is held as a safety guard, never turned into
//     remote deletes; removing an entry of the root needs a sibling to stay;
//   - take more than maxBurstRemoves entries away in one burst (the mass-delete guard);
//   - create names that livesync always ignores (editor temp files, .git);
//   - create special files (FIFOs, sockets), which are skipped with a warning.
type fsGen struct {
	t       *testing.T
	rng     *rand.Rand
	root    string
	kinds   map[string]entryKind // slash-separated path below root → kind
	sizes   map[string]int64     // regular files only
	bytes   int64                // sum of sizes
	ops     int                  // operations done
	removed int                  // entries taken away in the current burst
	recent  []string             // the last operations, for failure messages
}

func newFSGen(t *testing.T, seed uint64, root string) *fsGen {
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return &fsGen{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), root: root,
		kinds: map[string]entryKind{}, sizes: map[string]int64{},
	}
}

// ops of the generator with their weights; each returns a description, or "" when it does not
// apply to the tree as it is (the generator then draws again).
func (g *fsGen) table() []struct {
	weight int
	op     func() string
} {
	return []struct {
		weight int
		op     func() string
	}{
		{30, g.createFile}, {22, g.modifyFile}, {5, g.atomicSave}, {3, g.chmod},
		{8, g.deleteFile}, {8, g.renameFile}, {10, g.mkdir}, {3, g.removeDir},
		{6, g.renameDir}, {5, g.symlink},
	}
}

// beginBurst starts a burst. The mass-delete guard counts together the deletes of batches less
// than 2 s apart (a remover cut into batches, whatever else they write), and bursts follow each
// other faster than that, so what a burst takes away is counted with the bursts before it until
// the tree has been quiet for longer: once they took half of maxBurstRemoves away, the next burst
// waits burstQuiet first, which keeps every count the guard makes under its first bound.
func (g *fsGen) beginBurst() {
	if g.removed <= maxBurstRemoves/2 {
		return
	}
	time.Sleep(burstQuiet)
	g.removed = 0
}

// burstQuiet is longer than the guard's 2 s between the batches of one delete burst: the suite
// waits it, after the tree converged, so that the next burst's deletes are counted on their own.
const burstQuiet = 2500 * time.Millisecond

// burst does n random operations as one burst.
func (g *fsGen) burst(n int) {
	g.beginBurst()
	for range n {
		g.step()
	}
}

// step does one random operation.
func (g *fsGen) step() {
	table := g.table()
	total := 0
	for _, e := range table {
		total += e.weight
	}
	for {
		r := g.rng.IntN(total)
		for _, e := range table {
			if r -= e.weight; r < 0 {
				if d := e.op(); d != "" {
					g.done(d)
					return
				}
				break
			}
		}
	}
}

// bootstrap fills an empty tree with n creations (files and directories).
func (g *fsGen) bootstrap(n int) {
	for g.ops < n {
		op := g.createFile
		if g.rng.IntN(4) == 0 {
			op = g.mkdir
		}
		if d := op(); d != "" {
			g.done(d)
		}
	}
}

func (g *fsGen) done(desc string) {
	g.ops++
	g.recent = append(g.recent, fmt.Sprintf("%d %s", g.ops, desc))
	if len(g.recent) > 40 {
		g.recent = g.recent[len(g.recent)-40:]
	}
}

// burstSize draws how many operations the next burst has, at most left: a third are single
// edits, most a handful, some a few dozen.
func (g *fsGen) burstSize(left int) int {
	var n int
	switch r := g.rng.IntN(100); {
	case r < 35:
		n = 1
	case r < 80:
		n = 2 + g.rng.IntN(14)
	default:
		n = 16 + g.rng.IntN(45)
	}
	return min(n, left)
}

// --- the model ------------------------------------------------------------------------------

func (g *fsGen) abs(rel string) string { return filepath.Join(g.root, filepath.FromSlash(rel)) }

func depth(rel string) int {
	if rel == "" {
		return 0
	}
	return strings.Count(rel, "/") + 1
}

func parentOf(rel string) string {
	if d := path.Dir(rel); d != "." {
		return d
	}
	return ""
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func within(rel, dir string) bool { return strings.HasPrefix(rel, dir+"/") }

// list returns the paths of the given kinds, sorted.
func (g *fsGen) list(kinds ...entryKind) []string {
	var out []string
	for rel, k := range g.kinds {
		if slices.Contains(kinds, k) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

func (g *fsGen) pick(rels []string) string { return rels[g.rng.IntN(len(rels))] }

// subtree returns what dir holds, sorted.
func (g *fsGen) subtree(dir string) []string {
	var out []string
	for rel := range g.kinds {
		if within(rel, dir) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

// height is how many levels dir holds below itself.
func (g *fsGen) height(dir string) int {
	h := 0
	for _, rel := range g.subtree(dir) {
		h = max(h, depth(rel)-depth(dir))
	}
	return h
}

// parents returns the directories (the root as "") that may get an entry reaching need levels
// below them.
func (g *fsGen) parents(need int) []string {
	out := []string{""}
	for _, d := range g.list(kindDir) {
		if depth(d)+need <= maxDepth {
			out = append(out, d)
		}
	}
	return out
}

// mayRemove says whether rel and what it holds may go in this burst: the burst's budget allows
// cost more entries, and the root keeps an entry.
func (g *fsGen) mayRemove(rel string, cost int) bool {
	if g.removed+cost > maxBurstRemoves {
		return false
	}
	if strings.Contains(rel, "/") {
		return true
	}
	top := 0
	for r := range g.kinds {
		if !strings.Contains(r, "/") {
			top++
		}
	}
	return top >= 2
}

var (
	nameWords = []string{"alpha", "beta", "gamma", "delta", "src", "lib", "docs", "img", "data", "cfg",
		"x", "y", "main", "util", "a b", "ünï", "node", "build", "k8s", "Readme"}
	nameExts = []string{"", "", ".txt", ".go", ".json", ".bin", ".md", ".sh"}
)

// newName returns a name that is free in dir, or "". Names come from a small pool, so a name
// deleted in a burst often comes back, maybe as the other kind.
func (g *fsGen) newName(dir string) string {
	for range 10 {
		n := g.pick(nameWords) + g.pick(nameExts)
		if g.rng.IntN(3) == 0 {
			n = fmt.Sprintf("%s-%d%s", g.pick(nameWords), g.rng.IntN(30), g.pick(nameExts))
		}
		if _, taken := g.kinds[join(dir, n)]; !taken {
			return n
		}
	}
	return ""
}

// size draws a file size from 0 B to 5 MB: mostly small, a few large.
func (g *fsGen) size() int {
	switch r := g.rng.IntN(100); {
	case r < 8:
		return 0
	case r < 75:
		return 1 + g.rng.IntN(4<<10)
	case r < 97 || g.bytes > maxTreeBytes:
		return 4<<10 + g.rng.IntN(252<<10)
	case r < 98:
		return maxFileBytes
	default:
		return 1<<20 + g.rng.IntN(maxFileBytes-1<<20)
	}
}

func (g *fsGen) content(n int) []byte {
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], g.rng.Uint64())
	}
	return b[:n]
}

func (g *fsGen) must(err error) {
	if err != nil {
		g.t.Helper()
		g.t.Fatalf("fault generator after %d operations: %v", g.ops, err)
	}
}

func (g *fsGen) setSize(rel string, n int64) {
	g.bytes += n - g.sizes[rel]
	g.sizes[rel] = n
}

// forget drops rel and what it holds from the model.
func (g *fsGen) forget(rel string) {
	for _, r := range append(g.subtree(rel), rel) {
		g.bytes -= g.sizes[r]
		delete(g.sizes, r)
		delete(g.kinds, r)
	}
}

// move renames rel and what it holds in the model.
func (g *fsGen) move(from, to string) {
	for _, r := range append(g.subtree(from), from) {
		nr := to + strings.TrimPrefix(r, from)
		g.kinds[nr] = g.kinds[r]
		if s, ok := g.sizes[r]; ok {
			g.sizes[nr] = s
			delete(g.sizes, r)
		}
		delete(g.kinds, r)
	}
}

// --- operations ------------------------------------------------------------------------------

func (g *fsGen) createFile() string { return g.createSized(g.size()) }

// createSized creates a file of n bytes in a random directory.
func (g *fsGen) createSized(n int) string {
	rel := g.newFile(n)
	if rel == "" {
		return ""
	}
	return fmt.Sprintf("create %q (%d B)", rel, n)
}

// newFile creates a file of n bytes in a random directory and returns its path, "" when no
// directory has room for a new name.
func (g *fsGen) newFile(n int) string {
	dir := g.pick(g.parents(1))
	name := g.newName(dir)
	if name == "" {
		return ""
	}
	rel := join(dir, name)
	mode := os.FileMode(0o644)
	if g.rng.IntN(10) == 0 {
		mode = 0o755
	}
	g.must(os.WriteFile(g.abs(rel), g.content(n), mode))
	g.kinds[rel] = kindFile
	g.setSize(rel, int64(n))
	return rel
}

func (g *fsGen) modifyFile() string {
	files := g.list(kindFile)
	if len(files) == 0 {
		return ""
	}
	rel := g.pick(files)
	switch r := g.rng.IntN(4); r {
	case 0: // same size, other bytes: size and a coarse mtime can't tell
		n := int(g.sizes[rel])
		g.must(os.WriteFile(g.abs(rel), g.content(n), 0))
		return fmt.Sprintf("rewrite %q (same %d B)", rel, n)
	case 1:
		f, err := os.OpenFile(g.abs(rel), os.O_WRONLY|os.O_APPEND, 0)
		g.must(err)
		n := 1 + g.rng.IntN(512)
		_, err = f.Write(g.content(n))
		g.must(err)
		g.must(f.Close())
		g.setSize(rel, g.sizes[rel]+int64(n))
		return fmt.Sprintf("append %d B to %q", n, rel)
	default:
		n := g.size()
		g.must(os.WriteFile(g.abs(rel), g.content(n), 0))
		g.setSize(rel, int64(n))
		return fmt.Sprintf("modify %q (%d B)", rel, n)
	}
}

// atomicSave writes a temporary file beside a file and renames it over the file, as editors do.
func (g *fsGen) atomicSave() string {
	files := g.list(kindFile)
	if len(files) == 0 || g.removed+1 > maxBurstRemoves {
		return ""
	}
	rel := g.pick(files)
	tmp := join(parentOf(rel), fmt.Sprintf(".%s.tmp%d", path.Base(rel), g.rng.IntN(1000)))
	n := g.size()
	fi, err := os.Stat(g.abs(rel))
	g.must(err)
	g.must(os.WriteFile(g.abs(tmp), g.content(n), fi.Mode().Perm()))
	g.must(os.Rename(g.abs(tmp), g.abs(rel)))
	g.removed++ // the temporary name, if a batch saw it
	g.setSize(rel, int64(n))
	return fmt.Sprintf("save %q via %q (%d B)", rel, path.Base(tmp), n)
}

func (g *fsGen) chmod() string {
	files := g.list(kindFile)
	if len(files) == 0 {
		return ""
	}
	rel := g.pick(files)
	fi, err := os.Stat(g.abs(rel))
	g.must(err)
	mode := fi.Mode().Perm() ^ 0o111
	g.must(os.Chmod(g.abs(rel), mode))
	return fmt.Sprintf("chmod %o %q", mode, rel)
}

func (g *fsGen) deleteFile() string {
	cands := g.list(kindFile, kindLink)
	if len(cands) == 0 {
		return ""
	}
	rel := g.pick(cands)
	if !g.mayRemove(rel, 1) {
		return ""
	}
	g.must(os.Remove(g.abs(rel)))
	g.removed++
	g.forget(rel)
	return fmt.Sprintf("delete %q", rel)
}

func (g *fsGen) renameFile() string {
	cands := g.list(kindFile, kindLink)
	if len(cands) == 0 {
		return ""
	}
	rel := g.pick(cands)
	dir := g.pick(g.parents(1))
	name := g.newName(dir)
	if name == "" || !g.mayRemove(rel, 1) {
		return ""
	}
	to := join(dir, name)
	g.must(os.Rename(g.abs(rel), g.abs(to)))
	g.removed++
	g.move(rel, to)
	return fmt.Sprintf("rename %q to %q", rel, to)
}

// mkdir creates a directory, sometimes with an empty directory inside.
func (g *fsGen) mkdir() string {
	dir := g.pick(g.parents(1))
	name := g.newName(dir)
	if name == "" {
		return ""
	}
	rel := join(dir, name)
	g.must(os.Mkdir(g.abs(rel), 0o755))
	g.kinds[rel] = kindDir
	if depth(rel) < maxDepth && g.rng.IntN(3) == 0 {
		if sub := g.newName(rel); sub != "" {
			g.must(os.Mkdir(g.abs(join(rel, sub)), 0o755))
			g.kinds[join(rel, sub)] = kindDir
			return fmt.Sprintf("mkdir -p %q", join(rel, sub))
		}
	}
	return fmt.Sprintf("mkdir %q", rel)
}

// dirWithFile creates a new directory holding one small file: what makes notify add a watch.
func (g *fsGen) dirWithFile() string {
	dir := g.pick(g.parents(2))
	name := g.newName(dir)
	if name == "" {
		return ""
	}
	rel := join(dir, name)
	g.must(os.Mkdir(g.abs(rel), 0o755))
	g.kinds[rel] = kindDir
	n := 1 + g.rng.IntN(1<<10)
	g.must(os.WriteFile(g.abs(rel+"/f.txt"), g.content(n), 0o644))
	g.kinds[rel+"/f.txt"] = kindFile
	g.setSize(rel+"/f.txt", int64(n))
	return fmt.Sprintf("mkdir %q with f.txt", rel)
}

func (g *fsGen) removeDir() string {
	dirs := g.list(kindDir)
	if len(dirs) == 0 {
		return ""
	}
	rel := g.pick(dirs)
	cost := 1 + len(g.subtree(rel))
	if cost > maxRemoveDir || !g.mayRemove(rel, cost) {
		return ""
	}
	g.must(os.RemoveAll(g.abs(rel)))
	g.removed += cost
	g.forget(rel)
	return fmt.Sprintf("rm -r %q (%d entries)", rel, cost)
}

func (g *fsGen) renameDir() string {
	dirs := g.list(kindDir)
	if len(dirs) == 0 {
		return ""
	}
	rel := g.pick(dirs)
	var dests []string
	for _, p := range g.parents(1 + g.height(rel)) {
		if p != rel && !within(p, rel) {
			dests = append(dests, p)
		}
	}
	dir := g.pick(dests) // the root always qualifies
	name := g.newName(dir)
	cost := 1 + len(g.subtree(rel))
	if name == "" || !g.mayRemove(rel, cost) {
		return ""
	}
	to := join(dir, name)
	g.must(os.Rename(g.abs(rel), g.abs(to)))
	g.removed += cost
	g.move(rel, to)
	return fmt.Sprintf("rename dir %q to %q (%d entries)", rel, to, cost)
}

// symlink creates a relative link to a file of the tree, or a dangling one: links travel as
// links, whatever they point to.
func (g *fsGen) symlink() string {
	dir := g.pick(g.parents(1))
	name := g.newName(dir)
	if name == "" {
		return ""
	}
	rel := join(dir, name)
	target := fmt.Sprintf("missing-%d", g.rng.IntN(100))
	if files := g.list(kindFile); len(files) > 0 && g.rng.IntN(4) != 0 {
		var err error
		target, err = filepath.Rel(g.abs(dir), g.abs(g.pick(files)))
		g.must(err)
	}
	g.must(os.Symlink(target, g.abs(rel)))
	g.kinds[rel] = kindLink
	return fmt.Sprintf("symlink %q -> %q", rel, target)
}
