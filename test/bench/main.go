//go:build bench

// Command bench measures kubectl-livesync against its baselines on a real cluster (see
// PERFORMANCE.md): the exec floor and save→visible latency, initial sync and re-sync
// throughput, fan-out, the watcher on a 100,000-file tree and `wait`'s receipt, plus the Go
// micro-benchmarks.
// Every ratio pairs two figures measured in the same run, interleaved, so machine noise
// cancels; nothing here is a timed assertion. It prints one table and writes the same rows as
// JSON. Run it with `make bench`.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type bench struct {
	c            *cluster
	res          results
	tmp          string
	probeBin     string
	initialTree  string
	initialBytes int64
	watchTree    string
	rnd          *rand.Rand
	start        time.Time

	edits       int
	reps        int
	initialReps int
	idle        time.Duration
	benchtime   string

	quietLatency []quietPoint

	t *phase // of the phase that runs
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%5.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

var phases = []string{"micro", "latency", "remote", "quiet", "fanout", "initial", "resync", "watcher", "restart", "syncback", "state", "forward", "bigsave", "wait"}

func main() {
	b := &bench{rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)), start: time.Now()}
	var (
		kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
		kubectl    = flag.String("kubectl", "kubectl", "kubectl binary for the baselines")
		lcimage    = flag.String("lcimage", "lcimage", "lcimage binary (hack/localcluster) to build the test image")
		registry   = flag.String("registry", "127.0.0.1:5000", "registry that this machine and the node reach")
		binary     = flag.String("binary", "bin/kubectl-livesync", "kubectl-livesync binary under test")
		out        = flag.String("out", "_output/bench.json", "where to write the rows as JSON")
		md         = flag.String("md", "_output/bench.md", "where to write the table as Markdown (\"\" for nowhere)")
		only       = flag.String("only", strings.Join(phases, ","), "comma-separated phases to run: "+strings.Join(phases, ","))
	)
	flag.IntVar(&b.edits, "edits", 60, "single-file saves (and exec floors) to pair; fan-out and the quiet-window latencies use a third, the wait phase half")
	flag.IntVar(&b.reps, "reps", 3, "repetitions of the slower measurements (watcher ready; 50-file bursts and 5 MB files ×5 and ×3; 10,000-file bursts, at least 5)")
	flag.IntVar(&b.initialReps, "initial-reps", 4, "repetitions of each initial-sync copy")
	flag.DurationVar(&b.idle, "idle", 30*time.Second, "idle CPU measurement window")
	flag.StringVar(&b.benchtime, "benchtime", "1s", "go test -benchtime for the micro-benchmarks")
	fanout := flag.String("fanout", "1,5,10,20,40", "replicas of the fan-out phase's deployments, the baseline first (the remote profile's uses 1, 5 and 10)")
	flag.BoolVar(&fanoutRemote, "fanout-remote", true, "end the fan-out phase with the remote profile's 1 MB saves")
	flag.Parse()
	fanoutReplicas = nil
	for _, f := range strings.Split(*fanout, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: -fanout: %q is not a number of replicas\n", f)
			os.Exit(2)
		}
		fanoutReplicas = append(fanoutReplicas, n)
	}
	if len(fanoutReplicas) < 2 {
		fmt.Fprintln(os.Stderr, "bench: -fanout: at least two deployments, the baseline first")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := b.run(ctx, *kubeconfig, *kubectl, *lcimage, *registry, *binary, strings.Split(*only, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		if len(b.res) == 0 {
			os.Exit(1)
		}
		defer os.Exit(1)
	}
	b.res.print(os.Stdout)
	if err := b.res.writeJSON(*out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if *md != "" {
		f, err := os.Create(*md)
		if err == nil {
			b.res.markdown(f)
			err = f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
	b.logf("wrote %s", *out)
}

func (b *bench) run(ctx context.Context, kubeconfig, kubectl, lcimage, registry, binary string, only []string) (err error) {
	want := func(p string) bool { return slices.Contains(only, p) }
	if want("micro") {
		b.logf("micro-benchmarks")
		if err := b.measureMicro(ctx); err != nil {
			return err
		}
	}
	if !slices.ContainsFunc(phases[1:], want) {
		return nil
	}
	if binary, err = filepath.Abs(binary); err != nil {
		return err
	}
	if b.c, err = newCluster(kubeconfig, kubectl, lcimage, registry, binary); err != nil {
		return err
	}
	if b.tmp, err = os.MkdirTemp("", "livesync-bench-"); err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(b.tmp) }()
	if err := b.c.setUp(ctx); err != nil {
		return err
	}
	defer b.c.tearDown()
	b.logf("namespace %s", b.c.ns)
	deployments := []struct {
		name     string
		replicas int32
		emptyDir string
		memory   bool // the emptyDir is a tmpfs
		phases   []string
		gnu      bool // the app-gnu image (GNU tools, inotifywait) instead of busybox's
	}{
		{"lat", 1, "", false, []string{"latency", "remote", "quiet"}, false},
		{"big", 1, "/app", false, []string{"resync"}, false},
		// Every initial-sync copier writes into a fresh directory of a tmpfs: see measureInitial.
		{"cmp", 1, "/cmp", true, []string{"initial"}, false},
		// The bursts go to a tmpfs: see measureWatcher.
		{"w", 1, "/data", true, []string{"watcher"}, false},
		{"sb", 1, "", false, []string{"syncback"}, false},
		{"sbi", 1, "", false, []string{"syncback"}, true},
		{"st", 1, "/app", false, []string{"state"}, false},
		{"st100", 1, "/app", false, []string{"state"}, false},
		{"bs", 1, "/bs", false, []string{"bigsave"}, false},
		{"wt", waitReplicas, "", false, []string{"wait"}, false},
	}
	for _, n := range fanoutReplicas {
		if want("fanout") {
			if err := b.c.deploy(ctx, fmt.Sprintf("fan%d", n), int32(n), "", false, false); err != nil {
				return err
			}
		}
	}
	for _, d := range deployments {
		if slices.ContainsFunc(d.phases, want) {
			if err := b.c.deploy(ctx, d.name, d.replicas, d.emptyDir, d.memory, d.gnu); err != nil {
				return err
			}
		}
	}
	if b.probeBin, err = buildProbe(ctx, b.tmp); err != nil {
		return err
	}
	if want("initial") || want("resync") || want("quiet") || want("state") {
		b.initialTree = filepath.Join(b.tmp, "initial")
		if b.initialBytes, err = initialTree(b.initialTree); err != nil {
			return err
		}
		b.logf("initial tree: 10,000 files, %.1f MiB", mib(b.initialBytes))
	}
	if want("watcher") {
		b.watchTree = filepath.Join(b.tmp, "watch")
		if err := watchTree(b.watchTree); err != nil {
			return err
		}
		b.logf("watch tree: 100,000 files")
	}
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"latency", b.measureLatency},
		{"remote", b.measureRemote},
		{"quiet", b.measureQuiet},
		{"fanout", b.measureFanout},
		{"initial", b.measureInitial},
		{"resync", b.measureResync},
		{"watcher", b.measureWatcher},
		{"restart", b.measureRestart},
		{"syncback", b.measureSyncBack},
		{"state", b.measureState},
		{"forward", b.measureForward},
		{"bigsave", b.measureBigSave},
		{"wait", b.measureWait},
	}
	for _, s := range steps {
		if !want(s.name) {
			continue
		}
		b.logf("%s", s.name)
		if err := b.runPhase(ctx, s.fn); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}
