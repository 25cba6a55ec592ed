package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/forward"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/fakeexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/fakewatch"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/logs"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
	"github.com/livesync-dev/kubectl-livesync/pkg/watch"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// journal records what the fakes were asked, in order, across goroutines.
type journal struct {
	mu    sync.Mutex
	lines []string
	added chan string // each line, as it is recorded
}

func newJournal() *journal { return &journal{added: make(chan string, 256)} }

func (j *journal) add(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	j.mu.Lock()
	j.lines = append(j.lines, line)
	j.mu.Unlock()
	j.added <- line
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.lines)
}

// waitFor returns once a line starting with prefix is recorded, failing the test after 10s.
func (j *journal) waitFor(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l := <-j.added:
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("nothing starting with %q; recorded:\n%s", prefix, strings.Join(j.all(), "\n"))
			return ""
		}
	}
}

// fakeReporter records the session's and the engine's events in a journal.
type fakeReporter struct{ j *journal }

func (r fakeReporter) Report(ev filesync.Event) {
	switch e := ev.(type) {
	case filesync.TargetAdded:
		r.j.add("target-added %s", e.Target)
	case filesync.InitialSync:
		r.j.add("initial-sync %s err=%v", e.Target, e.Err)
	case filesync.Batch:
		r.j.add("batch changed=%d deleted=%d failed=%d", e.Changed, e.Deleted, e.Failed)
	case filesync.Error:
		r.j.add("error %s: %v", e.Target, e.Err)
	case filesync.Waiting:
		r.j.add("waiting %s: %s", e.Workload, e.Message)
	case filesync.Held:
		r.j.add("held %s id=%s", e.Target, e.ID)
	default:
		r.j.add("event %T", ev)
	}
}
func (r fakeReporter) Refreshed(line string)    { r.j.add("refreshed %s", line) }
func (r fakeReporter) Warn(err error)           { r.j.add("warn %v", err) }
func (r fakeReporter) Watching(roots []string)  { r.j.add("watching %d roots", len(roots)) }
func (r fakeReporter) Summary()                 { r.j.add("summary") }
func (r fakeReporter) Forward(ev forward.Event) { r.j.add("forward %s %s", ev.Spec, ev.Text()) }
func (r fakeReporter) Log(l logs.Line)          { r.j.add("log %s/%s %s", l.Pod, l.Container, l.Text) }
func (r fakeReporter) Restarted(ev restart.Event) {
	r.j.add("restarted %s %s err=%v", ev.Target, ev.Mode, ev.Err)
}

// fakeImages records the image-side calls; fail, when set, answers them.
type fakeImages struct {
	j    *journal
	fail func(call string) error
}

func (f *fakeImages) answer(call string) error {
	f.j.add("%s", call)
	if f.fail != nil {
		return f.fail(call)
	}
	return nil
}

func (f *fakeImages) SetPullPolicy(_ context.Context, w *workload.Workload, containers []string, policy string) error {
	return f.answer(fmt.Sprintf("pull-policy %s %s %v", w.Ref(), policy, containers))
}

func (f *fakeImages) Refresh(_ context.Context, w *workload.Workload, containers []string, quiet bool) error {
	return f.answer(fmt.Sprintf("refresh %s %v quiet=%v", w.Ref(), containers, quiet))
}

func (f *fakeImages) Supervise(_ context.Context, w *workload.Workload, containers []string) error {
	return f.answer(fmt.Sprintf("supervise %s %v", w.Ref(), containers))
}

// recordingExecutor notes each exec in the journal before the real one runs it.
type recordingExecutor struct {
	filesync.Executor
	j *journal
}

func (r recordingExecutor) Exec(ctx context.Context, t filesync.Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	r.j.add("exec %s", t.Pod)
	return r.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// webDeployment is deployment ns/web, selecting app=web, with one container "app".
func webDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry/web:dev"}}}},
		},
	}
}

// runningPod is a pod of webDeployment whose container "app" runs.
func runningPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", ContainerID: "containerd://" + name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}},
	}
}

// fixture is a session over webDeployment: a local root mapped to /app, pods in a fake
// clientset, the real remote scripts run by a LocalExecutor that puts each pod's /app
// under sandbox/POD, and a FakeWatcher.
type fixture struct {
	j       *journal
	local   string
	sandbox string
	images  *fakeImages
	watcher *fakewatch.Watcher
	cfg     Config
	deps    Deps
}

func newFixture(t *testing.T, pods ...runtime.Object) *fixture {
	t.Helper()
	j := newJournal()
	f := &fixture{j: j, local: t.TempDir(), sandbox: t.TempDir(), images: &fakeImages{j: j}, watcher: fakewatch.New()}
	writeFile(t, filepath.Join(f.local, "index.html"), "v1")
	f.cfg = Config{Sync: filesync.Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(f.local), Remote: "/app"}},
		Quiet: time.Millisecond, Cap: 10 * time.Millisecond}}
	ex := sandboxExecutor{dir: f.sandbox}
	f.deps = Deps{
		Resolve: func() (*workload.Workload, error) {
			j.add("resolve")
			return workload.FromObject(webDeployment())
		},
		Client:     fake.NewClientset(pods...),
		Executor:   recordingExecutor{Executor: ex, j: j},
		NewWatcher: func([]string, watch.Options) (watch.Watcher, error) { return f.watcher, nil },
		Images:     f.images,
		Reporter:   fakeReporter{j},
		Notes:      io.Discard,
	}
	return f
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readRemote(t *testing.T, f *fixture, pod, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.sandbox, pod, "app", rel))
	if err != nil {
		t.Fatalf("pod %s: %v", pod, err)
	}
	return string(b)
}

// TestRunOnce: --once syncs every running container and says why when it could not.
func TestRunOnce(t *testing.T) {
	t.Run("converged", func(t *testing.T) {
		f := newFixture(t, runningPod("web-1"), runningPod("web-2"))
		f.cfg.Once = true
		if err := Run(context.Background(), f.cfg, f.deps); err != nil {
			t.Fatal(err)
		}
		for _, pod := range []string{"web-1", "web-2"} {
			if got := readRemote(t, f, pod, "index.html"); got != "v1" {
				t.Errorf("pod %s: index.html is %q, want v1", pod, got)
			}
		}
		if l := f.j.all(); l[len(l)-1] != "summary" {
			t.Errorf("the session did not end with its summary:\n%s", strings.Join(l, "\n"))
		}
	})
	t.Run("not converged", func(t *testing.T) {
		f := newFixture(t, runningPod("web-1"))
		f.cfg.Once = true
		f.deps.Executor = &fakeexec.Executor{Respond: func(fakeexec.Call) fakeexec.Response {
			return fakeexec.Response{Stderr: "livesync: tar not found\n", Err: exitError(127)}
		}}
		err := Run(context.Background(), f.cfg, f.deps)
		if want := "not every container of deployment/web converged; see the errors above"; err == nil || err.Error() != want {
			t.Errorf("error = %v, want %q", err, want)
		}
		f.j.waitFor(t, "initial-sync ns/web-1/app err=")
	})
	t.Run("no running pod", func(t *testing.T) {
		f := newFixture(t)
		f.cfg.Once = true
		err := Run(context.Background(), f.cfg, f.deps)
		if want := `deployment/web has no running pod with container "app" to sync into`; err == nil || err.Error() != want {
			t.Errorf("error = %v, want %q", err, want)
		}
	})
	t.Run("no pod selected by -l", func(t *testing.T) {
		f := newFixture(t)
		f.cfg.Once = true
		f.deps.Resolve = func() (*workload.Workload, error) {
			return workload.ForSelector("ns", labels.SelectorFromSet(labels.Set{"app": "web"})), nil
		}
		err := Run(context.Background(), f.cfg, f.deps)
		if want := "pods/app=web has no running pod to sync into"; err == nil || err.Error() != want {
			t.Errorf("error = %v, want %q", err, want)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		f := newFixture(t, runningPod("web-1"))
		f.cfg.Sync.DryRun = true
		if err := Run(context.Background(), f.cfg, f.deps); err != nil {
			t.Fatal(err)
		}
		f.j.waitFor(t, "event filesync.DryRun")
		if _, err := os.Stat(filepath.Join(f.sandbox, "web-1", "app", "index.html")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a dry run wrote into the container: %v", err)
		}
	})
}

// exitError is a remote command's exit status, as the pod executor returns it.
type exitError int

func (e exitError) Error() string   { return fmt.Sprintf("command terminated with exit code %d", int(e)) }
func (e exitError) ExitStatus() int { return int(e) }

// TestRunImagesBeforeSync: --pull-policy, then a fresh read of the workload, then --refresh,
// all before the first exec; a failure there ends the session before anything is synced.
func TestRunImagesBeforeSync(t *testing.T) {
	f := newFixture(t, runningPod("web-1"))
	f.cfg.Once, f.cfg.PullPolicy, f.cfg.Refresh = true, "Always", true
	if err := Run(context.Background(), f.cfg, f.deps); err != nil {
		t.Fatal(err)
	}
	want := []string{"resolve", "pull-policy deployment/web Always [app]", "resolve", "refresh deployment/web [app] quiet=false"}
	if got := f.j.all(); len(got) < len(want)+1 || !slices.Equal(got[:len(want)], want) || !strings.HasPrefix(got[len(want)], "target-added ") {
		t.Errorf("calls:\n%s\nwant them to start with\n%s\nthen the sync", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, failing := range []string{"pull-policy", "refresh"} {
		t.Run(failing+" fails", func(t *testing.T) {
			f := newFixture(t, runningPod("web-1"))
			f.cfg.Once, f.cfg.PullPolicy, f.cfg.Refresh = true, "Always", true
			boom := errors.New("boom")
			f.images.fail = func(call string) error {
				if strings.HasPrefix(call, failing) {
					return boom
				}
				return nil
			}
			if err := Run(context.Background(), f.cfg, f.deps); !errors.Is(err, boom) {
				t.Errorf("error = %v, want %v", err, boom)
			}
			for _, l := range f.j.all() {
				if strings.HasPrefix(l, "exec ") || strings.HasPrefix(l, "target-added") {
					t.Errorf("synced after the %s failed: %s", failing, l)
				}
			}
		})
	}
}

// TestRunRestartProcess: --restart process rolls the supervisor out before the sync, and asks
// each container to restart after its initial sync and after each batch; a container that
// runs no supervisor (here: the real restart.sh on this machine finds none) is said once.
func TestRunRestartProcess(t *testing.T) {
	t.Setenv("LIVESYNC_STATE_DIRS", t.TempDir())
	f := newFixture(t, runningPod("web-1"))
	f.cfg.Refresh, f.cfg.Restart = true, restart.Mode{Kind: restart.Process}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, f.cfg, f.deps) }()
	f.j.waitFor(t, "watching 1 roots")
	f.j.waitFor(t, "restarted ns/web-1/app process err=the container does not run the livesync supervisor")
	writeFile(t, filepath.Join(f.local, "index.html"), "v2")
	if !f.watcher.Send(watch.Event{Root: f.local, Path: filepath.Join(f.local, "index.html")}) {
		t.Fatal("the session does not read the watcher")
	}
	f.j.waitFor(t, "batch changed=1 deleted=0 failed=0")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"resolve", "refresh deployment/web [app] quiet=false", "resolve", "supervise deployment/web [app]"}
	got := f.j.all()
	if !slices.Equal(got[:len(want)], want) {
		t.Errorf("calls:\n%s\nwant them to start with\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	n := 0
	for _, l := range got {
		if strings.HasPrefix(l, "restarted ") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d restart events, want the one refusal:\n%s", n, strings.Join(got, "\n"))
	}
}

// TestRunWatches: a saved file goes from the watcher through the engine into every running
// container; Ctrl-C ends the session without an error, after its summary.
func TestRunWatches(t *testing.T) {
	f := newFixture(t, runningPod("web-1"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, f.cfg, f.deps) }()
	f.j.waitFor(t, "watching 1 roots")
	f.j.waitFor(t, "initial-sync ns/web-1/app err=<nil>")
	writeFile(t, filepath.Join(f.local, "index.html"), "v2")
	if !f.watcher.Send(watch.Event{Root: f.local, Path: filepath.Join(f.local, "index.html")}) {
		t.Fatal("the session does not read the watcher")
	}
	f.j.waitFor(t, "batch changed=1 deleted=0 failed=0")
	if got := readRemote(t, f, "web-1", "index.html"); got != "v2" {
		t.Errorf("index.html is %q, want v2", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Ctrl-C ended the session with %v", err)
	}
	if l := f.j.all(); l[len(l)-1] != "summary" {
		t.Errorf("the session did not end with its summary:\n%s", strings.Join(l, "\n"))
	}
	if !f.watcher.Closed() {
		t.Error("the watcher was left open")
	}
}

// TestRunReleasesHeldDeletes: an ID on Deps.Releases (the user's yes) lets the held mass delete
// through in the session's engine.
func TestRunReleasesHeldDeletes(t *testing.T) {
	f := newFixture(t, runningPod("web-1"))
	if err := os.Mkdir(filepath.Join(f.local, "gen"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		writeFile(t, filepath.Join(f.local, "gen", fmt.Sprint(i)), "g")
	}
	releases := make(chan string, 1)
	f.deps.Releases = releases
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, f.cfg, f.deps) }()
	f.j.waitFor(t, "initial-sync ns/web-1/app err=<nil>")
	if err := os.RemoveAll(filepath.Join(f.local, "gen")); err != nil {
		t.Fatal(err)
	}
	f.watcher.Send(watch.Event{Root: f.local, Path: filepath.Join(f.local, "gen")})
	_, id, _ := strings.Cut(f.j.waitFor(t, "held ns/web-1/app"), "id=")
	if id == "" {
		t.Fatal("the held mass delete has no ID")
	}
	if _, err := os.Stat(filepath.Join(f.sandbox, "web-1", "app", "gen", "0")); err != nil {
		t.Fatalf("held, yet deleted: %v", err)
	}
	releases <- id
	f.j.waitFor(t, "batch changed=0 deleted=1 failed=0")
	if _, err := os.Stat(filepath.Join(f.sandbox, "web-1", "app", "gen")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("released, yet kept: %v", err)
	}
	if got := readRemote(t, f, "web-1", "index.html"); got != "v1" {
		t.Errorf("index.html is %q", got)
	}
	releases <- id // answered twice: nothing is held any more, and the session says so
	f.j.waitFor(t, "warn no container holds those deletes any more")
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// sandboxExecutor runs the real remote scripts on this machine, each pod's files under dir/POD.
type sandboxExecutor struct {
	localexec.Runner
	dir string
}

func (s sandboxExecutor) Exec(ctx context.Context, t filesync.Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return s.Run(ctx, localexec.Sandboxed(argv, filepath.Join(s.dir, t.Pod)), stdin, stdout, stderr)
}

// TestRunForwardAndLogs: the forward's port is bound before the workload changes (a busy port
// fails the session with nothing changed), it serves a pod only once that pod's initial sync
// converged, and the log follower shows the synced container's lines.
func TestRunForwardAndLogs(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	f := newFixture(t, readyPod("web-1"))
	f.cfg.PullPolicy = "Always"
	f.cfg.Forward = []forward.Spec{{Local: busy.Addr().(*net.TCPAddr).Port, Remote: "80"}}
	if err := Run(context.Background(), f.cfg, f.deps); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Run with a busy port = %v", err)
	}
	for _, l := range f.j.all() {
		if strings.HasPrefix(l, "pull-policy") {
			t.Fatalf("the workload changed before the forward failed: %s", l)
		}
	}

	f = newFixture(t, readyPod("web-1"))
	f.cfg.Forward = []forward.Spec{{Local: 0, Remote: "80"}}
	f.cfg.Logs, f.cfg.LogsConfig = true, logs.Config{Tail: 10}
	f.deps.Logs = fakeLogs{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Run(ctx, f.cfg, f.deps) }()
	serving := f.j.waitFor(t, "forward 0:80 serving web-1")
	if !slices.Contains(f.j.all(), "log web-1/app hello") {
		f.j.waitFor(t, "log web-1/app hello")
	}
	all := f.j.all()
	synced := slices.IndexFunc(all, func(l string) bool { return strings.HasPrefix(l, "initial-sync ns/web-1/app") })
	if synced < 0 || synced > slices.Index(all, serving) || slices.Index(all, "forward 0:80 listening") != 1 {
		t.Errorf("events:\n%s\nwant: resolve, listening, ..., initial-sync, ..., serving", strings.Join(all, "\n"))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// readyPod is runningPod, Ready.
func readyPod(name string) *corev1.Pod {
	p := runningPod(name)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return p
}

// fakeLogs answers every log request with one line, then ends.
type fakeLogs struct{}

func (fakeLogs) Open(ctx context.Context, ns, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	if opts.SinceTime != nil {
		<-ctx.Done() // resumed: nothing new
		return nil, ctx.Err()
	}
	return io.NopCloser(strings.NewReader("2026-12-04T18:00:00Z hello\n")), nil
}
