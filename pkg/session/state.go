package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// StateConfig is where a session keeps its saved ancestor (see pkg/syncstate
// and filesync.Start).
type StateConfig struct {
	// Dir is the state directory; "" keeps no state.
	Dir string
	// Forget deletes what is saved for this sync before starting (under
	// DryRun: says it would), so the start is one without saved state.
	Forget bool
}

// saveEvery bounds how often a session writes its state while it runs;
// the end of the session writes it once more.
const saveEvery = 2 * time.Second

// stateKey is what makes two sessions the same sync: the cluster (API
// server and its CA), the namespace and workload, the containers, each
// mapping's real local root and remote root, and what decides which paths
// are synced and come back (excludes, --gitignore, the root's ignore files'
// content, the sync-back globs). Any difference is another sync, which
// starts without saved state.
func stateKey(cfg Config, cluster string, w *workload.Workload, containers []string) syncstate.Key {
	sel := ""
	if w.Selector != nil {
		sel = w.Selector.String()
	}
	k := syncstate.Key{
		{Name: "cluster", Value: cluster},
		{Name: "namespace", Value: w.Namespace},
		{Name: "workload", Value: w.Ref()},
		{Name: "selector", Value: sel},
		{Name: "containers", Value: strings.Join(containers, ",")},
	}
	for i, m := range cfg.Sync.Mappings {
		local := string(m.Local)
		if real, err := filepath.EvalSymlinks(local); err == nil {
			local = real
		}
		k = append(k, syncstate.KeyPart{Name: fmt.Sprintf("mapping.%d", i), Value: local + "\x00" + string(m.Remote)})
		for _, name := range []string{".livesyncignore", ".gitignore"} {
			if name == ".gitignore" && !cfg.GitIgnore {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(local, name)); err == nil {
				s := sha256.Sum256(b)
				k = append(k, syncstate.KeyPart{Name: fmt.Sprintf("mapping.%d.%s", i, name), Value: hex.EncodeToString(s[:])})
			}
		}
	}
	k = append(k,
		syncstate.KeyPart{Name: "exclude", Value: strings.Join(cfg.Excludes, "\x00")},
		syncstate.KeyPart{Name: "gitignore", Value: fmt.Sprint(cfg.GitIgnore)},
		syncstate.KeyPart{Name: "sync-back", Value: strings.Join(cfg.SyncBack.Globs, "\x00")},
	)
	return k
}

// ClusterID names a cluster for the state key: its API server URL and a
// hash of the CA that authenticates it (or "insecure").
func ClusterID(host string, ca []byte, insecure bool) string {
	switch {
	case insecure:
		return host + " insecure"
	case len(ca) == 0:
		return host + " system-roots"
	}
	s := sha256.Sum256(ca)
	return host + " ca:" + hex.EncodeToString(s[:])
}

// keeper is the session's filesync.Ancestry over a syncstate.Store: it
// loads the saved ancestor once, hands each target the half its container
// incarnation saved, and saves the halves of the targets live in this
// session, at most every saveEvery and at the end.
type keeper struct {
	store  *syncstate.Store
	key    syncstate.Key
	client kubernetes.Interface
	clk    clock.Clock
	inc    func(filesync.Target) string
	warn   func(error)
	dryRun bool
	// lease is this key's claim on the containers it writes (see
	// syncstate.Lease); nil under --dry-run, which writes nothing.
	lease   *syncstate.Lease
	cluster string

	mu     sync.Mutex
	snap   *syncstate.Snapshot // what was loaded; nil: none
	why    string              // why there is none, when it was not usable
	live   map[string]string   // target+ID -> stamp
	halves map[string]syncstate.Half
	dirty  bool
	kick   chan struct{}
	loaded chan struct{}             // closed once snap is read; nil: nothing to read
	gone   map[string]syncstate.Half // removed targets' last halves, not saved
	// off: a session of an overlapping key wrote into this session's
	// containers while it ran; nothing more is saved or started from.
	off bool
	// conflicts are sync-back's standing conflicts, saved with each half
	// and made to stand again by a start from it; nil without sync-back.
	conflicts conflictKeeper
	targets   map[string]filesync.Target // live targets by targetKey
}

// conflictKeeper is what the keeper saves of sync-back's conflicts, and
// gives back at a start (syncback.Runner).
type conflictKeeper interface {
	Standing(t filesync.Target) []syncstate.Conflict
	Restore(t filesync.Target, cs []syncstate.Conflict)
}

// newKeeper loads the saved state for the session, forgetting it first
// when asked; nil when the session keeps no state.
func newKeeper(cfg Config, d Deps, w *workload.Workload, containers []string, inc func(filesync.Target) string) *keeper {
	k := newKeeperWith(cfg, d.Cluster, w, containers, inc, d.Reporter.Warn)
	if k != nil {
		k.client = d.Client
		if d.Clock != nil {
			k.clk = d.Clock
		}
	}
	return k
}

// newKeeperWith is newKeeper with the cluster's name, the incarnation
// reader and where warnings go; it reads no pod.
func newKeeperWith(cfg Config, cluster string, w *workload.Workload, containers []string, inc func(filesync.Target) string, warn func(error)) *keeper {
	if cfg.State.Dir == "" {
		return nil
	}
	k := &keeper{
		store: &syncstate.Store{Dir: cfg.State.Dir}, key: stateKey(cfg, cluster, w, containers), clk: clock.RealClock{},
		inc: inc, warn: warn, dryRun: cfg.Sync.DryRun, cluster: cluster,
		live: map[string]string{}, halves: map[string]syncstate.Half{}, gone: map[string]syncstate.Half{}, kick: make(chan struct{}, 1),
		targets: map[string]filesync.Target{},
	}
	for _, m := range cfg.Sync.Mappings {
		if inTree(string(m.Local), cfg.State.Dir) {
			k.warn(fmt.Errorf("the state directory %s is inside the synced tree %s: no state is kept (set XDG_STATE_HOME elsewhere)", cfg.State.Dir, m.Local))
			return nil
		}
	}
	switch {
	case cfg.State.Forget && cfg.Sync.DryRun:
		k.why = "--forget-state: the saved state would be forgotten (" + k.store.Path(k.key) + ")"
	case cfg.State.Forget:
		if err := k.store.Forget(k.key); err != nil {
			k.warn(err)
		}
		k.why = "--forget-state: the saved state was forgotten"
		k.acquire(cfg)
	case cfg.Sync.DryRun && !k.store.Claimed(k.key):
		k.why = "the saved state has no claim (saved by an older version, or a save failed): it would not be used"
	case !cfg.Sync.DryRun && !k.acquire(cfg):
		// Its history is unknown: not read.
	default:
		// Read while the watches are set up: only the first initial sync
		// needs it (see Start).
		k.loaded = make(chan struct{})
		go func() {
			defer close(k.loaded)
			snap, why := k.store.Load(k.key)
			if why != "" {
				k.warn(fmt.Errorf("%s", why))
			}
			k.mu.Lock()
			k.snap, k.why = snap, why
			k.mu.Unlock()
		}()
	}
	return k
}

// acquire claims the key for this session (syncstate.Store.Acquire); false
// when the saved state must not be read: it had no claim and could not be
// removed, or no claim could be written.
func (k *keeper) acquire(cfg Config) bool {
	roots := make([]string, 0, len(cfg.Sync.Mappings))
	for _, m := range cfg.Sync.Mappings {
		roots = append(roots, string(m.Remote))
	}
	l, err := k.store.Acquire(k.key, roots)
	if l == nil {
		// Without a claim other keys' sessions could not tell this one's
		// state stale: keep none.
		k.warn(fmt.Errorf("%w: no state is kept for this session", err))
		k.off, k.why = true, "the saved state could not be claimed"
		return false
	}
	k.lease = l
	if err != nil {
		k.warn(fmt.Errorf("%w: it is not used; delete it or start with --forget-state", err))
		k.why = "the saved state has no claim and could not be removed"
		return false
	}
	return true
}

// place names a container for claims: the cluster and the pod's
// container, whatever its incarnation (a container ID alone would miss the
// target whose ID is not known yet).
func (k *keeper) place(t filesync.Target) string { return k.cluster + " " + t.String() }

// drop gives the saved state up for the rest of the session: a session of
// an overlapping key took the claim, so what this one would save is older
// than what the other wrote, and the other's misses what this one wrote.
func (k *keeper) drop() {
	k.mu.Lock()
	if k.off {
		k.mu.Unlock()
		return
	}
	k.off, k.snap, k.why = true, nil, "another sync wrote into these containers while this session ran: the saved state was dropped"
	clear(k.halves)
	clear(k.gone)
	k.mu.Unlock()
	err := k.lease.Yield()
	k.warn(errors.Join(errors.New("another session wrote into the same containers while this one ran (other options or roots over them, or this sync started again): neither's saved state is kept, the next start of each is one without saved state"), err))
}

// held reports whether the session may still save and start from saved
// state, dropping it when another session took the claim.
func (k *keeper) held() bool {
	k.mu.Lock()
	off := k.off
	k.mu.Unlock()
	if off {
		return false
	}
	if k.lease != nil && !k.lease.Held() {
		k.drop()
		return false
	}
	return true
}

// inTree reports whether dir is root or under it, as written or with
// its symlinks resolved (as far as it exists).
func inTree(root, dir string) bool {
	dir, _ = filepath.Abs(dir)
	if _, ok := localtree.RelTo(root, dir); ok {
		return true
	}
	for d := dir; ; d = filepath.Dir(d) {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			rest, _ := filepath.Rel(d, dir)
			_, ok := localtree.RelTo(root, filepath.Join(real, rest))
			return ok
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

func targetKey(t filesync.Target) string { return t.String() + "@" + t.ContainerID }

// stamp is a container incarnation as saved: the container ID and the
// mount namespace; "" when the namespace could not be read (never matched,
// never saved).
func stamp(t filesync.Target, ns string) string {
	if ns == "" || t.ContainerID == "" {
		return ""
	}
	return t.ContainerID + " " + ns
}

// add records t's incarnation, read before the engine hears of t, and
// enters t in the claim before anything is sent to it: the saved state of
// other keys writing there under overlapping roots is removed.
func (k *keeper) add(t filesync.Target) {
	if k.lease != nil {
		if err := k.lease.Enter(k.place(t)); err != nil {
			k.warn(fmt.Errorf("%w: a later start of another sync over %s may use an older ancestor", err, t))
		}
	}
	s := stamp(t, k.inc(t))
	k.mu.Lock()
	k.live[targetKey(t)] = s
	k.targets[targetKey(t)] = t
	k.mu.Unlock()
}

// remove forgets t: its half is no longer saved.
func (k *keeper) remove(t filesync.Target) {
	k.mu.Lock()
	delete(k.live, targetKey(t))
	delete(k.targets, targetKey(t))
	if h, ok := k.halves[targetKey(t)]; ok {
		delete(k.halves, targetKey(t))
		k.dirty = true
		k.gone[targetKey(t)] = h // if the same container comes back in this session
	}
	k.mu.Unlock()
}

// Start returns what t starts from (filesync.Ancestry).
func (k *keeper) Start(t filesync.Target) filesync.Start {
	if k.loaded != nil {
		<-k.loaded
	}
	k.mu.Lock()
	s, snap, why := k.live[targetKey(t)], k.snap, k.why
	// What this session confirmed last for the same container is newer
	// than what the session started from.
	recent := &syncstate.Snapshot{}
	for _, h := range []syncstate.Half{k.gone[targetKey(t)], k.halves[targetKey(t)]} {
		if h.Stamp != "" {
			recent.Halves = append(recent.Halves, h)
		}
	}
	k.mu.Unlock()
	st := filesync.Start{From: filesync.StartNone}
	h, ok := recent.Half(s)
	if !ok {
		h, ok = snap.Half(s)
	}
	if ok && !k.held() {
		k.mu.Lock()
		ok, snap, why = false, nil, k.why
		k.mu.Unlock()
	}
	if ok {
		if k.conflicts != nil {
			k.conflicts.Restore(t, h.Conflicts)
		}
		st.From, st.Saved, st.SavedAt = filesync.StartSaved, h.Mappings, h.Saved
		st.Why = fmt.Sprintf("saved by this container (%s) at %s", shortID(t.ContainerID), h.Saved.Format(time.RFC3339))
		return st
	}
	st.Started = k.started(t) // only a start without an ancestor asks
	if h, ok := snap.Newest(); ok {
		st.From, st.Cache, st.SavedAt = filesync.StartDiscarded, h.Mappings, h.Saved
		st.Why = fmt.Sprintf("the saved state is another container's (%s, saved %s): the local side wins", h.Name, h.Saved.Format(time.RFC3339))
		if s == "" {
			st.Why = "the container's incarnation could not be read (readlink /proc/self/ns/mnt): the saved state is not used, the local side wins"
		}
		return st
	}
	st.Why = "no saved state for this sync"
	if why != "" {
		st.Why = why
	}
	return st
}

func shortID(id string) string {
	if _, after, ok := strings.Cut(id, "://"); ok {
		id = after
	}
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

// started is when t's container started, zero when that cannot be read.
func (k *keeper) started(t filesync.Target) time.Time {
	if k.client == nil {
		return time.Time{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pod, err := k.client.CoreV1().Pods(t.Namespace).Get(ctx, t.Pod, metav1.GetOptions{})
	if err != nil {
		return time.Time{}
	}
	for _, cs := range slices.Concat(pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses) {
		if cs.Name == t.Container && cs.ContainerID == t.ContainerID && cs.State.Running != nil {
			return cs.State.Running.StartedAt.Time
		}
	}
	return time.Time{}
}

// Confirmed keeps t's confirmed index for the next save
// (filesync.Ancestry).
func (k *keeper) Confirmed(t filesync.Target, ms []syncstate.Mapping) {
	if k.dryRun {
		return
	}
	k.mu.Lock()
	s, ok := k.live[targetKey(t)]
	if ok && s != "" && !k.off {
		for key, h := range k.halves {
			if h.Name == t.String() && key != targetKey(t) {
				delete(k.halves, key) // the container before a restart: never an ancestor again
			}
		}
		h := syncstate.Half{Stamp: s, Name: t.String(), Saved: k.clk.Now(), Mappings: ms}
		if k.conflicts != nil {
			h.Conflicts = k.conflicts.Standing(t)
		}
		k.halves[targetKey(t)] = h
		k.dirty = true
	}
	k.mu.Unlock()
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// run saves what changed, at most every saveEvery, until ctx ends; then
// once more.
func (k *keeper) run(ctx context.Context) {
	defer k.flush()
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
		}
		k.flush()
		select {
		case <-ctx.Done():
			return
		case <-k.clk.After(saveEvery):
		}
	}
}

// flush writes the live targets' halves when they changed: their indexes,
// or the conflicts standing there.
func (k *keeper) flush() {
	k.mu.Lock()
	if k.conflicts != nil {
		for key, h := range k.halves {
			if t, ok := k.targets[key]; ok {
				if cs := k.conflicts.Standing(t); !reflect.DeepEqual(cs, h.Conflicts) {
					h.Conflicts = cs
					k.halves[key], k.dirty = h, true
				}
			}
		}
	}
	if !k.dirty {
		k.mu.Unlock()
		return
	}
	snap := &syncstate.Snapshot{Saved: k.clk.Now()}
	for _, key := range slices.Sorted(mapKeys(k.halves)) {
		snap.Halves = append(snap.Halves, k.halves[key])
	}
	k.dirty = false
	k.mu.Unlock()
	if len(snap.Halves) == 0 {
		return // nothing confirmed in this session: what was saved stays
	}
	if !k.held() {
		return
	}
	err := k.store.Save(k.key, snap)
	if err == nil && !k.held() {
		return // taken while it was written: drop removed it
	}
	if err == nil && k.lease != nil {
		if err := k.lease.Saved(); err != nil {
			k.warn(err)
		}
	}
	if err != nil {
		if errors.Is(err, syncstate.ErrOldKept) {
			k.warn(fmt.Errorf("%w: the next start may decide against it; delete %s or start with --forget-state", err, k.store.Path(k.key)))
			return
		}
		k.warn(fmt.Errorf("%w: the next start will not use saved state", err))
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for key := range m {
			if !yield(key) {
				return
			}
		}
	}
}

// stateSink tells the keeper of every target before the engine hears of it.
type stateSink struct {
	workload.Sink
	k *keeper
}

func (s *stateSink) AddTarget(t filesync.Target) {
	s.k.add(t)
	s.Sink.AddTarget(t)
}

func (s *stateSink) RemoveTarget(t filesync.Target) {
	s.k.remove(t)
	s.Sink.RemoveTarget(t)
}

// incarnations reads each target's incarnation (remote.Incarnation) once,
// for the keeper and sync-back alike.
type incarnations struct {
	ctx context.Context
	ex  filesync.Executor
	mu  sync.Mutex
	got map[string]string
}

func (n *incarnations) of(t filesync.Target) string {
	n.mu.Lock()
	s, ok := n.got[targetKey(t)]
	n.mu.Unlock()
	if ok {
		return s
	}
	s = incarnation(n.ctx, n.ex, t)
	n.mu.Lock()
	n.got[targetKey(t)] = s
	n.mu.Unlock()
	return s
}
