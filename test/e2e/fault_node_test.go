//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// nodeNotReady says whether the node's Ready condition is anything but True.
func nodeNotReady(t *testing.T, name string) bool {
	t.Helper()
	n, err := e.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting node %s: %v", name, err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return true
}

// TestFaultNodeDrop: one node of two drops out under a running session, first its kubelet
// (killed with SIGKILL and left down until the node is NotReady), then, separately, its
// containerd. Meanwhile the replica on the other node keeps taking every save, the one on the
// dropped node is named in an error event with its node and why (once per outage; from the Node's
// Ready condition where the user may read nodes), and when the daemon is back that replica is brought
// to the local tree again: nothing is lost on either side. It kills the local cluster's daemons,
// so, like TestFault, it runs only on hack/localcluster's cluster (LIVESYNC_E2E_LOCALCLUSTER)
// with the cluster lock held while a daemon is down:
//
//	flock -x /tmp/livesync-e2e.lock env E2E_RUN=TestFaultNodeDrop hack/e2e.sh
func TestFaultNodeDrop(t *testing.T) {
	lc, noCluster := localClusterFromEnv(t)
	if lc == nil {
		t.Logf("not run: %s", noCluster) // as TestFault records its cluster faults
		return
	}
	nodes := readyNodes(t)
	ns := namespace(t)
	repo := "nodedrop-" + ns
	pushImage(t, repo, "dev", "app")
	spreadDeployment(t, ns, "web", image(repo, "dev"), 2)
	pods := podsOnNodes(t, ns, "web", 2)
	live, lost := pods[nodes[0]].Name, pods[nodes[1]].Name

	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v0")
	s := newSession(t, ns).Args("deploy/web").Map(local, "/app").Timeout(10 * time.Minute).Start()
	defer s.Stop()
	s.WaitSynced()
	waitConverged(t, ns, "app=web", 2, local, "/app", time.Minute)

	for _, kind := range []string{"kubelet", "containerd"} {
		daemon, err := lc.nodeDaemon(kind, nodes[1])
		if err != nil {
			t.Fatal(err)
		}
		// The documented Role reads no nodes (they are cluster-scoped): the containerd's outage
		// is named from what the pod says. Reading them is optional (docs/rbac.md): the
		// kubelet's outage is named with the Node's own Ready condition, and once more when the
		// node turns NotReady and the pod watch sees the pod go unready.
		nodeRead := kind == "kubelet"
		revoke := func() {}
		if nodeRead {
			revoke = allowNodeRead(t, ns)
		}
		lc.lockCluster(t)
		if err := lc.restart(daemon); err != nil {
			t.Fatalf("before killing %s: %v", daemon, err)
		}
		pid, err := lc.pid(daemon)
		if err != nil {
			t.Fatal(err)
		}
		mark := len(s.Events())
		lc.outage(t, daemon, pid)
		down := time.Now()

		// Saves while the node is out: the live replica takes each one, the lost one is named.
		saves := 0
		for time.Since(down) < 20*time.Second || !nodeNotReady(t, nodes[1]) {
			saves++
			want := fmt.Sprintf("%s down, save %d", kind, saves)
			write(t, filepath.Join(local, "index.html"), want)
			waitFor(t, fmt.Sprintf("save %d in %s", saves, live), time.Minute, func() (bool, error) {
				r := kexec(t, ns, live, "cat", "/app/index.html")
				return r.code == 0 && r.stdout == want, nil
			})
			if time.Since(down) > 3*time.Minute {
				t.Fatalf("%s: node %s still Ready %s after %s was killed", kind, nodes[1], time.Since(down).Round(time.Second), daemon)
			}
		}
		// The lost replica's line names its node and why, once per outage (and once more when
		// an unreachable node turns out NotReady), whatever each retry's dial error says.
		errEv := after(t, s, mark, "an error naming "+lost+" and its node "+nodes[1], func(ev sessiontest.Event) bool {
			return (ev.Type == "error" || ev.Type == "initial-sync") && ev.Error != "" && ev.Target != nil && ev.Target.Pod == lost && ev.Node != ""
		})
		if errEv.Node != nodes[1] || !strings.Contains(errEv.Error, "node "+nodes[1]) ||
			(errEv.Reason != "node-not-ready" && errEv.Reason != "node-unreachable") {
			t.Errorf("%s: the lost replica's error names node %q, reason %q: %s; want node %s and reason node-not-ready or node-unreachable", kind, errEv.Node, errEv.Reason, errEv.Error, nodes[1])
		}
		if fromPod := strings.HasPrefix(errEv.Error, "pod's node "); fromPod == nodeRead {
			t.Errorf("%s: with node read %v, the line is %q: want the Node's condition with it, the pod's node without", kind, nodeRead, errEv.Error)
		}
		if nodeRead && kind == "kubelet" {
			nr := after(t, s, mark, lost+" named with its NotReady node", func(ev sessiontest.Event) bool {
				return ev.Type == "error" && ev.Target != nil && ev.Target.Pod == lost && ev.Reason == "node-not-ready"
			})
			if want := "node " + nodes[1] + " not ready ("; !strings.HasPrefix(nr.Error, want) {
				t.Errorf("%s: the NotReady line is %q, want it to start with %q", kind, nr.Error, want)
			}
		}
		t.Logf("%s: %s down %s, %d saves reached %s on %s; %s named: %s (%s)", kind, daemon, time.Since(down).Round(time.Second), saves, live, nodes[0], lost, errEv.Error, errEv.Reason)

		if err := lc.restart(daemon); err != nil {
			t.Fatalf("restarting %s: %v", daemon, err)
		}
		lc.unlock()
		back := time.Now()
		recovered := after(t, s, mark, lost+" recovered", func(ev sessiontest.Event) bool {
			return ev.Type == "recovered" && ev.Target != nil && ev.Target.Pod == lost
		})
		if recovered.Node != nodes[1] {
			t.Errorf("%s: the recovered event of %s names node %q, want %s (its node is back)", kind, lost, recovered.Node, nodes[1])
		}
		var named []string
		for _, ev := range s.Events()[mark:] {
			if (ev.Type == "error" || ev.Type == "initial-sync") && ev.Error != "" && ev.Target != nil && ev.Target.Pod == lost {
				t.Logf("%s: %s's line: %s (node %q, reason %q)", kind, lost, ev.Error, ev.Node, ev.Reason)
				if ev.Node != "" {
					named = append(named, ev.Reason)
				}
			}
		}
		if len(named) > 2 || len(named) == 2 && (named[0] != "node-unreachable" || named[1] != "node-not-ready") {
			t.Errorf("%s: the node was named %d times in one outage (%v): want once, or unreachable then not ready", kind, len(named), named)
		}
		waitConverged(t, ns, "app=web", 2, local, "/app", 2*time.Minute)
		t.Logf("%s: both replicas hold the local tree %s after %s came back", kind, time.Since(back).Round(100*time.Millisecond), daemon)
		if now := podsOnNodes(t, ns, "web", 2); now[nodes[1]].Name != lost {
			t.Fatalf("%s: the replica on %s is %s now, want %s kept (synced again, not replaced)", kind, nodes[1], now[nodes[1]].Name, lost)
		}
		revoke()
	}
}

// allowNodeRead lets the documented Role's user of ns get nodes, the optional cluster-wide rule
// of docs/rbac.md, until the returned func or the test's end takes it back.
func allowNodeRead(t *testing.T, ns string) (revoke func()) {
	t.Helper()
	ctx := context.Background()
	name := "livesync-nodes-" + ns
	rbac := e.client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	revoke = func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	}
	t.Cleanup(revoke)
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: documentedRole(t).Name, Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return revoke
}
