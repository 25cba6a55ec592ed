//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// hashApp serves (in /tmp/served) the sha256 of its source file as it loaded it, at start and
// on each SIGHUP; a source that reads "crash:POD" makes pod POD exit with status 3 on reload.
const hashApp = `load() {
  if grep -qx "crash:$HOSTNAME" /app/src/app.conf 2>/dev/null; then echo "$HOSTNAME: bad source, exiting"; exit 3; fi
  sum=$(sha256sum /app/src/app.conf 2>/dev/null | cut -d' ' -f1)
  printf '%s\n' "$sum" >/tmp/served.new && mv /tmp/served.new /tmp/served
  echo "loaded ${sum:-nothing}"
}
trap load HUP
load
while :; do sleep 1 & wait $!; done`

// receiptEdits is how many edits TestReceipts makes: LIVESYNC_RECEIPTS_EDITS, else 200, the
// count the receipts promise is held to (about 7.5 minutes on a busy two-core machine: each edit
// is a wait and three execs; 40 run it in two).
func receiptEdits(t *testing.T) int {
	if v := os.Getenv("LIVESYNC_RECEIPTS_EDITS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LIVESYNC_RECEIPTS_EDITS=%q: want a positive number", v)
		}
		return n
	}
	return 200
}

// TestReceipts: three replicas of an app that serves the sha256 of its source and reloads on
// SIGHUP, a scripted client that edits the source at random 0-500 ms gaps and after each edit
// runs wait --for=restarted, then reads the hash every replica serves: every read matches the
// local file. Then an edit one replica does not survive: wait fails within its timeout naming
// that pod.
func TestReceipts(t *testing.T) {
	ns := namespace(t)
	repo := "receipts-" + ns
	pushImage(t, repo, "dev", "app")
	spec := podSpec(image(repo, "dev"), corev1.PullIfNotPresent)
	spec.Containers[0].Command = []string{"/bin/sh", "-c", hashApp}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hashes", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor("hashes")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("hashes")}, Spec: spec},
		},
	}
	if _, err := e.client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment: %v", err)
	}
	settle(t, ns, "hashes")
	var pods []string
	for _, p := range runningPods(t, ns, "app=hashes") {
		pods = append(pods, p.Name)
	}

	local, state := t.TempDir(), t.TempDir()
	write(t, filepath.Join(local, "app.conf"), "v0\n")
	s := newSession(t, ns).StateDir(state).Args("deploy/hashes", "--restart", "signal:HUP").Map(local, "/app/src").Timeout(3 * time.Minute).Start()
	defer s.Stop()
	s.WaitSynced()
	wait := func(args ...string) (result, time.Duration) {
		cmd := exec.Command(e.binary, append([]string{"wait"}, args...)...)
		cmd.Dir, cmd.Env = local, append(os.Environ(), "XDG_STATE_HOME="+state)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		start := time.Now()
		err := cmd.Run()
		r := result{stdout: out.String(), stderr: errb.String()}
		var ee *exec.ExitError
		if asExit(err, &ee) {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("running wait: %v", err)
		}
		return r, time.Since(start)
	}

	t.Run("every read after wait matches", func(t *testing.T) {
		edits := receiptEdits(t)
		var took []time.Duration
		reads, matched := 0, 0
		for i := range edits {
			gap := time.Duration(rand.IntN(501)) * time.Millisecond
			<-time.After(gap) // the client's think time: real time passes between edits
			content := fmt.Sprintf("edit %d %d\n", i, rand.Int64())
			write(t, filepath.Join(local, "app.conf"), content)
			r, d := wait("--for=restarted", "--timeout", "60s")
			if r.code != 0 {
				t.Fatalf("edit %d: wait: %s\nsession:\n%s", i, r, s.Dump())
			}
			if i == 0 {
				t.Logf("wait: %s", strings.TrimSpace(r.stdout))
			}
			took = append(took, d)
			sum := sha256.Sum256([]byte(content))
			want := hex.EncodeToString(sum[:])
			for pod, got := range servedHashes(ns, pods) {
				reads++
				if got == want {
					matched++
				} else {
					t.Errorf("edit %d: %s serves %q, want %s (wait said: %s)", i, pod, got, want, strings.TrimSpace(r.stdout))
				}
			}
		}
		slices.Sort(took)
		t.Logf("%d edits, %d/%d reads match the local file; wait --for=restarted took p50 %s, p95 %s, max %s", edits, matched, reads,
			took[len(took)/2].Round(time.Millisecond), took[(len(took)*95+99)/100-1].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	})

	t.Run("an MCP client lists the tools and completes a wait", func(t *testing.T) {
		write(t, filepath.Join(local, "app.conf"), "over mcp\n")
		answers := mcpSession(t, local, state,
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wait","arguments":{"for":"restarted","timeoutSeconds":60}}}`)
		var list struct {
			Result struct{ Tools []struct{ Name string } }
		}
		if err := json.Unmarshal(answers[2], &list); err != nil {
			t.Fatalf("tools/list: %v: %s", err, answers[2])
		}
		var names []string
		for _, tool := range list.Result.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		if strings.Join(names, " ") != "inspect logs status wait" {
			t.Errorf("tools %v", names)
		}
		var call struct {
			Result struct {
				IsError           bool
				StructuredContent struct {
					OK      bool
					Summary string
				}
			}
		}
		if err := json.Unmarshal(answers[3], &call); err != nil || call.Result.IsError || !call.Result.StructuredContent.OK {
			t.Fatalf("wait over mcp: %v: %s", err, answers[3])
		}
		t.Logf("wait over mcp: %s", call.Result.StructuredContent.Summary)
		sum := sha256.Sum256([]byte("over mcp\n"))
		for pod, got := range servedHashes(ns, pods) {
			if got != hex.EncodeToString(sum[:]) {
				t.Errorf("after the wait over mcp, %s serves %q", pod, got)
			}
		}
	})

	t.Run("a replica that exits on reload is named", func(t *testing.T) {
		victim := pods[0]
		write(t, filepath.Join(local, "app.conf"), "crash:"+victim+"\n")
		const timeout = 20 * time.Second
		r, d := wait("--for=restarted", "--timeout", timeout.String())
		t.Logf("wait after %s: %s", d.Round(time.Millisecond), r)
		if r.code != 1 || !strings.Contains(r.stderr, victim) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("want exit 1 and one line naming %s: %s", victim, r)
		}
		for _, p := range pods[1:] {
			if strings.Contains(r.stderr, p) {
				t.Errorf("%s, which reloaded, is named too: %s", p, r.stderr)
			}
		}
		// The wait's own bound, the answer's read of the pod and its last lines, and a
		// process start on a busy machine.
		if d > timeout+15*time.Second {
			t.Errorf("wait took %s, with --timeout %s", d, timeout)
		}
	})
}

// mcpSession runs `kubectl livesync mcp` in dir, sends it the JSON-RPC lines one by one, and
// returns its answers by request id, each read before the next request goes.
func mcpSession(t *testing.T, dir, state string, lines ...string) map[int]json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.binary, "mcp")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "XDG_STATE_HOME="+state)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	answers := map[int]json.RawMessage{}
	for _, l := range lines {
		if _, err := io.WriteString(in, l+"\n"); err != nil {
			t.Fatalf("sending %s: %v (stderr: %s)", l, err, errb.String())
		}
		var req struct{ ID *int }
		_ = json.Unmarshal([]byte(l), &req)
		for req.ID != nil {
			if !sc.Scan() {
				t.Fatalf("no answer to %s (stderr: %s)", l, errb.String())
			}
			var resp struct{ ID *int }
			if json.Unmarshal(sc.Bytes(), &resp) == nil && resp.ID != nil && *resp.ID == *req.ID {
				answers[*req.ID] = append(json.RawMessage(nil), sc.Bytes()...)
				break
			}
		}
	}
	_ = in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("mcp ended with %v: %s", err, errb.String())
	}
	return answers
}

// servedHashes reads the hash each pod's app serves, all pods at once.
func servedHashes(ns string, pods []string) map[string]string {
	out := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := exec.CommandContext(ctx, e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "exec", p, "-c", "app", "--", "cat", "/tmp/served").CombinedOutput()
			got := strings.TrimSpace(string(b))
			if err != nil {
				got = fmt.Sprintf("(reading: %v: %s)", err, got)
			}
			mu.Lock()
			out[p] = got
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
