//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// helperImage pushes the helper image of these tests (busybox: sh, tar, dd) once per test.
func helperImage(t *testing.T) string {
	t.Helper()
	repo := "helper-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	pushImage(t, repo, "dev", "app")
	return image(repo, "dev")
}

// deploymentWith creates a one-replica Deployment of img whose pod spec mutate adjusts, and
// waits until it is available.
func deploymentWith(t *testing.T, ns, name, img string, mutate func(*corev1.PodSpec)) {
	t.Helper()
	spec := podSpec(img, corev1.PullIfNotPresent)
	mutate(&spec)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: spec},
		},
	}
	if _, err := e.client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s: %v", name, err)
	}
	waitDeploymentReady(t, ns, name)
}

// webOf pushes an image of the lcimage kind, runs it as deploy/web (one replica) in a new
// namespace, and returns the namespace and the pod.
func webOf(t *testing.T, kind string) (ns, pod string) {
	t.Helper()
	ns = namespace(t)
	repo := kind + "-" + ns
	pushImage(t, repo, "dev", kind)
	deploymentWith(t, ns, "web", image(repo, "dev"), func(*corev1.PodSpec) {})
	return ns, runningPods(t, ns, "app=web")[0].Name
}

// helperTree reads path, in the helper container name, as a tree: for a distroless target, whose main
// process is PID 1 when the pod shares no process namespace, /proc/1/root/REMOTE.
func helperTree(t *testing.T, ns, pod, helper, path string) tree {
	t.Helper()
	tr, err := remoteTree(ns, pod, helper, path)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// waitHelperTree waits until root in the pod's target, read through helper as /proc/1/root, is local's tree.
func waitHelperTree(t *testing.T, ns, pod, helper, local, root string) {
	t.Helper()
	waitHelperTreeAt(t, ns, pod, helper, local, "/proc/1/root"+root)
}

// waitHelperTreeAt waits until path, read in helper, is local's tree.
func waitHelperTreeAt(t *testing.T, ns, pod, helper, local, path string) {
	t.Helper()
	lt := localTree(t, local)
	last := ""
	waitFor(t, "the tree through "+helper, time.Minute, func() (bool, error) {
		last = lt.diff(helperTree(t, ns, pod, helper, path))
		return last == "", nil
	})
	if last != "" {
		t.Fatalf("not converged: %s", last)
	}
}

// inHelper runs argv in a pod's helper container.
func inHelper(t *testing.T, ns, pod, helper string, argv ...string) result {
	t.Helper()
	r := run(t, e.kubectl, append([]string{"--kubeconfig", e.kubeconfig, "-n", ns, "exec", pod, "-c", helper, "--"}, argv...)...)
	if r.code != 0 {
		t.Fatalf("exec in %s: %s", helper, r)
	}
	return r
}

func ephemeralNames(t *testing.T, ns, pod string) []string {
	t.Helper()
	p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range p.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	return names
}

func helperEvent(t *testing.T, evs []sessiontest.Event) sessiontest.Event {
	t.Helper()
	for _, ev := range evs {
		if ev.Type == "helper" && ev.Helper != nil {
			return ev
		}
	}
	t.Fatalf("no helper event in %d events", len(evs))
	return sessiontest.Event{}
}

// TestHelperDistroless syncs into an image with one static binary and USER 65532 (no sh, no
// tar) through a helper container: initial sync, an edit and a delete, a container restart
// (a new helper and a re-sync), a second run that reuses the live helper, and --helper never,
// which keeps the one-line error. Trees are compared by content hash, read through the helper.
func TestHelperDistroless(t *testing.T) {
	ns, pod := webOf(t, "distroless")
	hImg := helperImage(t)

	local := t.TempDir()
	write(t, filepath.Join(local, "main.go"), "package main")
	write(t, filepath.Join(local, "static/with space.txt"), "x")
	write(t, filepath.Join(local, "static/old.css"), "body{}")

	s := newSession(t, ns).Args("deploy/web", "--helper-image", hImg).Map(local, "/app").Start().WaitSynced()
	ev := s.WaitFor("helper")
	if h := ev.Helper; h.Name != "livesync-helper-1" || h.Reused || h.Profile != "root+SYS_PTRACE" || h.UID != 65532 || !h.SetsOwner || h.PodSecurity != "privileged" {
		t.Fatalf("helper event = %s", ev.Line)
	}
	waitHelperTree(t, ns, pod, "livesync-helper-1", local, "/app")
	if out := inHelper(t, ns, pod, "livesync-helper-1", "stat", "-c", "%u", "/proc/1/root/app/main.go", "/proc/1/root/app/static", "/proc/1/root/app/static/with space.txt").stdout; strings.Count(out, "65532") != 3 {
		t.Errorf("owners of the synced files = %q, want 65532 each", out)
	}

	write(t, filepath.Join(local, "main.go"), "package main // edited")
	if err := os.Remove(filepath.Join(local, "static/old.css")); err != nil {
		t.Fatal(err)
	}
	waitHelperTree(t, ns, pod, "livesync-helper-1", local, "/app")

	// A restart: the helper ends with the target's process namespace; a new one re-syncs the
	// fresh container.
	old := ev.ContainerID()
	inHelper(t, ns, pod, "livesync-helper-1", "kill", "-TERM", "1")
	ev2 := s.WaitMatch("a second helper", func(ev sessiontest.Event) bool {
		return ev.Type == "helper" && ev.ContainerID() != old
	})
	if h := ev2.Helper; h.Name != "livesync-helper-2" || h.Reused {
		t.Fatalf("helper after the restart = %s", ev2.Line)
	}
	s.WaitMatch("the re-sync", func(ev sessiontest.Event) bool {
		return ev.Type == "initial-sync" && ev.ContainerID() == ev2.ContainerID() && ev.Error == ""
	})
	waitHelperTree(t, ns, pod, "livesync-helper-2", local, "/app")
	s.Stop()

	// A second run reuses the live helper.
	r := mustLivesync(t, "-n", ns, "deploy/web", local+":/app", "--helper-image", hImg, "--once", "-o", "json")
	if h := helperEvent(t, sessiontest.ParseEvents(r.stdout)); !h.Helper.Reused || h.Helper.Name != "livesync-helper-2" {
		t.Errorf("second run's helper = %s", h.Line)
	}
	if got := ephemeralNames(t, ns, pod); len(got) != 2 {
		t.Errorf("ephemeral containers = %v, want the two helpers", got)
	}

	// --helper never: today's one-line error, and the hint.
	r = livesync(t, "-n", ns, "deploy/web", local+":/app", "--helper", "never", "--once")
	if r.code == 0 || !strings.Contains(r.stderr, "sh not found") || !strings.Contains(r.stderr, "--helper") {
		t.Errorf("--helper never into distroless: %s", r)
	}
}

// TestHelperRootOwnedDir syncs into a directory of root in a container that runs as uid 1000:
// without a helper it fails with a hint naming --helper ephemeral; with it the files land,
// owned by the container's user.
func TestHelperRootOwnedDir(t *testing.T) {
	ns, pod := webOf(t, "app-nonroot")
	hImg := helperImage(t)
	local := t.TempDir()
	write(t, filepath.Join(local, "sub/a.txt"), "a")

	r := livesync(t, "-n", ns, "deploy/web", local+":/app-root-owned", "--helper", "never", "--once")
	if r.code == 0 || !strings.Contains(r.stderr, "permission denied") || !strings.Contains(r.stderr, "--helper ephemeral") {
		t.Fatalf("--helper never into a root-owned directory: %s", r)
	}
	mustLivesync(t, "-n", ns, "deploy/web", local+":/app-root-owned", "--helper", "ephemeral", "--helper-image", hImg, "--once")
	waitConverged(t, ns, "app=web", 1, local, "/app-root-owned", time.Minute)
	if out := kexec(t, ns, pod, "stat", "-c", "%u:%g", "/app-root-owned/sub", "/app-root-owned/sub/a.txt").stdout; strings.Count(out, "1000:1000") != 2 {
		t.Errorf("owners = %q, want 1000:1000 each", out)
	}
}

// TestHelperPodSecurity runs the helper in namespaces that enforce PodSecurity baseline and
// restricted: both reject a root helper with CAP_SYS_PTRACE, and a helper that runs as the
// container's uid:gid with nothing else reaches its files; without a runAsUser to copy (and no
// user in the container's status), one line says what to set, and nothing is synced.
func TestHelperPodSecurity(t *testing.T) {
	repo := "psa-distroless"
	pushImage(t, repo, "dev", "distroless")
	img := image(repo, "dev")
	hImg := helperImage(t)
	asUser := func(spec *corev1.PodSpec) {
		spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532)}
	}
	restricted := func(uid bool) func(*corev1.PodSpec) {
		return func(spec *corev1.PodSpec) {
			sc := &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			if uid {
				sc.RunAsUser, sc.RunAsGroup = ptr.To[int64](65532), ptr.To[int64](65532)
			}
			spec.Containers[0].SecurityContext = sc
		}
	}
	for _, level := range []string{"baseline", "restricted"} {
		t.Run(level, func(t *testing.T) {
			ns := namespace(t)
			n, err := e.client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n.Labels["pod-security.kubernetes.io/enforce"] = level
			if _, err := e.client.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			withUID, withoutUID := asUser, func(*corev1.PodSpec) {}
			if level == "restricted" {
				withUID, withoutUID = restricted(true), restricted(false)
			}
			deploymentWith(t, ns, "web", img, withUID)
			deploymentWith(t, ns, "nouid", img, withoutUID)
			local := t.TempDir()
			write(t, filepath.Join(local, "a.txt"), level)

			r := mustLivesync(t, "-n", ns, "deploy/web", local+":/app", "--helper-image", hImg, "--once", "-o", "json")
			ev := helperEvent(t, sessiontest.ParseEvents(r.stdout))
			if h := ev.Helper; h.Profile != "same-user" || h.PodSecurity != level || h.UID != 65532 || h.SetsOwner {
				t.Errorf("helper under %s = %s", level, ev.Line)
			}
			pod := runningPods(t, ns, "app=web")[0].Name
			waitHelperTree(t, ns, pod, ev.Helper.Name, local, "/app")

			// Without runAsUser the helper can still run as the container's user when the runtime
			// reports it (status.containerStatuses[].user: containerd 2 does, 1.6 did not);
			// otherwise one line says what to set.
			r = livesync(t, "-n", ns, "deploy/nouid", local+":/app", "--helper-image", hImg, "--once")
			nouid := runningPods(t, ns, "app=nouid")[0]
			if u := nouid.Status.ContainerStatuses[0].User; u != nil && u.Linux != nil {
				if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("as uid %d", u.Linux.UID)) {
					t.Errorf("a helper for a container without runAsUser whose user the runtime reports (uid %d) under %s: %s", u.Linux.UID, level, r)
				}
			} else if r.code == 0 || !strings.Contains(r.stderr, "runAsUser") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 2 {
				t.Errorf("a helper for a container without runAsUser under %s: %s", level, r)
			}
		})
	}
}

// TestHelperNeedsEphemeralContainersRBAC runs as a user bound to docs/rbac.yaml without its
// optional pods/ephemeralcontainers rule: one line names the rule, and the pod is unchanged.
func TestHelperNeedsEphemeralContainersRBAC(t *testing.T) {
	ns, pod := webOf(t, "distroless")
	role := documentedRole(t)
	role.Name = "no-helper"
	var rules []rbacv1.PolicyRule
	for _, rule := range role.Rules {
		if !strings.Contains(strings.Join(rule.Resources, ","), "ephemeralcontainers") {
			rules = append(rules, rule)
		}
	}
	if len(rules) != len(role.Rules)-1 {
		t.Fatalf("docs/rbac.yaml has no pods/ephemeralcontainers rule to leave out: %+v", role.Rules)
	}
	role.Rules = rules
	kubeconfig := roleKubeconfig(t, ns, role)
	local := t.TempDir()
	write(t, filepath.Join(local, "a.txt"), "a")
	r := run(t, e.binary, "--kubeconfig", kubeconfig, "-n", ns, "deploy/web", local+":/app", "--helper-image", helperImage(t), "--once")
	if r.code == 0 || !strings.Contains(r.stderr, `"patch" on "pods/ephemeralcontainers"`) {
		t.Fatalf("without the ephemeralcontainers rule: %s", r)
	}
	if got := ephemeralNames(t, ns, pod); len(got) != 0 {
		t.Errorf("ephemeral containers = %v, want none", got)
	}
}

// TestHelperSharedProcessNamespace syncs through a helper into a pod with shareProcessNamespace: true, where
// the helper sees the pause process and another container's processes beside the target's: the files land in
// the target, and none in the other container. The app image's target (under --helper ephemeral) forks a
// sleep every second, children that come and go with higher PIDs, earlier in glob order than its own: edits
// made after several of them ended still land, so the helper pinned the target's main process.
func TestHelperSharedProcessNamespace(t *testing.T) {
	hImg := helperImage(t)
	for _, tc := range []struct {
		kind string
		args []string
	}{
		{"distroless", nil},
		{"app", []string{"--helper", "ephemeral"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			ns := namespace(t)
			repo, side := tc.kind+"-"+ns, "side-"+ns
			pushImage(t, repo, "dev", tc.kind)
			pushImage(t, side, "dev", "app")
			deploymentWith(t, ns, "web", image(repo, "dev"), func(spec *corev1.PodSpec) {
				spec.ShareProcessNamespace = ptr.To(true)
				// The other container uses up PIDs to 1000 first, so that the target's next children
				// (10xx, 11xx) come before its main process (two digits) in glob order.
				spec.Containers = append(spec.Containers, corev1.Container{Name: "side", Image: image(side, "dev"), ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"/bin/sh", "-c", `i=0; while [ $i -lt 1000 ]; do (:); i=$((i+1)); done; touch /tmp/burnt; trap "exit 0" TERM; while :; do sleep 1; done`}})
			})
			pod := runningPods(t, ns, "app=web")[0]
			waitFor(t, "the other container to use up PIDs", 3*time.Minute, func() (bool, error) {
				r := run(t, e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "exec", pod.Name, "-c", "side", "--", "test", "-e", "/tmp/burnt")
				return r.code == 0, nil
			})
			var id string
			for _, st := range pod.Status.ContainerStatuses {
				if st.Name == "app" {
					_, id, _ = strings.Cut(st.ContainerID, "://")
				}
			}
			local := t.TempDir()
			write(t, filepath.Join(local, "index.html"), "<p>1")
			write(t, filepath.Join(local, "css/site.css"), "body{}")
			s := newSession(t, ns).Args(append([]string{"deploy/web", "--helper-image", hImg}, tc.args...)...).Map(local, "/app").Start().WaitSynced()
			helper := s.WaitFor("helper").Helper.Name

			// The target's processes, as the helper sees them: those whose cgroup names its container ID.
			pids := func() []string {
				r := inHelper(t, ns, pod.Name, helper, "sh", "-c",
					`for d in /proc/[0-9]*; do grep -q "$1" "$d/cgroup" 2>/dev/null && echo "${d#/proc/}"; done; exit 0`, "pids", id)
				return strings.Fields(r.stdout)
			}
			converged := func() {
				t.Helper()
				if tc.kind != "distroless" {
					waitConverged(t, ns, "app=web", 1, local, "/app", time.Minute)
					return
				}
				// Distroless has one process and no sh: read it through the helper.
				p := pids()
				if len(p) != 1 {
					t.Fatalf("processes of the distroless container seen from the helper: %v, want its one", p)
				}
				waitHelperTreeAt(t, ns, pod.Name, helper, local, "/proc/"+p[0]+"/root/app")
			}
			converged()
			if tc.kind != "distroless" {
				seen := map[string]bool{}
				waitFor(t, "two of the target's children to come and go", time.Minute, func() (bool, error) {
					now, gone := pids(), 0
					for p := range seen {
						if !slices.Contains(now, p) {
							gone++
						}
					}
					for _, p := range now {
						seen[p] = true
					}
					return gone >= 2, nil
				})
			}
			write(t, filepath.Join(local, "index.html"), "<p>2")
			write(t, filepath.Join(local, "js/app.js"), "go()")
			converged()
			if tr, err := remoteTree(ns, pod.Name, "side", "/app"); err != nil || len(tr) != 0 {
				t.Errorf("the other container's /app = %v, %v; want it empty", tr, err)
			}
			s.Stop()
		})
	}
}
