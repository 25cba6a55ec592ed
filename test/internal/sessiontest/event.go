package sessiontest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Event is one NDJSON line of `kubectl-livesync -o json`, with the fields docs/reference.md documents;
// a field a type does not use is zero.
type Event struct {
	Type       string     `json:"type"`
	Time       string     `json:"time"` // as printed: RFC 3339, UTC
	Entry      string     `json:"entry"`
	Target     *Target    `json:"target"`
	Files      int        `json:"files"`
	Changed    int        `json:"changed"`
	Deleted    int        `json:"deleted"`
	Names      []string   `json:"names"`
	Targets    int        `json:"targets"`
	Failed     int        `json:"failed"`
	Bytes      int64      `json:"bytes"`
	LatencyMs  float64    `json:"latencyMs"`
	DurationMs float64    `json:"durationMs"`
	Copy       []string   `json:"copy"`
	Delete     []string   `json:"delete"`
	ExitCode   *int       `json:"exitCode"`
	Mode       string     `json:"mode"`    // restarted
	Crashed    bool       `json:"crashed"` // restarted
	Output     string     `json:"output"`
	Error      string     `json:"error"`
	Hint       string     `json:"hint"`
	Message    string     `json:"message"`
	Reason     string     `json:"reason"`
	Workload   string     `json:"workload"`
	Restarts   int        `json:"restarts"`
	Node       string     `json:"node"` // error, initial-sync, recovered: a replica lost with its node
	Transport  string     `json:"transport"`
	Failures   int        `json:"failures"`
	Helper     *Helper    `json:"helper"`
	Remote     string     `json:"remote"`
	Preflight  *Preflight `json:"preflight"`
	// sync-back
	SyncBack     string   `json:"syncBack"`
	Paths        []string `json:"paths"`
	Path         string   `json:"path"`
	LocalSha256  string   `json:"localSha256"`
	RemoteSha256 string   `json:"remoteSha256"`
	// ancestor: what a target starts from (saved, discarded, none) and what it decided
	From    string         `json:"from"`
	Decided map[string]int `json:"decided"`

	// forward and log
	Forward  *Forward `json:"forward"`
	State    string   `json:"state"`
	Pod      string   `json:"pod"`
	Previous string   `json:"previous"`
	Waiting  string   `json:"waiting"`
	Dials    int64    `json:"dials"`
	LogTime  string   `json:"logTime"`

	// Line is the line as printed; Invalid says it was not JSON (and the fields above are zero).
	Line    string `json:"-"`
	Invalid bool   `json:"-"`
}

// Forward is the forward a "forward" event is about.
type Forward struct {
	Address string `json:"address"`
	Remote  string `json:"remote"`
}

// Helper is the helper container of a "helper" event.
type Helper struct {
	Name        string `json:"name"`
	Image       string `json:"image"`
	Profile     string `json:"profile"`
	PodSecurity string `json:"podSecurity"`
	Reused      bool   `json:"reused"`
	DryRun      bool   `json:"dryRun"`
	UID         int    `json:"uid"`
	GID         int    `json:"gid"`
	SetsOwner   bool   `json:"setsOwner"`
}

// Preflight is how a dry run found a real run would sync, in a "dry-run" event.
type Preflight struct {
	UID       string `json:"uid"`
	GID       string `json:"gid"`
	Transport string `json:"transport"`
	Helper    bool   `json:"helper"`
	Tar       bool   `json:"tar"`
	Root      string `json:"root"`
	Writable  bool   `json:"writable"`
	Hint      string `json:"hint"`
	Error     string `json:"error"`
}

// Target is the container an event is about.
type Target struct {
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	Container   string `json:"container"`
	ContainerID string `json:"containerID"`
}

// ContainerID is the target's container ID, "" for an event without a target.
func (ev Event) ContainerID() string {
	if ev.Target == nil {
		return ""
	}
	return ev.Target.ContainerID
}

func (t *Target) key() string {
	if t == nil {
		return ""
	}
	return t.Namespace + "/" + t.Pod + "/" + t.Container + "/" + t.ContainerID
}

func decode(line []byte) Event {
	var ev Event
	if err := json.Unmarshal(line, &ev); err != nil {
		ev = Event{Invalid: true}
	}
	ev.Line = string(line)
	return ev
}

// ParseEvents decodes the NDJSON output of a run that ended (--once, --dry-run); empty lines
// are skipped, a line that is not JSON is an Invalid event.
func ParseEvents(stdout string) []Event {
	var evs []Event
	for line := range strings.SplitSeq(stdout, "\n") {
		if strings.TrimSpace(line) != "" {
			evs = append(evs, decode([]byte(line)))
		}
	}
	return evs
}

// check holds an event to the contract of every NDJSON line, whatever its type (new types
// included): JSON with a type and a time in RFC 3339, UTC.
func (ev Event) check() error {
	if ev.Invalid {
		return fmt.Errorf("a line is not JSON: %q", ev.Line)
	}
	parsed, err := time.Parse(time.RFC3339Nano, ev.Time)
	if ev.Type == "" || err != nil || !strings.HasSuffix(ev.Time, "Z") || parsed.Location() != time.UTC {
		return fmt.Errorf("an event without a type or an RFC 3339 UTC time: %s", ev.Line)
	}
	return nil
}

// Summary is what a session did, from its events: the figures of the line the text output
// ends with (`livesync: N containers, N batches, N files, N sent, N errors`), which -o json
// leaves out.
type Summary struct {
	Containers int   // added and not removed by the end
	Batches    int   // batch events
	Files      int   // sent by initial syncs and batches
	Bytes      int64 // sent by initial syncs and batches
	Errors     int   // events that carry an error
}

// Summarize adds up events the way the text output's last line does.
func Summarize(evs []Event) Summary {
	var sum Summary
	held := map[string]bool{}
	for _, ev := range evs {
		if ev.Error != "" {
			sum.Errors++
		}
		switch ev.Type {
		case "target-added":
			held[ev.Target.key()] = true
		case "target-removed":
			delete(held, ev.Target.key())
		case "initial-sync":
			sum.Files += ev.Files
			sum.Bytes += ev.Bytes
		case "batch":
			sum.Batches++
			sum.Files += ev.Changed
			sum.Bytes += ev.Bytes
		}
	}
	sum.Containers = len(held)
	return sum
}
