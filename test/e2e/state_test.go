//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// TestStateRestart: a session saves its ancestor, and the next one of the same sync starts
// three-way from it when the container is the same one: what the user deleted and edited while
// no session ran reaches the container, and what the container wrote under a listed path comes
// home, also where the user had deleted the file (a change wins over a delete); nothing is
// reported as a conflict. After a container restart the saved ancestor is another container's:
// the local side wins, and the image's copy of a listed file (older than the container) never
// comes home.
func TestStateRestart(t *testing.T) {
	ns := namespace(t)
	repo := "state-" + ns
	pushImage(t, repo, "dev", "app")
	// Every incarnation starts with the image's copy of a listed file, older than itself.
	deploymentWith(t, ns, "web", image(repo, "dev"), func(s *corev1.PodSpec) {
		s.Containers[0].Command = []string{"/bin/sh", "-c", `mkdir -p /app/gen && printf 'image version' > /app/gen/lock.json && touch -d @1000000000 /app/gen/lock.json; trap "exit 0" TERM; while :; do sleep 1; done`}
	})
	local := t.TempDir()
	for name, content := range map[string]string{
		"keep.txt": "keep", "edit.txt": "v1", "del.txt": "d", "src/old/a.py": "a", "src/main.py": "m",
		"gen/lock.json": "v1", "gen/theirs.txt": "t1",
	} {
		write(t, filepath.Join(local, name), content)
	}
	state := t.TempDir()
	const sel, root = "app=web", "/app"
	pod := runningPods(t, ns, sel)[0].Name
	session := func() (*sessiontest.Session, sessiontest.Event) {
		s := newSession(t, ns).StateDir(state).Args("deploy/web", "--sync-back", "gen/**").Map(local, root).Start().WaitSynced()
		ev := s.WaitMatch("the ancestor event", func(ev sessiontest.Event) bool { return ev.Type == "ancestor" })
		return s, ev
	}
	remoteFile := func(name string) (string, bool) {
		r := kexec(t, ns, pod, "cat", "/app/"+name)
		return r.stdout, r.code == 0
	}
	localFile := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(local, name))
		return string(b)
	}
	noConflicts := func(s *sessiontest.Session) {
		for _, ev := range s.Events() {
			if ev.Type == "conflict" {
				t.Errorf("conflict %+v\n%s", ev, s.Dump())
			}
		}
	}

	// A first session: nothing saved; the image's copy is replaced by the local one.
	s, ev := session()
	if ev.From != "none" {
		t.Fatalf("first start from %q (%s)", ev.From, ev.Reason)
	}
	waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)
	s.Stop()
	if files, _ := filepath.Glob(filepath.Join(state, "kubectl-livesync", "*.state")); len(files) != 1 {
		t.Fatalf("state files after the first session: %v", files)
	}

	// While no session runs, both sides change.
	for _, name := range []string{"del.txt", "src/old", "gen/theirs.txt"} {
		if err := os.RemoveAll(filepath.Join(local, name)); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(local, "edit.txt"), "v2, edited while stopped")
	if r := kexec(t, ns, pod, "sh", "-c", "printf 'container v2' > /app/gen/lock.json && printf 'theirs v2' > /app/gen/theirs.txt"); r.code != 0 {
		t.Fatal(r)
	}

	// A dry run says what the start would decide, and changes nothing.
	dry := newSession(t, ns).StateDir(state).Args("deploy/web", "--sync-back", "gen/**", "--dry-run").Map(local, root).Start()
	dev := dry.WaitMatch("the dry run's ancestor event", func(ev sessiontest.Event) bool { return ev.Type == "ancestor" })
	if dev.From != "saved" || dev.Decided["delete"] < 2 || dev.Decided["back"] != 1 {
		t.Errorf("dry run: %s", dev.Line)
	}
	dry.WaitFor("initial-sync")
	dry.Stop()
	if _, ok := remoteFile("del.txt"); !ok {
		t.Fatal("the dry run deleted del.txt")
	}

	// The same container: a three-way start.
	s, ev = session()
	if ev.From != "saved" || ev.Decided["send"] != 1 || ev.Decided["delete"] < 2 || ev.Decided["back"] != 1 || ev.Decided["theirs"] != 1 {
		t.Fatalf("second start: %s\n%s", ev.Line, s.Dump())
	}
	waitFor(t, "the container's writes at home", time.Minute, func() (bool, error) {
		return localFile("gen/lock.json") == "container v2" && localFile("gen/theirs.txt") == "theirs v2", nil
	})
	for _, name := range []string{"del.txt", "src/old/a.py"} {
		if _, ok := remoteFile(name); ok {
			t.Errorf("%s, deleted while stopped, is still in the container", name)
		}
	}
	if got, _ := remoteFile("edit.txt"); got != "v2, edited while stopped" {
		t.Errorf("edit.txt in the container: %q", got)
	}
	waitConverged(t, ns, sel, 1, local, root, time.Minute)
	noConflicts(s)
	s.Stop()

	// A container restart between sessions: another incarnation, the local side wins.
	p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := p.Status.ContainerStatuses[0].RestartCount
	kexec(t, ns, pod, "sh", "-c", "kill 1")
	waitFor(t, "the container to restart", 2*time.Minute, func() (bool, error) {
		p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := p.Status.ContainerStatuses[0]
		return st.RestartCount > before && st.State.Running != nil, nil
	})
	s, ev = session()
	if ev.From != "discarded" {
		t.Fatalf("start after a restart: %s", ev.Line)
	}
	waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)
	if got := localFile("gen/lock.json"); got != "container v2" {
		t.Errorf("the image's copy came home: local gen/lock.json %q", got)
	}
	if got, _ := remoteFile("gen/lock.json"); got != "container v2" {
		t.Errorf("container gen/lock.json %q, want the local one", got)
	}
	noConflicts(s)
	s.Stop()
}

// TestStateAnotherKeyBetween: a session of another sync (here: without --sync-back) that wrote
// into the same container makes the first sync's saved ancestor older than what both sides
// agreed on last; the first sync's next start does not use it. With it, a local revert made
// after the other session was undone: the other session's upload looked like a container edit
// of a listed file and came home.
func TestStateAnotherKeyBetween(t *testing.T) {
	ns := namespace(t)
	repo := "state-key-" + ns
	pushImage(t, repo, "dev", "app")
	deploymentWith(t, ns, "web", image(repo, "dev"), func(*corev1.PodSpec) {})
	local := t.TempDir()
	write(t, filepath.Join(local, "gen/f.txt"), "v0")
	write(t, filepath.Join(local, "keep.txt"), "keep")
	state := t.TempDir()
	const sel, root = "app=web", "/app"
	pod := runningPods(t, ns, sel)[0].Name
	withBack := func() (*sessiontest.Session, sessiontest.Event) {
		s := newSession(t, ns).StateDir(state).Args("deploy/web", "--sync-back", "gen/**").Map(local, root).Start().WaitSynced()
		return s, s.WaitMatch("the ancestor event", func(ev sessiontest.Event) bool { return ev.Type == "ancestor" })
	}
	remoteFile := func(name string) string {
		r := kexec(t, ns, pod, "cat", "/app/"+name)
		return r.stdout
	}

	a, _ := withBack()
	waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)
	a.Stop()

	// Another sync of the same container: a local edit goes up, and the session ends.
	b := newSession(t, ns).StateDir(state).Args("deploy/web").Map(local, root).Start().WaitSynced()
	write(t, filepath.Join(local, "gen/f.txt"), "v1")
	waitFor(t, "the edit in the container", time.Minute, func() (bool, error) { return remoteFile("gen/f.txt") == "v1", nil })
	b.Stop()

	// The user reverts the edit while no session runs.
	write(t, filepath.Join(local, "gen/f.txt"), "v0")

	a, ev := withBack()
	if ev.From == "saved" {
		t.Fatalf("the first sync started from an ancestor older than the other session's writes: %s", ev.Line)
	}
	if _, err := a.Settle(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "gen/f.txt")); string(b) != "v0" {
		t.Fatalf("the local revert was undone: gen/f.txt %q\n%s", b, a.Dump())
	}
	a.Stop()
}
