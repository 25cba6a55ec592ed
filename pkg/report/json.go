// The NDJSON shapes of `livesync -o json`: a contract for editors and scripts (see docs/reference.md).

package report

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
)

// jsonTarget names a container, as every event about one carries it.
type jsonTarget struct {
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	Container   string `json:"container"`
	ContainerID string `json:"containerID,omitempty"`
}

func toJSONTarget(t filesync.Target) *jsonTarget {
	return &jsonTarget{Namespace: t.Namespace, Pod: t.Pod, Container: t.Container, ContainerID: t.ContainerID}
}

// jsonEvent is one NDJSON line; fields not used by a type are omitted.
type jsonEvent struct {
	Type      string         `json:"type"`
	Time      string         `json:"time"`
	Entry     string         `json:"entry,omitempty"`
	Target    *jsonTarget    `json:"target,omitempty"`
	Files     *int           `json:"files,omitempty"`
	Listed    *int           `json:"listed,omitempty"` // progress: paths listed so far
	Hashed    *int           `json:"hashed,omitempty"` // progress: local files read to compare
	Total     *int64         `json:"totalBytes,omitempty"`
	Changed   *int           `json:"changed,omitempty"`
	Deleted   *int           `json:"deleted,omitempty"`
	Names     []string       `json:"names,omitempty"`
	Targets   *int           `json:"targets,omitempty"`
	Failed    *int           `json:"failed,omitempty"`
	Bytes     *int64         `json:"bytes,omitempty"`
	LatencyMs *float64       `json:"latencyMs,omitempty"`
	Duration  *float64       `json:"durationMs,omitempty"`
	Copy      []string       `json:"copy,omitempty"`
	Delete    []string       `json:"delete,omitempty"`
	ExitCode  *int           `json:"exitCode,omitempty"`
	Mode      string         `json:"mode,omitempty"`    // restarted: none, signal:SIG or process
	Crashed   bool           `json:"crashed,omitempty"` // restarted: the replaced process had exited on its own
	Output    *string        `json:"output,omitempty"`
	Error     string         `json:"error,omitempty"`
	Hint      string         `json:"hint,omitempty"`
	Message   string         `json:"message,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	Workload  string         `json:"workload,omitempty"`
	Restarts  *int           `json:"restarts,omitempty"`
	Failures  *int           `json:"failures,omitempty"`
	Transport string         `json:"transport,omitempty"` // target-added, initial-sync: stream or exec
	Helper    *jsonHelper    `json:"helper,omitempty"`
	Remote    string         `json:"remote,omitempty"` // dry-run: the mapping's remote directory
	Preflight *jsonPreflight `json:"preflight,omitempty"`
	// sync-back: the source replica on target-added; synced-back's local
	// paths; conflict's local path and both sides' sha256.
	SyncBack  string   `json:"syncBack,omitempty"`
	Paths     []string `json:"paths,omitempty"`
	Path      string   `json:"path,omitempty"`
	LocalSum  string   `json:"localSha256,omitempty"`
	RemoteSum string   `json:"remoteSha256,omitempty"`
	// forward: the forward, its state, the pod it serves (and served before), why it waits,
	// and how many pod connections the session dialled so far.
	Forward  *jsonForward `json:"forward,omitempty"`
	State    string       `json:"state,omitempty"`
	Pod      string       `json:"pod,omitempty"`
	Previous string       `json:"previous,omitempty"`
	Waiting  string       `json:"waiting,omitempty"`
	Dials    *int64       `json:"dials,omitempty"`
	// log: the runtime's timestamp of the line (the line is in message).
	LogTime string `json:"logTime,omitempty"`
	// ancestor: which saved ancestor a target starts from ("saved",
	// "discarded", "none"; why in reason), and with one what the three-way
	// start decided, paths per decision.
	From    string         `json:"from,omitempty"`
	Decided map[string]int `json:"decided,omitempty"`
	// error, initial-sync, recovered: the node of a replica lost with it (why in reason:
	// node-not-ready, node-unreachable).
	Node string `json:"node,omitempty"`
}

// via says which transport a target's batches use, for the text output.
func via(transport string) string {
	if transport == "" {
		return ""
	}
	return ", via " + transport
}

func ms(d time.Duration) *float64 {
	v := float64(d.Microseconds()) / 1000
	return &v
}

func (r *Printer) writeJSON(w io.Writer, ev jsonEvent) {
	ev.Time = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(ev)
	fmt.Fprintf(w, "%s\n", b)
}
