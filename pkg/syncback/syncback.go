// Package syncback brings files that a container writes home: the paths the
// user lists (--sync-back, syncBack in livesync.yaml), from one source
// replica, decided three-way against the source's confirmed index (see
// planner.Index) so that no local edit is ever overwritten.
//
// A pass runs on the source target's worker (filesync.Engine.Visit), so it
// never overlaps an upload to that container: it scans the listed paths in
// the container (remote.Scan: what changed since the last scan, or
// everything every FullEvery), decides each path with Decide, downloads what
// comes back (remote.Download, every entry checked by the archive reader and
// each file's hash against the scan's), writes it with localtree.ReplaceFile
// (atomic, never through a symlink, never over a file that is no longer the
// ancestor), and records it in the source's index as confirmed on both
// sides, so it is not sent back there. The watcher then sees the local write
// and the engine uploads it to every other replica like any local change.
//
// What it never does: bring anything back before the source's initial sync
// converged (Visit says so), from a container other than the one the
// ancestor describes (a restarted one runs in another mount namespace: the
// scan says which, and the engine re-syncs it from the local side), read a
// failed or cut-short scan as deletions (remote.ParseScan), delete locally
// without Deletes, or delete more than the mass-delete guard allows.
package syncback

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/ignore"
	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// Defaults of Config.
const (
	DefaultInterval  = time.Second
	DefaultFullEvery = 30 * time.Second
)

// massDeleteMin is how many local deletes a burst of passes may make before
// the guard holds them when they are more than half of what is listed: the
// same bound as uploads' (see filesync.Config.AllowMassDelete).
const massDeleteMin = 50

// deleteBurstGap is how long after a pass's local deletes the next pass's
// count with them (see deleteBurst), as uploads' deletes do.
const deleteBurstGap = 2 * time.Second

// deleteBurst is the local deletes of a mapping's passes that followed each
// other by less than deleteBurstGap: a container's rm -rf that the scans
// cut into passes, judged as one pass would judge it, against what was
// listed locally before it began. Once it passes the line, what it would
// delete is held, as one pass's mass delete is, until a full scan finds
// nothing left to delete: the deletes it held are never judged alone later,
// a few at a time.
type deleteBurst struct {
	last    time.Time // when its last pass with deletes ran
	before  int       // the listed local entries when it began
	deleted int       // the local deletes its passes made
	held    bool      // it passed the line
}

// Config is sync-back as the command line asked for it.
type Config struct {
	// Globs list what comes back, in gitignore syntax, relative to each
	// directory mapping's LOCAL.
	Globs []string
	// Interval is how often the source is scanned; FullEvery how often the
	// scan lists everything listed (with hashes) instead of what changed.
	Interval, FullEvery time.Duration
	// Inotify: the session runs the source's trigger (see Runner.Trigger).
	Inotify bool
	// Deletes brings the container's deletes back too.
	Deletes bool
	// DryRun reports what would come back and changes nothing.
	DryRun bool
}

// Host runs fn on a target's worker (filesync.Engine implements it).
type Host interface {
	Visit(ctx context.Context, t filesync.Target, fn func(*filesync.Visit) error) error
}

// Reporter receives sync-back's events.
type Reporter interface{ SyncBack(Event) }

// Event is Source, SyncedBack, Conflicted or Failed.
type Event interface{ syncBackEvent() }

// Source reports the replica that files come back from: the oldest pod's.
type Source struct{ Target filesync.Target }

// SyncedBack reports one pass that brought something back (or, under
// DryRun, would have).
type SyncedBack struct {
	Target  filesync.Target
	Paths   []string // local paths written
	Deleted []string // local paths deleted
	Bytes   int64
	DryRun  bool
}

// Conflicted reports a path that both sides changed: both stay as they are,
// and the next local save wins. Sums are hex sha256, "" when unknown or absent.
type Conflicted struct {
	Target              filesync.Target
	Path                string // local path
	LocalSum, RemoteSum string
}

// Failed reports a pass, or one path of it, that did not bring anything back.
type Failed struct {
	Target filesync.Target
	Path   string // "" for the whole pass
	Err    error
}

func (Source) syncBackEvent()     {}
func (SyncedBack) syncBackEvent() {}
func (Conflicted) syncBackEvent() {}
func (Failed) syncBackEvent()     {}

// ErrRestarted is what a scan that ran in another container than the one
// the ancestor describes fails with.
var ErrRestarted = errors.New("the container restarted: nothing comes back from it until it is synced again")

// ErrNoIncarnation: the container's incarnation was not read before its
// initial sync (see Add), so a restart since could not be told apart.
var ErrNoIncarnation = errors.New("could not tell which incarnation of the container was synced (readlink /proc/self/ns/mnt): nothing comes back from it")

// Runner runs sync-back passes against the source replica.
type Runner struct {
	cfg   Config
	globs *ignore.Globs
	// hashed selects the files a full scan hashes (see
	// ignore.Globs.FileTests): at least every file the globs list, whose
	// hashes are the only ones a pass reads; nil hashes every file.
	hashed []string
	host   Host
	rep    Reporter
	clk    clock.WithTicker

	mu        sync.Mutex
	live      map[string]member // by Target.String()
	source    *filesync.Target
	states    map[string]*state          // by target and container ID
	conflicts map[string]conflicted      // see Expect
	dirChecks map[string]filesync.Upload // by conflictKey: directory deletes, and files the container deleted, a pass looks at (see Changed)
	allow     map[string]allowance       // by conflictKey: what such a pass found (see checkDirs)
	onSync    map[string]bool            // by target and container ID: an on-sync run ended (see OnSyncRan)

	trigEx remote.Executor // see Trigger; nil: passes at the interval alone
	trig   *trigRun        // the source's trigger
	kick   chan struct{}   // a pass now (see kickPass)
}

type member struct {
	t           filesync.Target
	created     time.Time
	incarnation string
}

// state is what passes keep per source container.
type state struct {
	since       map[int]int64     // per mapping: container time to look back to
	lastFull    map[int]time.Time // per mapping
	needFull    map[int]bool
	incarnation string
	reported    map[string]string    // path -> what was last reported for it
	bursts      map[int]*deleteBurst // per mapping: its local deletes under way
	// heldDels is, per mapping, the local deletes a burst held: they stay
	// held while a complete scan still finds them to delete, and count
	// in no later burst.
	heldDels  map[int]map[string]bool
	lastErr   string
	dirs      []watchDir // the directory mappings, once a pass ran (see startTrigger)
	triggered bool       // its trigger was started
}

// New returns a Runner; it fails on a glob that could reach outside a
// mapping. Its passes run on the host that Serve sets.
func New(cfg Config, rep Reporter, clk clock.WithTicker) (*Runner, error) {
	g, err := ignore.NewGlobs(cfg.Globs)
	if err != nil {
		return nil, err
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.FullEvery <= 0 {
		cfg.FullEvery = DefaultFullEvery
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	hashed, _ := g.FileTests() // nil when it can't say which: every file is hashed
	return &Runner{cfg: cfg, globs: g, hashed: hashed, rep: rep, clk: clk, live: map[string]member{}, states: map[string]*state{}, conflicts: map[string]conflicted{}, dirChecks: map[string]filesync.Upload{}, allow: map[string]allowance{}, onSync: map[string]bool{}, kick: make(chan struct{}, 1)}, nil
}

// Serve sets the host that passes run on: the engine, which is built with r
// as its filesync.UploadGuard (see Expect). Call it before the first pass.
func (r *Runner) Serve(h Host) { r.host = h }

// Add records t, a container of a pod created at created, whose
// incarnation (remote.Incarnation) was read before the engine heard of t,
// so before its initial sync: what a pass finds in another one never comes
// back ("" refuses every pass). The oldest pod's container becomes the
// source (reported as a Source event before it changes).
func (r *Runner) Add(t filesync.Target, created time.Time, incarnation string) {
	r.mu.Lock()
	r.live[t.String()] = member{t: t, created: created, incarnation: incarnation}
	ev := r.pickLocked()
	r.mu.Unlock()
	r.report(ev)
}

// Remove forgets t; another replica may become the source.
func (r *Runner) Remove(t filesync.Target) {
	r.mu.Lock()
	if m, ok := r.live[t.String()]; ok && m.t.ContainerID == t.ContainerID {
		delete(r.live, t.String())
	}
	ev := r.pickLocked()
	r.mu.Unlock()
	r.report(ev)
}

// IsSource reports whether t is the source replica.
func (r *Runner) IsSource(t filesync.Target) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.source != nil && *r.source == t
}

func (r *Runner) pickLocked() Event {
	var best *member
	for _, m := range r.live {
		if best == nil || m.created.Before(best.created) || m.created.Equal(best.created) && m.t.String() < best.t.String() {
			best = &m
		}
	}
	switch {
	case best == nil:
		r.source = nil
		r.stopTriggerLocked()
	case r.source == nil || *r.source != best.t:
		t := best.t
		r.source = &t
		r.stopTriggerLocked()
		return Source{Target: t}
	}
	return nil
}

func (r *Runner) report(ev Event) {
	if ev != nil && r.rep != nil {
		r.rep.SyncBack(ev)
	}
}

// Run runs a pass every Interval, and at once when the source's trigger
// (see Trigger) sees a listed path change, until ctx ends.
func (r *Runner) Run(ctx context.Context) {
	t := r.clk.NewTicker(r.cfg.Interval)
	defer t.Stop()
	defer func() {
		r.mu.Lock()
		r.stopTriggerLocked()
		r.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-r.kick:
		}
		if r.Pass(ctx) == nil {
			r.startTrigger(ctx)
		}
	}
}

// Pass runs one pass against the source now and returns its error (also
// reported, once per distinct error); filesync.ErrNotSynced while the
// source's initial sync has not converged, which is not reported.
func (r *Runner) Pass(ctx context.Context) error {
	r.mu.Lock()
	src := r.source
	var st *state
	if src != nil {
		st = r.stateLocked(*src)
	}
	r.mu.Unlock()
	if src == nil {
		return filesync.ErrNotSynced
	}
	err := r.host.Visit(ctx, *src, func(v *filesync.Visit) error { return r.pass(v, st) })
	switch {
	case err == nil:
		st.lastErr = ""
	case errors.Is(err, filesync.ErrNotSynced) || ctx.Err() != nil:
	case err.Error() != st.lastErr:
		st.lastErr = err.Error()
		r.report(Failed{Target: *src, Err: err})
	}
	return err
}

// stateLocked returns what passes keep for t, the source.
func (r *Runner) stateLocked(t filesync.Target) *state {
	key := t.String() + "@" + t.ContainerID
	st := r.states[key]
	if st == nil {
		st = &state{since: map[int]int64{}, lastFull: map[int]time.Time{}, needFull: map[int]bool{}, reported: map[string]string{}, bursts: map[int]*deleteBurst{}, heldDels: map[int]map[string]bool{}}
		if m := r.live[t.String()]; m.t == t {
			st.incarnation = m.incarnation
		}
		r.states = map[string]*state{key: st} // a new source starts over
	}
	return st
}

// Synced says that t's initial sync converged: when t is the source and r
// has a trigger, a pass runs now (Run's first, which starts the trigger)
// rather than at the next interval.
func (r *Runner) Synced(t filesync.Target) {
	if r.trigEx != nil && r.IsSource(t) {
		r.kickPass()
	}
}

// OnSyncRan says that a run of the on-sync command ended in t: what it
// wrote may keep old mtimes (an archive it unpacked, a cp -p), so the next
// pass against t lists everything, with hashes.
func (r *Runner) OnSyncRan(t filesync.Target) {
	r.mu.Lock()
	r.onSync[t.String()+"@"+t.ContainerID] = true
	r.mu.Unlock()
}

// pass scans every directory mapping of v's target and brings back what
// Decide says, on the target's worker.
func (r *Runner) pass(v *filesync.Visit, st *state) error {
	out := SyncedBack{Target: v.Target, DryRun: r.cfg.DryRun}
	r.mu.Lock()
	if r.onSync[v.Target.String()+"@"+v.Target.ContainerID] {
		delete(r.onSync, v.Target.String()+"@"+v.Target.ContainerID)
		for i := range v.Mappings() {
			st.needFull[i] = true
		}
	}
	r.mu.Unlock()
	// Before the scans: what they bring home is no longer unknown to the
	// index, and a delete over it is a conflict.
	if err := r.checkDirs(v, st); err != nil {
		return err
	}
	var dirs []watchDir
	for i := range v.Mappings() {
		root, dir, ignored, ok := v.Mapping(i)
		if !ok {
			continue // a single file's mapping: nothing is listed under it
		}
		dirs = append(dirs, watchDir{remote: string(dir), ignored: ignored})
		full := st.since[i] == 0 || st.needFull[i] || r.clk.Since(st.lastFull[i]) >= r.cfg.FullEvery
		since := st.since[i]
		if full {
			since = 0
		}
		started := r.clk.Now()
		res, err := remote.Scan(v.Ctx, v.Exec, v.Target, string(dir), since, r.globs.Starts(), r.hashed)
		if err != nil {
			return err
		}
		switch {
		case st.incarnation == "":
			return ErrNoIncarnation
		case res.Incarnation != st.incarnation:
			return ErrRestarted
		}
		if res.Exists {
			p := &mappingPass{r: r, v: v, st: st, i: i, root: root, ignored: ignored, res: res, started: started, out: &out}
			if err := p.run(); err != nil {
				return err
			}
			if p.cut {
				continue // the look-back stays: the next scan sees the rest again
			}
		}
		st.since[i] = res.Now - 2
		if full {
			st.lastFull[i], st.needFull[i] = r.clk.Now(), false
		}
	}
	if len(out.Paths)+len(out.Deleted) > 0 {
		r.report(out)
	}
	r.mu.Lock()
	if st.dirs == nil {
		st.dirs = dirs
	}
	r.mu.Unlock()
	return nil
}

// mappingPass is one pass over one mapping.
type mappingPass struct {
	r       *Runner
	v       *filesync.Visit
	st      *state
	i       int
	root    string
	ignored func(string, bool) bool
	res     *remote.ScanResult
	started time.Time // when its scan began
	out     *SyncedBack
	cut     bool // a download was cut short: what it did not bring waits
}

// decision is one path's sides and what Decide made of them.
type decision struct {
	rel             string
	anc, local, rem Side
	action          Action
}

func (p *mappingPass) run() error {
	rems := map[string]remote.Entry{}
	for name, e := range p.res.Names {
		rel := strings.TrimPrefix(name, "./")
		if name == "." || !localtree.ValidRel(rel) || rel == "" || localtree.InGit(rel) {
			continue
		}
		rems[rel] = e
	}
	if p.res.Complete {
		p.conflictsGone(rems)
	}
	cands := map[string]bool{}
	for rel, e := range rems {
		if p.listed(rel, e.Type == remote.TypeDir) {
			cands[rel] = true
		}
	}
	for rel := range rems {
		p.v.Gone(p.i, rel, false)
	}
	if p.res.Complete {
		for _, rel := range p.goneLocally(rems) {
			// What the container deleted and the local side keeps
			// (without deletes, or held) is no longer the container's:
			// the upload guard does not weigh it (see planner.Index.Gone).
			p.v.Gone(p.i, rel, true)
			if p.r.cfg.Deletes && !localtree.InGit(rel) { // a local .GIT is .git on some disks: never touched
				cands[rel] = true
			}
		}
	}
	var ds []*decision
	for _, rel := range slices.Sorted(mapsKeys(cands)) {
		d := &decision{rel: rel, anc: p.ancestor(rel)}
		if e, ok := rems[rel]; ok {
			d.rem = p.remoteSide(e)
		}
		d.local = localSide(filepath.Join(p.root, filepath.FromSlash(rel)))
		if d.local.Present {
			// Where the local side has no exec bits (Windows), it has
			// what the container was last known to have.
			known := d.anc
			if !known.Present {
				known = d.rem
			}
			d.local.Mode = localtree.KeepExec(d.local.Mode, known.Mode)
		}
		d.action = Decide(d.anc, d.local, d.rem, p.r.cfg.Deletes)
		switch standing, saved := p.r.inConflict(p.v.Target, p.i, rel, p.local(rel)); {
		case d.action != Download && d.action != DeleteLocal:
			if standing && d.action == Keep && !d.anc.Unknown && !d.rem.Unhashed && d.rem.Present && same(d.rem, d.anc) && p.r.movedSince(p.v.Target, p.i, rel, seen{sum: d.rem.Sum}) {
				// The container put back the ancestor's bytes after the
				// conflict (the app rewrote the file as it was, a move put
				// the old one back): a change made after the local one, so a
				// conflict again, with the new pair. Before, nothing named
				// it: the local side stayed skipped, the container's file
				// stayed (TestModel seed 16631844840823768410 round 362: a
				// local delete against a container edit, then the container
				// moved the old file back).
				d.action = Conflict
			}
			if saved && d.action == Conflict && p.r.savedOver(p.v.Target, p.i, rel, p.local(rel), seen{sum: d.rem.Sum}) {
				// Saved since the conflict, over the container side it
				// showed: the save's batch sends it, checked against that
				// side (see Expect), and the conflict is not reported again.
				// A save made while no session ran has no batch of its own
				// coming: it is planned here. Before, it stayed home and
				// nothing said so (TestModel seed 15620430712571607237
				// round 14: a touch -r save while stopped).
				p.v.Replan(p.i, rel)
			}
		case saved:
			p.savedBack(d)
		case standing:
			// Both sides stay until the next local save, whatever the
			// ancestor says: a conflict found again with a new container
			// side marks the local file as it is, and where that holds
			// the ancestor's bytes, Decide took it for unchanged and
			// downloaded over it (TestModel seed 5161543048578407081
			// round 135: the save that put back the ancestor's bytes).
			d.action = Conflict
		}
		if d.rem.Unhashed && p.res.Since {
			// Written while this scan ran, its mtime is most likely past
			// the next look-back, which hashes it; a full scan makes sure.
			// (A full scan that could not hash it does not ask again: an
			// unreadable file would make every scan a full one.)
			p.st.needFull[p.i] = true
		}
		ds = append(ds, d)
	}
	p.guardDeletes(ds, countRemote(ds))
	if p.r.cfg.DryRun {
		for _, d := range ds {
			switch d.action {
			case Download, MakeDir:
				p.out.Paths = append(p.out.Paths, p.local(d.rel))
				p.out.Bytes += d.rem.Size
			case DeleteLocal:
				p.out.Deleted = append(p.out.Deleted, p.local(d.rel))
			}
		}
		return nil
	}
	var downloads []*decision
	for _, d := range ds {
		switch d.action {
		case MakeDir:
			p.makeDir(d)
		case Download:
			downloads = append(downloads, d)
		case Record:
			p.record(d.rel, d.local)
		case Conflict:
			p.conflict(d.rel, d.local, d.rem.Sum)
		case Refuse:
			p.once(d.rel, "refused", Failed{Target: p.v.Target, Path: p.local(d.rel),
				Err: fmt.Errorf("%q is a symlink in the container: symlinks never come back", d.rel)})
		}
	}
	if err := p.download(downloads); err != nil {
		return err
	}
	for _, d := range slices.Backward(ds) { // deepest first
		if d.action == DeleteLocal {
			p.deleteLocal(d)
		}
	}
	return nil
}

// savedBack decides d, a path in conflict whose local side was saved since
// in a way Decide took for an unchanged local side to replace: the
// ancestor's bytes put back (a revert, a copy of the old version), or a
// delete where the ancestor is nothing or the container changed it. It is
// the save that wins over the conflict: against a container change made
// since, a conflict again; else it goes up, checked against what the
// conflict showed, and the path is planned again with an ancestor that
// makes the planner send it: none for a file (by content it would send
// nothing), the container's file for a delete (with none it would delete
// nothing). Before, the pass downloaded the container's file over the
// user's save, or left it to a plan that never came (TestModel seeds
// 5161543048578407081 round 135, 9939091864643390162 round 46).
func (p *mappingPass) savedBack(d *decision) {
	if d.rem.Present && !p.r.savedOver(p.v.Target, p.i, d.rel, p.local(d.rel), seen{sum: d.rem.Sum}) {
		d.action = Conflict
		return
	}
	d.action = Keep
	if d.local.Present || !d.rem.Present {
		p.v.Forget(p.i, d.rel)
	} else {
		p.v.Record(p.i, d.rel, planner.Entry{Type: d.rem.Type, Mode: d.rem.Mode, Size: d.rem.Size, MTime: time.Unix(d.rem.MTime, 0), Sum: d.rem.Sum, Link: d.rem.Link})
	}
	p.v.Replan(p.i, d.rel)
}

// conflictsGone ends the conflicts of this mapping whose container side a
// complete scan no longer finds (rems): a local edit wins over the delete,
// as it does when an upload finds the file gone (see Changed), so the
// ancestor is forgotten and the local file goes up, checked against nothing
// being there; a local side gone too leaves nothing to decide. Before, the
// conflict's mark still named the container's old content: the edit stayed
// home, skipped, until two more saves. A conflict saved over since is the
// batch's to decide (see Expect).
func (p *mappingPass) conflictsGone(rems map[string]remote.Entry) {
	prefix := conflictKey(p.v.Target, p.i, "")
	var gone []string
	p.r.mu.Lock()
	for key, c := range p.r.conflicts {
		rel, ok := strings.CutPrefix(key, prefix)
		if _, there := rems[rel]; !ok || rel == "" || there || !p.listed(rel, false) || !p.entriesListed(localtree.ParentRel(rel)) {
			continue
		}
		// Gone on both sides, it is over whatever the local side did: a
		// local delete after it that no batch checked (a start found both
		// sides gone) stood on, and the next start took the container's
		// new file at the path, holding the conflict's bytes, for the one
		// the delete answered, and deleted it (TestModel seed
		// 267067436523443874 round 185).
		if lm := markOf(p.local(rel)); lm != c.local && lm.exists {
			continue
		}
		delete(p.r.conflicts, key)
		gone = append(gone, rel)
	}
	p.r.mu.Unlock()
	for _, rel := range gone {
		containerGone(p.v, p.i, rel, p.local(rel))
	}
}

// entriesListed reports whether this scan listed every entry of directory
// rel ("" the mapping's root), so that one it lacks is gone: all of them in
// a full scan, and in an incremental one those of a directory changed since
// the scan it follows (see goneLocally).
func (p *mappingPass) entriesListed(rel string) bool {
	if !p.res.Since {
		return true
	}
	name := "."
	if rel != "" {
		name = "./" + rel
	}
	e, ok := p.res.Names[name]
	return ok && e.Type == remote.TypeDir && p.res.Whole[name]
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// listed reports whether rel comes back: listed, and not ignored.
func (p *mappingPass) listed(rel string, isDir bool) bool {
	return p.r.globs.Match(rel, isDir) && !p.ignored(rel, isDir)
}

func (p *mappingPass) local(rel string) string {
	return filepath.Join(p.root, filepath.FromSlash(rel))
}

func (p *mappingPass) ancestor(rel string) Side {
	e, ok, known := p.v.Entry(p.i, rel)
	if !ok {
		return Side{}
	}
	return Side{Present: true, Unknown: !known, Type: e.Type, Mode: e.Mode, Size: e.Size, MTime: e.MTime.Unix(), Sum: e.Sum, Link: e.Link}
}

func (p *mappingPass) remoteSide(e remote.Entry) Side {
	s := Side{Present: true, Type: e.Type, Mode: e.Mode, Size: e.Size, MTime: e.MTime, Link: e.Link}
	switch {
	case p.res.Alg != "sha256sum":
		// No hashes at all (a container without sha256sum): size and
		// mtime are all there is to go by.
	case len(e.Sum) == sha256.Size:
		s.Sum = (*[32]byte)(e.Sum)
	case e.Type == remote.TypeFile:
		s.Unhashed = true
	}
	return s
}

// localSide describes the local entry at name, a file with its hash.
func localSide(name string) Side {
	fi, err := os.Lstat(name)
	if err != nil {
		return Side{Present: !errors.Is(err, fs.ErrNotExist), Unknown: !errors.Is(err, fs.ErrNotExist)}
	}
	s := Side{Present: true, Mode: localtree.Perm(fi), Size: fi.Size(), MTime: fi.ModTime().Unix()}
	switch {
	case fi.IsDir():
		s.Type = remote.TypeDir
	case fi.Mode()&fs.ModeSymlink != 0:
		s.Type = remote.TypeSymlink
		s.Link, _ = os.Readlink(name)
	case fi.Mode().IsRegular():
		s.Type = remote.TypeFile
		if f, ofi, err := localtree.OpenRegular(name); err == nil {
			h := sha256.New()
			// The sum stands for the file only if nothing wrote it while it
			// was read: the same size, mtime and ctime after as before.
			if _, err := io.Copy(h, f); err == nil && ofi.Size() == fi.Size() && os.SameFile(ofi, fi) && unchangedSince(f, ofi) {
				s.Sum = (*[32]byte)(h.Sum(nil))
				s.hashed = ofi
			}
			f.Close()
		}
	default:
		s.Type = 0 // a FIFO, socket or device: never the same as anything
	}
	return s
}

// unchangedSince reports whether f's stat is still before's: size, mtime
// and, where the platform says it, ctime.
func unchangedSince(f *os.File, before fs.FileInfo) bool {
	now, err := f.Stat()
	if err != nil || now.Size() != before.Size() || !now.ModTime().Equal(before.ModTime()) {
		return false
	}
	_, c0, ok0 := localtree.IdentityOf(before)
	_, c1, ok1 := localtree.IdentityOf(now)
	return ok0 == ok1 && c0 == c1
}

// goneLocally returns the listed local entries that the scan shows gone
// from the container: under a start point it found missing, under a
// directory whose every entry it listed (one that changed since the last
// scan), or anywhere under the start points after a full scan.
func (p *mappingPass) goneLocally(rems map[string]remote.Entry) []string {
	var out []string
	add := func(rel string, isDir bool) {
		if _, ok := rems[rel]; !ok && p.listed(rel, isDir) {
			out = append(out, rel)
		}
	}
	walk := func(rel string, deep bool) {
		base := p.local(rel)
		_ = filepath.WalkDir(base, func(name string, de fs.DirEntry, err error) error {
			if err != nil || name == base {
				return nil
			}
			r, ok := localtree.RelTo(p.root, name)
			if !ok {
				return filepath.SkipDir
			}
			add(r, de.IsDir())
			if de.IsDir() && (!deep || p.ignored(r, true)) {
				return filepath.SkipDir
			}
			return nil
		})
	}
	for _, s := range p.res.Missing {
		if rel := strings.TrimPrefix(s, "./"); rel != "" && rel != "." {
			if fi, err := os.Lstat(p.local(rel)); err == nil {
				add(rel, fi.IsDir())
				walk(rel, true)
			}
		}
	}
	if !p.res.Since {
		for _, s := range p.r.globs.Starts() {
			if rel := strings.TrimPrefix(strings.TrimPrefix(s, "."), "/"); rel == "" {
				walk("", true)
			} else if _, ok := rems[rel]; ok && rems[rel].Type == remote.TypeDir {
				walk(rel, true)
			}
		}
		return out
	}
	for rel := range rems {
		// Only a directory the walk found newer than the marker had its
		// entries listed (scan.sh's "V"); one that changed after the walk
		// passed it is listed with its new mtime, its entries not.
		if p.entriesListed(rel) {
			walk(rel, false)
		}
	}
	if p.entriesListed("") {
		walk("", false)
	}
	return out
}

// guardDeletes holds a pass's local deletes, reporting why, when with those
// of the burst under way (see deleteBurst) they are more than massDeleteMin
// and more than half of what was listed locally before it, or when the
// container holds none of what is listed (an emptied root).
func (p *mappingPass) guardDeletes(ds []*decision, remoteListed int) {
	// What a burst held stays held, whatever later passes count, until a
	// complete scan no longer finds it to delete (the local file changed or
	// went, the container's came back); it counts in no later burst, so a
	// delete elsewhere, long after, is judged on its own. Before, the hold
	// stuck to every later delete while the held files were still there.
	held := p.st.heldDels[p.i]
	still := map[string]bool{}
	n := 0
	for _, d := range ds {
		switch {
		case d.action != DeleteLocal:
		case held[d.rel]:
			d.action = Keep
			still[d.rel] = true
		default:
			n++
		}
	}
	if p.res.Complete && !p.r.cfg.DryRun {
		if len(still) > 0 {
			p.st.heldDels[p.i] = still
		} else {
			delete(p.st.heldDels, p.i)
		}
	}
	// The gap runs to this pass's start: a scan slower than the gap (a
	// loaded node, a big tree) must not cut a burst in two halves that
	// each pass the line.
	now := p.r.clk.Now()
	b := p.st.bursts[p.i]
	if b != nil && p.started.Sub(b.last) >= deleteBurstGap {
		b = nil
	}
	if n == 0 {
		p.keepBurst(b)
		return
	}
	if b == nil {
		b = &deleteBurst{before: p.listedLocal() - len(still)}
	}
	b.last = now
	emptied := !p.res.Since && remoteListed == 0
	burst := n + b.deleted
	b.held = b.held || burst > massDeleteMin && 2*burst > b.before
	if !emptied && !b.held {
		b.deleted = burst
		p.keepBurst(b)
		return
	}
	p.keepBurst(b)
	var names []string
	for _, d := range ds {
		if d.action == DeleteLocal {
			d.action = Keep
			names = append(names, p.local(d.rel))
			if !p.r.cfg.DryRun {
				if p.st.heldDels[p.i] == nil {
					p.st.heldDels[p.i] = map[string]bool{}
				}
				p.st.heldDels[p.i][d.rel] = true
			}
		}
	}
	why := fmt.Errorf("held %d deletes from the container: more than %d and more than half of what is listed", n, massDeleteMin)
	switch {
	case emptied:
		why = fmt.Errorf("held %d deletes from the container: it holds none of the listed paths any more", n)
	case b.deleted > 0:
		why = fmt.Errorf("held %d deletes from the container: with the %d deleted just before, more than %d and more than half of the %d listed", n, b.deleted, massDeleteMin, b.before)
	}
	why = fmt.Errorf("%w; held: %s", why, heldNames(names))
	p.once("", why.Error(), Failed{Target: p.v.Target, Err: why})
}

// heldNames names the first few of names (sorted), and how many more: what
// a hold line shows of the files it keeps.
func heldNames(names []string) string {
	slices.Sort(names)
	const show = 3
	if len(names) <= show {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:show], ", "), len(names)-show)
}

// keepBurst keeps b as the mapping's burst under way (nil: none), except
// under DryRun, whose passes delete nothing.
func (p *mappingPass) keepBurst(b *deleteBurst) {
	switch {
	case p.r.cfg.DryRun:
	case b == nil:
		delete(p.st.bursts, p.i)
	default:
		p.st.bursts[p.i] = b
	}
}

// listedLocal counts the listed local entries: what a burst of deletes is
// judged against.
func (p *mappingPass) listedLocal() int {
	seen := map[string]bool{}
	for _, s := range p.r.globs.Starts() {
		start := p.local(strings.TrimPrefix(strings.TrimPrefix(s, "."), "/"))
		_ = filepath.WalkDir(start, func(name string, de fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, ok := localtree.RelTo(p.root, name)
			switch {
			case ok && rel == "":
				return nil
			case ok && !localtree.InGit(rel) && p.listed(rel, de.IsDir()):
				seen[rel] = true
			}
			if de.IsDir() && (!ok || localtree.InGit(rel) || p.ignored(rel, true)) {
				return filepath.SkipDir
			}
			return nil
		})
	}
	return len(seen)
}

func countRemote(ds []*decision) int {
	n := 0
	for _, d := range ds {
		if d.rem.Present {
			n++
		}
	}
	return n
}

func (p *mappingPass) makeDir(d *decision) {
	fi, err := localtree.MakeDir(p.root, d.rel, d.rem.Mode|0o700)
	if err != nil {
		p.failed(d, err)
		return
	}
	p.v.Record(p.i, d.rel, planner.Entry{Type: remote.TypeDir, Mode: localtree.Perm(fi), MTime: fi.ModTime()})
	p.recordParents(d.rel)
	p.out.Paths = append(p.out.Paths, p.local(d.rel))
	p.st.needFull[p.i] = true // a directory moved in keeps old mtimes below it
}

// record makes local, which the container holds too, the ancestor.
// A file is recorded as it was when its sum was read (local.hashed), with
// its inode and ctime: a save since then, even one keeping size and mtime,
// is not taken for the ancestor.
func (p *mappingPass) record(rel string, local Side) {
	fi := local.hashed
	if fi == nil {
		if local.Type == remote.TypeFile {
			return // no sum that stands for the file: nothing to record
		}
		var err error
		if fi, err = os.Lstat(p.local(rel)); err != nil {
			return
		}
	}
	p.r.settle(p.v.Target, p.i, rel)
	e := planner.Entry{Type: local.Type, Mode: localtree.KeepExec(localtree.Perm(fi), local.Mode), MTime: fi.ModTime(), Link: local.Link, Sum: local.Sum}
	if local.Type == remote.TypeFile {
		e.Size = fi.Size()
		e.Ino, e.CTime, _ = localtree.IdentityOf(fi)
	}
	p.v.Record(p.i, rel, e)
}

// conflict reports the conflict at rel with the local side as the pass
// decided on it (see markSide).
func (p *mappingPass) conflict(rel string, local Side, rem *[32]byte) {
	p.r.conflictSeen(p.st, p.v.Target, p.i, rel, p.local(rel), markSide(p.local(rel), local), local.Sum, seen{sum: rem})
}

// conflictSeen reports the conflict at rel (local, its local path; lm, the
// local file the conflict was found with) once, and marks it: both sides
// stay until the next local save, which wins over what the container held
// then (rem; see seen).
func (r *Runner) conflictSeen(st *state, t filesync.Target, i int, rel, local string, lm mark, lsum *[32]byte, rem seen) {
	if r.savedOver(t, i, rel, local, rem) {
		return
	}
	r.markConflict(t, i, rel, lm, rem)
	ev := Conflicted{Target: t, Path: local, LocalSum: hexSum(lsum), RemoteSum: hexSum(rem.sum)}
	r.once(st, rel, "conflict "+ev.LocalSum+" "+ev.RemoteSum, ev)
}

func (p *mappingPass) once(key, what string, ev Event) { p.r.once(p.st, key, what, ev) }

// once reports ev unless what was last reported for key is what.
func (r *Runner) once(st *state, key, what string, ev Event) {
	if st.reported[key] == what {
		return
	}
	st.reported[key] = what
	r.report(ev)
}

func (p *mappingPass) failed(d *decision, err error) {
	if errors.Is(err, localtree.ErrChanged) {
		p.conflict(d.rel, localSide(p.local(d.rel)), d.rem.Sum)
		return
	}
	p.once(d.rel, err.Error(), Failed{Target: p.v.Target, Path: p.local(d.rel), Err: err})
}

func hexSum(s *[32]byte) string {
	if s == nil {
		return ""
	}
	return hex.EncodeToString(s[:])
}

func sumOf(h string) *[32]byte {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 32 {
		return nil
	}
	return (*[32]byte)(b)
}

// download brings ds back in one archive, each file written only if the
// local one is still what it was decided against.
func (p *mappingPass) download(ds []*decision) error {
	if len(ds) == 0 {
		return nil
	}
	byRel := map[string]*decision{}
	names := make([]string, 0, len(ds))
	for _, d := range ds {
		byRel[d.rel] = d
		names = append(names, "./"+d.rel)
	}
	_, dir, _, _ := p.v.Mapping(p.i)
	err := remote.Download(p.v.Ctx, p.v.Exec, p.v.Target, string(dir), names, func(e remote.ArchiveEntry) error {
		d := byRel[e.Rel]
		if d == nil || e.Type != remote.TypeFile {
			return nil // not asked for, or no longer a file: the next scan decides
		}
		delete(byRel, e.Rel)
		want := localtree.Expect{Absent: !d.local.Present}
		if d.local.Present {
			if d.local.Sum == nil {
				return nil
			}
			want.Size, want.Sum = d.local.Size, *d.local.Sum
		}
		h := sha256.New()
		fi, err := localtree.ReplaceFile(p.root, d.rel, io.TeeReader(e.Body, h), e.Mode, e.MTime, d.rem.Sum, want)
		if err != nil {
			p.failed(d, err)
			return nil
		}
		p.wrote(d.rel, fi, e.Mode, h)
		return nil
	})
	if errors.Is(err, remote.ErrHostileEntry) {
		p.once("", err.Error(), Failed{Target: p.v.Target, Err: err})
		return nil
	}
	if err != nil && len(byRel) < len(ds) {
		p.cut = true
		return nil // what came stands; the next scan sees the rest again
	}
	return err
}

// wrote records a file that came back as confirmed on both sides, with the
// directories made on its way.
func (p *mappingPass) wrote(rel string, fi fs.FileInfo, sent fs.FileMode, h hash.Hash) {
	e := planner.Entry{Type: remote.TypeFile, Mode: localtree.KeepExec(localtree.Perm(fi), sent), Size: fi.Size(), MTime: fi.ModTime(), Sum: (*[32]byte)(h.Sum(nil))}
	// fi is the file as written, before its rename (see ReplaceFile): a
	// save into it since shows in its ctime.
	e.Ino, e.CTime, _ = localtree.IdentityOf(fi)
	p.v.Record(p.i, rel, e)
	p.recordParents(rel)
	p.out.Paths = append(p.out.Paths, p.local(rel))
	p.out.Bytes += fi.Size()
	delete(p.st.reported, rel)
	p.r.settle(p.v.Target, p.i, rel)
}

// recordParents records the directories above rel that the index lacks
// (made on the way to it, here and in the container), so no plan sends them.
func (p *mappingPass) recordParents(rel string) {
	for a := localtree.ParentRel(rel); a != ""; a = localtree.ParentRel(a) {
		if _, ok, _ := p.v.Entry(p.i, a); ok {
			continue
		}
		if e, ok := p.res.Names["./"+a]; !ok || e.Type != remote.TypeDir {
			continue // not known to be a directory in the container
		}
		if di, err := os.Lstat(p.local(a)); err == nil && di.IsDir() {
			p.v.Record(p.i, a, planner.Entry{Type: remote.TypeDir, Mode: localtree.Perm(di), MTime: di.ModTime()})
		}
	}
}

func (p *mappingPass) deleteLocal(d *decision) {
	var err error
	if d.anc.Type == remote.TypeDir {
		err = localtree.RemoveEmptyDir(p.root, d.rel)
		if _, serr := os.Lstat(p.local(d.rel)); err == nil && serr == nil {
			return // something is left in it: it stays
		}
	} else if d.local.Sum != nil {
		err = localtree.RemoveFile(p.root, d.rel, localtree.Expect{Size: d.local.Size, Sum: *d.local.Sum})
	} else {
		return
	}
	if err != nil {
		p.failed(d, err)
		return
	}
	p.v.Forget(p.i, d.rel)
	p.r.settle(p.v.Target, p.i, d.rel)
	p.out.Deleted = append(p.out.Deleted, p.local(d.rel))
}
