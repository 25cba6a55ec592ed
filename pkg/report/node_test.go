package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
)

// TestNodeLost: the error of a replica lost with its node carries the node and the reason in
// JSON, and the recovered line says the node is back.
func TestNodeLost(t *testing.T) {
	tg := filesync.Target{Namespace: "ns", Pod: "web-2", Container: "app"}
	lost := errors.New("node vm-2 not ready (kubelet stopped posting node status): the other replicas keep syncing; it is synced again when its node is back")
	t.Run("json", func(t *testing.T) {
		var out bytes.Buffer
		r := NewPrinter(&out, &out, true)
		r.Report(filesync.Error{Target: tg, Err: lost, Node: "vm-2", Reason: "node-not-ready"})
		r.Report(filesync.InitialSync{Target: tg, Err: lost, Node: "vm-2", Reason: "node-not-ready"})
		r.Report(filesync.Recovered{Target: tg, Failures: 2, Duration: time.Minute, Node: "vm-2"})
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		for i, want := range []string{"node-not-ready", "node-not-ready", ""} {
			var ev map[string]any
			if err := json.Unmarshal([]byte(lines[i]), &ev); err != nil {
				t.Fatal(err)
			}
			if ev["node"] != "vm-2" || (want != "" && ev["reason"] != want) {
				t.Errorf("line %d = %s, want node vm-2 and reason %q", i, lines[i], want)
			}
		}
	})
	t.Run("text", func(t *testing.T) {
		var out, errOut bytes.Buffer
		r := NewPrinter(&out, &errOut, false)
		r.Report(filesync.Error{Target: tg, Err: lost, Node: "vm-2", Reason: "node-not-ready"})
		r.Report(filesync.Recovered{Target: tg, Failures: 2, Duration: time.Minute, Node: "vm-2"})
		if want := "error: ns/web-2/app: " + lost.Error() + "\n"; errOut.String() != want {
			t.Errorf("error line %q, want %q", errOut.String(), want)
		}
		if want := "recovered: ns/web-2/app is in sync again after 2 failed tries in 1m0s: its node vm-2 is back\n"; out.String() != want {
			t.Errorf("recovered line %q, want %q", out.String(), want)
		}
	})
}
