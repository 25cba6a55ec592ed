//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// readyNodes returns the names of the cluster's Ready nodes, failing the test when there are
// fewer than two: these tests are about replicas on different nodes, which hack/localcluster
// starts (two by default, LIVESYNC_CLUSTER_NODES).
func readyNodes(t *testing.T) []string {
	t.Helper()
	list, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	var ready []string
	for _, n := range list.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && len(n.Spec.Taints) == 0 {
				ready = append(ready, n.Name)
			}
		}
	}
	if len(ready) < 2 {
		t.Fatalf("%d Ready nodes without taints (%v), want two: hack/localcluster/up.sh starts two", len(ready), ready)
	}
	slices.Sort(ready)
	return ready
}

// spreadDeployment creates a Deployment of img with replicas spread over the nodes (a
// ReplicaSet's replicas differ by at most one per node, so that two replicas land on two nodes
// and a scale from one to two puts the second on the other node) and waits until it is available.
func spreadDeployment(t *testing.T, ns, name, img string, replicas int32) {
	t.Helper()
	spec := podSpec(img, corev1.PullIfNotPresent)
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector:  &metav1.LabelSelector{MatchLabels: labelsFor(name)},
		MatchLabelKeys: []string{appsv1.DefaultDeploymentUniqueLabelKey},
	}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: spec},
		},
	}
	if _, err := e.client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s: %v", name, err)
	}
	settle(t, ns, name)
}

// podsOnNodes returns the running pods of app=name by node, failing unless there is exactly one
// on each of the first want nodes.
func podsOnNodes(t *testing.T, ns, name string, want int) map[string]corev1.Pod {
	t.Helper()
	byNode := map[string]corev1.Pod{}
	for _, p := range runningPods(t, ns, "app="+name) {
		if _, dup := byNode[p.Spec.NodeName]; dup {
			t.Fatalf("two pods of %s on node %s", name, p.Spec.NodeName)
		}
		byNode[p.Spec.NodeName] = p
	}
	if len(byNode) != want {
		t.Fatalf("pods of %s on %d nodes (%v), want %d", name, len(byNode), byNode, want)
	}
	return byNode
}

// moveTo puts the Deployment's pods on node (a node selector) and waits until the old ones are gone.
func moveTo(t *testing.T, ns, name, node string) {
	t.Helper()
	d := getDeployment(t, ns, name)
	d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	if _, err := e.client.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("moving %s to %s: %v", name, node, err)
	}
	settle(t, ns, name)
}

// TestAcrossNodes: replicas on two nodes, each behind its own kubelet and containerd. A sync
// reaches both (its streams go through both kubelets), helpers are injected into both, and
// the sync-back source is the replica on either node, a forward and the logs follow the workload from one node to the other, and inspect tells each
// pod's node and how its image got there: after the tag moved, the replica
// on the node that lacked the image pulled the new digest and the other kept the old one, the
// verdict says mixed, and refresh brings both to one digest.
func TestAcrossNodes(t *testing.T) {
	nodes := readyNodes(t)
	t.Logf("nodes: %v", nodes)

	t.Run("sync", func(t *testing.T) {
		ns := namespace(t)
		repo := "nodes-" + ns
		pushImage(t, repo, "dev", "app")
		spreadDeployment(t, ns, "web", image(repo, "dev"), 2)
		podsOnNodes(t, ns, "web", 2)

		local := t.TempDir()
		write(t, filepath.Join(local, "index.html"), "v1")
		write(t, filepath.Join(local, "static/site.css"), "body{}")
		s := newSession(t, ns).Args("deploy/web").Map(local, "/app").Start().WaitSynced()
		defer s.Stop()
		waitConverged(t, ns, "app=web", 2, local, "/app", time.Minute)
		write(t, filepath.Join(local, "index.html"), "v2")
		if err := os.RemoveAll(filepath.Join(local, "static")); err != nil {
			t.Fatal(err)
		}
		waitConverged(t, ns, "app=web", 2, local, "/app", time.Minute)
	})

	t.Run("helpers", func(t *testing.T) {
		ns := namespace(t)
		repo := "nodes-distroless-" + ns
		pushImage(t, repo, "dev", "distroless")
		spreadDeployment(t, ns, "web", image(repo, "dev"), 2)
		pods := podsOnNodes(t, ns, "web", 2)
		hImg := helperImage(t)

		local := t.TempDir()
		write(t, filepath.Join(local, "main.go"), "package main")
		s := newSession(t, ns).Args("deploy/web", "--helper-image", hImg).Map(local, "/app").Start().WaitSynced()
		defer s.Stop()
		for node, p := range pods {
			t.Logf("helper in %s on %s", p.Name, node)
			waitHelperTree(t, ns, p.Name, "livesync-helper-1", local, "/app")
		}
		write(t, filepath.Join(local, "main.go"), "package main // edited")
		for _, p := range pods {
			waitHelperTree(t, ns, p.Name, "livesync-helper-1", local, "/app")
		}
	})

	t.Run("forward-and-logs-follow-a-move", func(t *testing.T) {
		ns := namespace(t)
		webDeployment(t, ns)
		moveTo(t, ns, "web", nodes[0])
		local := t.TempDir()
		write(t, filepath.Join(local, "index.html"), "v1")
		s := newSession(t, ns).Args("deploy/web", "--forward", "0:http", "--logs").Map(local, "/www").Timeout(3 * time.Minute).Start()
		defer s.Stop()
		addr := forwardAddr(s)
		s.WaitSynced()
		p1 := serving(t, s, 0, "")
		served(t, addr, "/index.html", "v1")
		s.WaitMatch("a tick line of "+p1, func(ev sessiontest.Event) bool {
			return ev.Type == "log" && ev.Target != nil && ev.Target.Pod == p1 && strings.HasPrefix(ev.Message, "tick "+p1)
		})

		// The workload moves to the other node: the forward and the logs go through its kubelet.
		mark := len(s.Events())
		moveTo(t, ns, "web", nodes[1])
		p2 := serving(t, s, mark, p1)
		if n := onePod(t, ns, "web"); n.Name != p2 || n.Spec.NodeName != nodes[1] {
			t.Fatalf("after the move the forward serves %s, the running pod is %s on %s, want it on %s", p2, n.Name, n.Spec.NodeName, nodes[1])
		}
		served(t, addr, "/index.html", "v1")
		s.Edit("index.html", "v2")
		served(t, addr, "/index.html", "v2")
		logLine(s, p2, "start "+p2)
		logLine(s, p1, "bye "+p1)
	})

	t.Run("sync-back-source-on-either-node", func(t *testing.T) {
		ns := namespace(t)
		repo := "nodes-back-" + ns
		pushImage(t, repo, "dev", "app")
		spreadDeployment(t, ns, "web", image(repo, "dev"), 2)
		pods := podsOnNodes(t, ns, "web", 2)
		nodeOf := map[string]string{}
		for n, p := range pods {
			nodeOf[p.Name] = n
		}
		local := t.TempDir()
		write(t, filepath.Join(local, "package-lock.json"), "v0")
		s := newSession(t, ns).Args("deploy/web", "--sync-back", "package-lock.json").Map(local, "/app").Start().WaitSynced()
		defer s.Stop()
		waitConverged(t, ns, "app=web", 2, local, "/app", time.Minute)

		// source returns the pod the last target-added or sync-back-source event names as
		// the source, after event mark.
		source := func(mark int) string {
			src := ""
			for _, ev := range s.Events()[mark:] {
				if ev.Target != nil && (ev.Type == "target-added" && ev.SyncBack == "source" || ev.Type == "sync-back-source") {
					src = ev.Target.Pod
				}
			}
			return src
		}
		comesHome := func(pod, content string) {
			t.Helper()
			if r := kexec(t, ns, pod, "sh", "-c", "printf '"+content+"' > /app/package-lock.json"); r.code != 0 {
				t.Fatal(r)
			}
			waitFor(t, "the lockfile from "+pod, time.Minute, func() (bool, error) {
				b, _ := os.ReadFile(filepath.Join(local, "package-lock.json"))
				return string(b) == content, nil
			})
		}
		first := source(0)
		if nodeOf[first] == "" {
			t.Fatalf("the source %q is none of the replicas %v:\n%s", first, nodeOf, s.Dump())
		}
		comesHome(first, "from "+nodeOf[first])

		// The source goes: the replica on the other node takes over.
		mark := len(s.Events())
		if err := e.client.CoreV1().Pods(ns).Delete(context.Background(), first, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		var second string
		waitFor(t, "a new sync-back source", time.Minute, func() (bool, error) {
			second = source(mark)
			return second != "" && second != first, nil
		})
		if nodeOf[second] == "" || nodeOf[second] == nodeOf[first] {
			t.Fatalf("the new source %s is on node %q, want the other replica's (%v)", second, nodeOf[second], nodeOf)
		}
		comesHome(second, "from "+nodeOf[second])
		t.Logf("sync-back from %s on %s, then from %s on %s", first, nodeOf[first], second, nodeOf[second])
		waitConverged(t, ns, "app=web", 2, local, "/app", time.Minute)
	})

	t.Run("inspect", func(t *testing.T) {
		ns := namespace(t)
		repo := "nodes-seed-" + ns
		d1 := pushImage(t, repo, "dev", "app")
		spreadDeployment(t, ns, "web", image(repo, "dev"), 1)
		first := runningPods(t, ns, "app=web")[0]
		d2 := pushImage(t, repo, "dev", "app")

		// The second replica goes to the other node, which has no copy of the image: it
		// pulls what the tag serves now.
		r := run(t, e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "scale", "deployment/web", "--replicas", "2")
		if r.code != 0 {
			t.Fatalf("scaling: %s", r)
		}
		settle(t, ns, "web")
		pods := podsOnNodes(t, ns, "web", 2)
		rep := inspectJSON(t, "-n", ns, "deploy/web")
		c := rep.Containers[0]
		if c.Verdict != "mixed" || c.RegistryDigest != d2 || len(c.Pods) != 2 {
			t.Fatalf("inspect after the scale-up: verdict %q, registry %s, %d pods, want mixed, %s, 2: %+v", c.Verdict, c.RegistryDigest, len(c.Pods), d2, c)
		}
		for _, p := range c.Pods {
			want := d2
			if p.Node == first.Spec.NodeName {
				want = d1
			}
			if pods[p.Node].Name != p.Name || p.Digest != want || p.Pull != "pulled" {
				t.Errorf("pod %s on %s: digest %s, pull %q; want pod %s there, %s, pulled", p.Name, p.Node, p.Digest, p.Pull, pods[p.Node].Name, want)
			}
		}
		text := mustLivesync(t, "-n", ns, "inspect", "deploy/web").stdout
		if !strings.Contains(text, "replicas run different digests") {
			t.Errorf("inspect does not say the replicas run different digests:\n%s", text)
		}

		mustLivesync(t, "-n", ns, "refresh", "deploy/web", "--timeout", "2m")
		settle(t, ns, "web")
		rep = inspectJSON(t, "-n", ns, "deploy/web")
		c = rep.Containers[0]
		if c.Verdict != "pinned" || len(c.Pods) != 2 {
			t.Fatalf("inspect after refresh: verdict %q, %d pods, want pinned, 2: %+v", c.Verdict, len(c.Pods), c)
		}
		for _, p := range c.Pods {
			if p.Digest != d2 {
				t.Errorf("after refresh pod %s on %s runs %s, want %s", p.Name, p.Node, p.Digest, d2)
			}
		}
	})
}
