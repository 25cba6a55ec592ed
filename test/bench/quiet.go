//go:build bench

package main

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/ignore"
	"github.com/livesync-dev/kubectl-livesync/pkg/watch"
)

// quietPoint is save→visible p50 at one quiet window, with its paired floor.
type quietPoint struct {
	quiet      time.Duration
	p50, floor time.Duration
	n          int
}

var (
	quietWindows = []time.Duration{10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	batchCap     = time.Second
)

// measureQuiet is the data for the default quiet window and cap. Every quiet millisecond is
// added to every save, so the window should be the shortest that still keeps one logical
// operation in one batch. It records when the watcher delivers each event during real
// multi-file operations (an editor's atomic save, cp -r and gofmt -w of this repository's
// sources, tar -x of the 10,000-file tree) and counts the batches the coalescer's rule (a
// batch is cut after quiet without an event, or cap after its first) makes of them at each
// window. The count is an upper bound: the engine keeps adding to a cut batch until its exec
// starts. Then save→visible is measured at 10 ms and 200 ms (paired with the floor, the order
// alternating) to show that the window adds one for one.
func (b *bench) measureQuiet(ctx context.Context) error {
	ops, err := b.operations()
	if err != nil {
		return err
	}
	var names []string
	for _, op := range ops {
		names = append(names, op.name)
		events, err := eventTimes(b.tmp, op)
		if err != nil {
			return fmt.Errorf("%s: %w", op.name, err)
		}
		if events == nil {
			continue // the tool is not installed
		}
		times := make([]time.Time, len(events))
		for i, e := range events {
			times[i] = e.At
		}
		var counts []string
		for _, q := range quietWindows {
			counts = append(counts, fmt.Sprintf("%s→%d", q, batchesOf(times, q, batchCap)))
		}
		span := time.Duration(0)
		if len(times) > 0 {
			span = times[len(times)-1].Sub(times[0])
		}
		var caps []string
		for _, c := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second} {
			caps = append(caps, fmt.Sprintf("%s→%d", c, batchesOf(times, 50*time.Millisecond, c)))
		}
		adaptive := coalesce.Replay(streamOptions, events)
		b.logf("%s: %d events over %.0f ms, max gap %.1f ms; batches at quiet %s; at quiet 50ms and cap %s; on save-complete %d (%s)",
			op.name, len(times), msec(span), msec(maxGap(times, batchCap)), strings.Join(counts, " "), strings.Join(caps, " "),
			len(adaptive), progressSummary(events))
		op.times, op.events = times, events
	}
	least := 0 // what the cap alone cuts: the fewest batches any quiet window can give
	for _, op := range ops {
		least += batchesOf(op.times, time.Hour, batchCap)
	}
	// What the stream engine does: the adaptive window, and on Linux the
	// cut on save-complete (pkg/coalesce); against the adaptive window alone
	// (the events' progress ignored), as before it. The tail is what the rule
	// adds after the operation's last event: from it to the cut of its batch.
	for _, op := range ops {
		if op.times == nil {
			continue
		}
		unknown := slices.Clone(op.events)
		for i := range unknown {
			unknown[i].Progress = coalesce.Unknown
		}
		now, before := coalesce.Replay(streamOptions, op.events), coalesce.Replay(streamOptions, unknown)
		b.res.pair(fmt.Sprintf("batches cut from %s on save-complete (stream engine)", op.name),
			float64(len(now)), "batches", "the adaptive window alone", float64(len(before)))
		b.res.pair(fmt.Sprintf("%s: last event → its batch cut, on save-complete", op.name),
			msec(tail(op.events, now)), "ms", "the adaptive window alone", msec(tail(op.events, before)))
	}
	for _, q := range quietWindows {
		total := 0
		for _, op := range ops {
			total += batchesOf(op.times, q, batchCap)
		}
		b.res.pair(fmt.Sprintf("quiet %s, cap %s: batches cut from %s", q, batchCap, strings.Join(names, ", ")), float64(total), "batches",
			"cap alone", float64(least))
	}

	local := filepath.Join(b.tmp, "quiet")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	for _, q := range []time.Duration{10 * time.Millisecond, 200 * time.Millisecond} {
		l, err := b.startLatency(ctx, "lat", local, "--batch-quiet", q.String())
		if err != nil {
			return err
		}
		var floors, saves []time.Duration
		for i := -2; i < b.edits/3; i++ {
			save := func() (time.Duration, error) {
				return l.save([]string{"q.txt"}, map[string][]byte{"q.txt": l.text(80 + i)})
			}
			s, f, err := alternate(i, save, func() (time.Duration, error) { return l.c.floor(ctx, l.t) })
			if err != nil {
				l.stop()
				return err
			}
			if i >= 0 {
				floors, saves = append(floors, f), append(saves, s)
			}
			time.Sleep(time.Duration(30+b.rnd.IntN(70)) * time.Millisecond)
		}
		l.stop()
		b.quietLatency = append(b.quietLatency, quietPoint{quiet: q, p50: median(saves), floor: median(floors), n: len(saves)})
	}
	slices.SortFunc(b.quietLatency, func(x, y quietPoint) int { return cmp.Compare(x.quiet, y.quiet) })
	for _, p := range b.quietLatency {
		b.res.pair(fmt.Sprintf("save→visible p50 at quiet %s (n=%d)", p.quiet, p.n), msec(p.p50), "ms", "exec floor p50 + quiet", msec(p.floor+p.quiet))
	}
	return nil
}

// operation is a multi-file change as tools make it, into an empty watched directory.
type operation struct {
	name   string
	setup  func(dir string) error // before watching
	run    func(dir string) error
	needs  string // a tool that must be installed, or ""
	times  []time.Time
	events []coalesce.Timed
}

// streamOptions are the coalescer's options in the stream engine.
var streamOptions = coalesce.Options{Quiet: coalesce.DefaultQuiet, Cap: batchCap, Adaptive: true, PeekEvery: coalesce.PeekInterval}

// progressSummary counts the events of each progress.
func progressSummary(events []coalesce.Timed) string {
	var n [3]int
	for _, e := range events {
		n[e.Progress]++
	}
	return fmt.Sprintf("%d complete, %d writing, %d unknown", n[coalesce.Complete], n[coalesce.Writing], n[coalesce.Unknown])
}

func (b *bench) operations() ([]*operation, error) {
	repo, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	src := filepath.Join(repo, "pkg")
	ops := []*operation{
		{name: "editor save", run: func(dir string) error {
			// vim/JetBrains style: write a temp file, fsync, rename it over the original.
			tmp := filepath.Join(dir, ".main.go.swp")
			f, err := os.Create(tmp)
			if err != nil {
				return err
			}
			_, _ = f.Write(textContent(42, 4000))
			_ = f.Sync()
			_ = f.Close()
			return os.Rename(tmp, filepath.Join(dir, "main.go"))
		}},
		{name: "vim save", needs: "vim", setup: func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "main.go"), textContent(41, 4000), 0o644)
		}, run: func(dir string) error {
			// vim's defaults (writebackup, backupcopy=auto): rename the file to a backup,
			// write it anew, delete the backup.
			return exec.Command("vim", "-u", "NONE", "-i", "NONE", "-n", "-es", "-c", "normal Gox", "-c", "wq", filepath.Join(dir, "main.go")).Run()
		}},
		{name: "in-place save (VS Code)", setup: func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "main.go"), textContent(41, 4000), 0o644)
		}, run: func(dir string) error {
			// truncate and write in place, as VS Code saves
			return os.WriteFile(filepath.Join(dir, "main.go"), textContent(42, 4000), 0o644)
		}},
		{name: "git checkout (200 files)", needs: "git", setup: func(dir string) error {
			script := `set -e
git init -q -b one . && git config user.email b@b && git config user.name b
mkdir -p src && for i in $(seq 200); do echo "one $i" > src/f$i.go; done
git add -A && git commit -qm one && git checkout -qb two
for i in $(seq 200); do echo "two $i" > src/f$i.go; done
git commit -qam two && git checkout -q one`
			cmd := exec.Command("sh", "-c", script)
			cmd.Dir = dir
			return cmd.Run()
		}, run: func(dir string) error {
			cmd := exec.Command("git", "checkout", "-q", "two")
			cmd.Dir = dir
			return cmd.Run()
		}},
		{name: "cp -r pkg/", run: func(dir string) error {
			return exec.Command("cp", "-r", src, filepath.Join(dir, "pkg")).Run()
		}},
		{name: "gofmt -w pkg/", setup: func(dir string) error {
			// A copy whose files all need formatting (extra blank lines at the end).
			if err := exec.Command("cp", "-r", src, filepath.Join(dir, "pkg")).Run(); err != nil {
				return err
			}
			return filepath.WalkDir(filepath.Join(dir, "pkg"), func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
					return err
				}
				f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					return err
				}
				_, _ = f.WriteString("\n\n\n")
				return f.Close()
			})
		}, run: func(dir string) error {
			return exec.Command("gofmt", "-w", filepath.Join(dir, "pkg")).Run()
		}},
	}
	if b.initialTree != "" {
		tarball := filepath.Join(b.tmp, "initial.tar")
		if err := exec.Command("tar", "-c", "-f", tarball, "-C", b.initialTree, ".").Run(); err != nil {
			return nil, err
		}
		ops = append(ops, &operation{name: "tar -x 10,000 files", run: func(dir string) error {
			return exec.Command("tar", "-x", "-f", tarball, "-C", dir).Run()
		}})
	}
	return ops, nil
}

// eventTimes runs op in a fresh watched directory and returns when each event was delivered,
// as the change the session hands the coalescer; nil when the tool op needs is missing.
func eventTimes(tmp string, op *operation) ([]coalesce.Timed, error) {
	if op.needs != "" {
		if _, err := exec.LookPath(op.needs); err != nil {
			return nil, nil
		}
	}
	dir, err := os.MkdirTemp(tmp, "op-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if op.setup != nil {
		if err := op.setup(dir); err != nil {
			return nil, err
		}
	}
	// What a session ignores by default (editor swap and backup files, .git) makes no event.
	m, err := ignore.New(dir, ignore.Options{})
	if err != nil {
		return nil, err
	}
	w, err := watch.New([]string{dir}, watch.Options{Skip: func(_, rel string, isDir bool) bool {
		return rel != "" && m.Match(filepath.ToSlash(rel), isDir)
	}})
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		times []coalesce.Timed
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.Events() {
			mu.Lock()
			times = append(times, coalesce.Timed{At: time.Now(), Change: coalesce.Change{
				Root: ev.Root, Path: ev.Path, Rescan: ev.Rescan, Progress: coalesce.Progress(ev.Progress)}})
			mu.Unlock()
		}
	}()
	go func() {
		for range w.Errors() {
		}
	}()
	if err := op.run(dir); err != nil {
		_ = w.Close()
		return nil, err
	}
	// Wait for a second of silence: the watcher re-walks new directories after one second.
	for {
		mu.Lock()
		n := len(times)
		mu.Unlock()
		time.Sleep(1500 * time.Millisecond)
		mu.Lock()
		m := len(times)
		mu.Unlock()
		if m == n {
			break
		}
	}
	_ = w.Close()
	<-done
	// The second walk of new directories repeats hints a second later; the engine finds
	// nothing to send for them, so they are not part of the operation.
	cut := len(times)
	for i := 1; i < len(times); i++ {
		if times[i].At.Sub(times[i-1].At) > 700*time.Millisecond {
			cut = i
			break
		}
	}
	return times[:cut], nil
}

// tail is how long after the last of events the batch holding it was cut, as Replay cut it.
func tail(events []coalesce.Timed, cuts []coalesce.Cut) time.Duration {
	if len(events) == 0 || len(cuts) == 0 {
		return 0
	}
	return cuts[len(cuts)-1].At.Sub(events[len(events)-1].At)
}

// batchesOf counts the batches the coalescer's rule cuts from event times.
func batchesOf(times []time.Time, quiet, capWait time.Duration) int {
	n := 0
	var first, last time.Time
	for i, t := range times {
		if i == 0 || t.Sub(last) >= quiet || t.Sub(first) >= capWait {
			n++
			first = t
		}
		last = t
	}
	return n
}

// maxGap is the longest pause between events of one operation, ignoring pauses of cap or more.
func maxGap(times []time.Time, capWait time.Duration) time.Duration {
	var m time.Duration
	for i := 1; i < len(times); i++ {
		if g := times[i].Sub(times[i-1]); g > m && g < capWait {
			m = g
		}
	}
	return m
}
