//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/livesync-dev/kubectl-livesync/pkg/image/registrytest"
	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// The docs' promises that no other test holds the product to, each on the real cluster.

// TestIgnoreRules: in a real sync, .git/ and editor temp files never reach the container,
// nor what .livesyncignore files and --exclude name, nor .gitignore'd paths with --gitignore
// (and only then).
func TestIgnoreRules(t *testing.T) {
	ns := namespace(t)
	repo := "ignore-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	local := t.TempDir()
	for _, f := range []string{"main.py", "src/app.py", "generated.py", "notes.txt", "docs/notes-1.md"} {
		write(t, filepath.Join(local, f), "kept "+f)
	}
	write(t, filepath.Join(local, ".livesyncignore"), "*.log\nsecret/\n")
	write(t, filepath.Join(local, "src/.livesyncignore"), "generated.py\n")
	write(t, filepath.Join(local, ".gitignore"), "dist/\n")
	// What each rule keeps out; a directory stands for everything in it.
	ignored := map[string]string{
		".git":                "always: .git/",
		".main.py.swp":        "always: vim swap",
		"src/.app.py.swo":     "always: vim's next swap",
		"4913":                "always: vim's probe",
		"#main.py#":           "always: emacs auto-save",
		".#main.py":           "always: emacs lock",
		"main.py___jb_tmp___": "always: JetBrains safe write",
		"main.py___jb_old___": "always: JetBrains safe write",
		"main.py~":            "always: backup",
		"debug.log":           ".livesyncignore: *.log",
		"src/trace.log":       ".livesyncignore: *.log, in a subdirectory",
		"secret":              ".livesyncignore: secret/",
		"src/generated.py":    "src/.livesyncignore",
		"build":               "--exclude build/",
		"notes-2.md":          "--exclude /notes-*.md (anchored: docs/notes-1.md stays)",
		"dist":                ".gitignore with --gitignore",
	}
	createIgnored := func(suffix string) {
		for _, f := range []string{".git/HEAD", ".git/objects/ab/cdef", ".main.py.swp", "src/.app.py.swo", "4913", "#main.py#",
			"main.py___jb_tmp___", "main.py___jb_old___", "main.py~", "debug.log", "src/trace.log", "secret/key",
			"src/generated.py", "build/out.o", "notes-2.md", "dist/bundle.js"} {
			write(t, filepath.Join(local, f), "ignored "+suffix)
		}
		// emacs's lock file is a dangling symlink.
		_ = os.Remove(filepath.Join(local, ".#main.py"))
		if err := os.Symlink("me@host.1234:1700000000", filepath.Join(local, ".#main.py")); err != nil {
			t.Fatal(err)
		}
	}
	createIgnored("at start")
	want := func() tree {
		tr := localTree(t, local)
		for rel := range tr {
			for ig := range ignored {
				if rel == ig || strings.HasPrefix(rel, ig+"/") {
					delete(tr, rel)
				}
			}
		}
		return tr
	}

	s := newSession(t, ns).Args("deploy/web", "--gitignore", "--exclude", "build/", "--exclude", "/notes-*.md").Map(local, "/app").Start()
	waitTree(t, ns, "app=web", 1, want(), "/app", time.Minute)

	t.Run("while watching", func(t *testing.T) {
		// Ignored files written first, kept ones after: a batch carries what came before it,
		// so once the kept changes are in the container, an ignored file that leaked is too.
		createIgnored("while watching")
		write(t, filepath.Join(local, "main.py"), "kept, saved again")
		write(t, filepath.Join(local, "later.txt"), "kept, new")
		waitTree(t, ns, "app=web", 1, want(), "/app", time.Minute)
	})
	s.Stop()

	t.Run("without --gitignore", func(t *testing.T) {
		delete(ignored, "dist")
		mustLivesync(t, "-n", ns, "deploy/web", local+":/app2", "--once", "--exclude", "build/", "--exclude", "/notes-*.md")
		tr := want()
		if _, ok := tr["dist/bundle.js"]; !ok {
			t.Fatalf("the test's tree lacks dist/bundle.js: %v", tr)
		}
		waitTree(t, ns, "app=web", 1, tr, "/app2", time.Minute)
	})
}

// TestContainerChoice: in a two-container pod the sync goes to -c, else to the container the
// kubectl.kubernetes.io/default-container annotation names, else to the first one, with
// kubectl exec's "Defaulted container" message.
func TestContainerChoice(t *testing.T) {
	ns := namespace(t)
	repo := "choice-" + ns
	pushImage(t, repo, "dev", "app")
	spec := podSpec(image(repo, "dev"), corev1.PullIfNotPresent)
	side := spec.Containers[0]
	side.Name = "side"
	spec.Containers = []corev1.Container{side, spec.Containers[0]} // side first, then app
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "two"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor("two")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("two")}, Spec: spec},
		},
	}
	if _, err := e.client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeploymentReady(t, ns, "two")
	local := t.TempDir()
	write(t, filepath.Join(local, "f.txt"), "chosen")
	lt := localTree(t, local)
	const defaulted = `Defaulted container "side" out of: side, app`

	// check syncs into root and says which container got the files and which did not.
	check := func(t *testing.T, root, into, not string, message bool, args ...string) {
		t.Helper()
		r := mustLivesync(t, append([]string{"-n", ns, "deploy/two", local + ":" + root, "--once"}, args...)...)
		if got := strings.Contains(r.stderr, defaulted); got != message {
			t.Errorf("%q on stderr: %v, want %v\n%s", defaulted, got, message, r)
		}
		settle(t, ns, "two")
		pod := runningPods(t, ns, "app=two")[0].Name
		for c, wantTree := range map[string]tree{into: lt, not: {}} {
			rt, err := remoteTree(ns, pod, c, root)
			if err != nil {
				t.Fatal(err)
			}
			if diff := wantTree.diff(rt); diff != "" {
				t.Errorf("container %s, %s:\n%s", c, root, diff)
			}
		}
	}
	t.Run("the first container, with kubectl's message", func(t *testing.T) {
		check(t, "/first", "side", "app", true)
	})
	t.Run("-c", func(t *testing.T) {
		check(t, "/named", "app", "side", false, "-c", "app")
	})
	t.Run("the default-container annotation", func(t *testing.T) {
		patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/default-container":"app"}}}}}`)
		if _, err := e.client.AppsV1().Deployments(ns).Patch(context.Background(), "two", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		settle(t, ns, "two")
		check(t, "/annotated", "app", "side", false)
	})
}

// proc is a kubectl-livesync command running in the background.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr sessiontest.LockedBuffer
	done           chan error
}

// startLivesync starts kubectl-livesync args as the documented Role's user of their namespace.
func startLivesync(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan error, 1)}
	p.cmd = exec.Command(e.binary, append([]string{"--kubeconfig", kubeconfigFor(args)}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	return p
}

func (p *proc) String() string {
	return fmt.Sprintf("stdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())
}

// wait waits for the command to end by itself and expects exit 0.
func (p *proc) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, p)
		}
	case <-time.After(timeout):
		t.Fatalf("did not end within %s\n%s", timeout, p)
	}
}

// interrupt stops the command like Ctrl-C and expects exit 0.
func (p *proc) interrupt(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	p.wait(t, 30*time.Second)
}

// TestRefreshWatch: `refresh --watch` pins each push of the tag, two in a row, and the
// recorded original stays the first image.
func TestRefreshWatch(t *testing.T) {
	ns := namespace(t)
	repo := "rwatch-" + ns
	pushImage(t, repo, "dev", "app")
	img := image(repo, "dev")
	deployment(t, ns, "web", img, 1, corev1.PullIfNotPresent)
	p := startLivesync(t, "-n", ns, "refresh", "deploy/web", "--watch", "--interval", "1s")
	waitFor(t, "refresh --watch to start watching", time.Minute, func() (bool, error) {
		return strings.Contains(p.stdout.String(), "watching the registry"), nil
	})
	for i := range 2 {
		d := pushImage(t, repo, "dev", "app")
		waitFor(t, fmt.Sprintf("push %d pinned", i+1), 2*time.Minute, func() (bool, error) {
			return getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Image == img+"@"+d, nil
		})
		waitFor(t, fmt.Sprintf("push %d rolled out", i+1), 2*time.Minute, func() (bool, error) {
			pods := runningPods(t, ns, "app=web")
			return len(pods) == 1 && len(pods[0].Status.ContainerStatuses) == 1 &&
				strings.HasSuffix(pods[0].Status.ContainerStatuses[0].ImageID, d) && pods[0].Status.ContainerStatuses[0].Ready, nil
		})
	}
	p.interrupt(t)
	if got := getDeployment(t, ns, "web").Annotations[originalAnnotation]; !strings.Contains(got, `"image":"`+img+`"`) {
		t.Errorf("recorded original after two pins = %q, want the first image %s", got, img)
	}
}

// TestParallelBoundsExecs: --parallel N never has more than N execs running at once, and
// reaches N. Each --on-sync (an exec holding its slot) appends start and end marks to one
// file on the node, shared by every pod, and waits for the test's go-ahead in between; the
// order of the lines is the order of the events, so no clock is compared.
func TestParallelBoundsExecs(t *testing.T) {
	const replicas, parallel = 4, 2
	ns := namespace(t)
	repo := "parallel-" + ns
	pushImage(t, repo, "dev", "app")
	spec := podSpec(image(repo, "dev"), corev1.PullIfNotPresent)
	spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/livesync-e2e", Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
	}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	// One node for all replicas, so they share the hostPath directory on any cluster.
	spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: labelsFor("par")},
			TopologyKey:   "kubernetes.io/hostname",
		}},
	}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "par"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor("par")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("par")}, Spec: spec},
		},
	}
	if _, err := e.client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeploymentReady(t, ns, "par")
	settle(t, ns, "par")
	pod := runningPods(t, ns, "app=par")[0].Name
	dir := "/shared/" + ns
	shared := func(script string) result {
		t.Helper()
		r := run(t, e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "exec", pod, "-c", "app", "--", "sh", "-c", script)
		if r.code != 0 {
			t.Fatalf("in %s: %s: %s", pod, script, r)
		}
		return r
	}
	shared("rm -rf " + dir + " && mkdir -p " + dir)
	t.Cleanup(func() {
		_ = run(t, e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "exec", pod, "-c", "app", "--", "rm", "-rf", dir)
	})
	marks := func() []string {
		return strings.Fields(shared("cat " + dir + "/marks 2>/dev/null || true").stdout)
	}

	local := t.TempDir()
	write(t, filepath.Join(local, "f.txt"), "x")
	onSync := fmt.Sprintf(`echo start >> %[1]s/marks; while [ ! -e %[1]s/go ]; do sleep 0.1; done; echo end >> %[1]s/marks`, dir)
	p := startLivesync(t, "-n", ns, "deploy/par", local+":/app", "--once", "--parallel", fmt.Sprint(parallel), "--on-sync", onSync)
	// Every slot is taken once `parallel` on-syncs have started: none of them ends before the
	// go-ahead, so a start beyond that before it would break the bound.
	waitFor(t, fmt.Sprintf("%d on-sync commands running", parallel), 2*time.Minute, func() (bool, error) {
		return strings.Count(strings.Join(marks(), " "), "start") >= parallel, nil
	})
	shared("touch " + dir + "/go")
	p.wait(t, 2*time.Minute)

	running, most, starts, ends := 0, 0, 0, 0
	for _, m := range marks() {
		switch m {
		case "start":
			running++
			starts++
		case "end":
			running--
			ends++
		}
		most = max(most, running)
	}
	if most != parallel || starts != replicas || ends != replicas {
		t.Errorf("--parallel %d with %d containers: at most %d execs at once, %d started, %d ended; want %d, %d, %d\nmarks: %v\n%s",
			parallel, replicas, most, starts, ends, parallel, replicas, replicas, marks(), p)
	}
}

// TestRegistryCredentials: inspect reads a tag from an authenticating registry with the
// credentials of a docker config file, and of a credential helper on PATH; without them it
// reports the registry's 401. (The kubelet never pulls from this registry: the digest the
// registry serves is what is checked.)
func TestRegistryCredentials(t *testing.T) {
	ns := namespace(t)
	repo := "creds-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	pass := fmt.Sprintf("pw-%d", rand.Int64())
	reg := registrytest.NewBasicAuth(t, "e2e", pass)
	digest := reg.PushRandom(t, "private/app:dev")
	patchImage(t, ns, "web", reg.Host+"/private/app:dev")

	helperDir := t.TempDir()
	helperLog := filepath.Join(helperDir, "calls.log")
	helper := fmt.Sprintf("#!/bin/sh\nserver=$(cat)\necho \"$1 $server\" >> %q\n[ \"$1\" = get ] || exit 1\n"+
		"printf '{\"ServerURL\":\"%%s\",\"Username\":\"e2e\",\"Secret\":\"%s\"}\\n' \"$server\"\n", helperLog, pass)
	if err := os.WriteFile(filepath.Join(helperDir, "docker-credential-e2e"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	basic := func(user, pass string) map[string]any {
		return map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))}}}
	}
	tests := []struct {
		name   string
		config map[string]any
		want   string // the registry digest, or a registryError fragment
	}{
		{"no credentials", map[string]any{}, "unauthorized (401)"},
		{"a wrong password", basic("e2e", "wrong"), "unauthorized (401)"},
		{"docker config file", basic("e2e", pass), digest},
		{"credential helper", map[string]any{"credHelpers": map[string]string{reg.Host: "e2e"}}, digest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgDir := t.TempDir()
			raw, err := json.Marshal(tt.config)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), raw, 0o600); err != nil {
				t.Fatal(err)
			}
			// The livesync process finds credentials here and only here.
			t.Setenv("DOCKER_CONFIG", cfgDir)
			t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(cfgDir, "none.json"))
			t.Setenv("PATH", helperDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			_ = os.Remove(helperLog)
			c := inspectJSON(t, "-n", ns, "deploy/web").Containers[0]
			if strings.HasPrefix(tt.want, "sha256:") {
				if c.RegistryDigest != tt.want || c.RegistryError != "" {
					t.Errorf("registryDigest %q, registryError %q; want %s", c.RegistryDigest, c.RegistryError, tt.want)
				}
			} else if c.RegistryDigest != "" || !strings.Contains(c.RegistryError, tt.want) || c.Verdict != "unknown" {
				t.Errorf("registryDigest %q, registryError %q, verdict %q; want an error with %q and verdict unknown", c.RegistryDigest, c.RegistryError, c.Verdict, tt.want)
			}
			calls, _ := os.ReadFile(helperLog)
			if usesHelper := tt.config["credHelpers"] != nil; usesHelper != strings.Contains(string(calls), "get "+reg.Host) {
				t.Errorf("credential helper calls: %q (uses the helper: %v)", calls, usesHelper)
			}
		})
	}
}
