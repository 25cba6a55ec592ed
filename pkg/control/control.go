// Package control is a running session's control surface: a private local socket that answers
// status and wait requests, one JSON line each way, and the registry that lets a client find the
// session that syncs a directory. The session (pkg/session) serves it; `kubectl livesync wait` and
// `kubectl livesync mcp` are its clients. It knows nothing of Kubernetes or of how files are sent.
package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// What a wait waits for (WaitRequest.For).
const (
	// ForSynced: every replica holds the local bytes of the paths, as its container confirmed.
	ForSynced = "synced"
	// ForRestarted: synced, and the session's --restart ran in every replica after those bytes landed.
	ForRestarted = "restarted"
	// ForReady: restarted when the session restarts anything, and every replica's pod Ready after it.
	ForReady = "ready"
)

// Request is one line a client sends: Op "status", "logs" or "wait" (with Wait).
type Request struct {
	Op   string       `json:"op"`
	Wait *WaitRequest `json:"wait,omitempty"`
}

// WaitRequest asks the session to answer once every replica holds the current local bytes of
// Paths (absolute local paths; none means every synced path), or when Timeout has passed.
type WaitRequest struct {
	For     string        `json:"for"`
	Paths   []string      `json:"paths,omitempty"`
	Timeout time.Duration `json:"timeout"`
}

// Response is the one line the session answers with: Status for "status", Wait for "wait",
// Error when the request could not be served.
type Response struct {
	Status *Status     `json:"status,omitempty"`
	Wait   *WaitResult `json:"wait,omitempty"`
	Logs   *Logs       `json:"logs,omitempty"`
	Error  string      `json:"error,omitempty"`
}

// Status is what a session is syncing, and into which containers.
type Status struct {
	PID       int       `json:"pid"`
	Name      string    `json:"name,omitempty"` // the livesync.yaml entry, if one
	Workload  string    `json:"workload"`
	Namespace string    `json:"namespace"`
	Mappings  []Mapping `json:"mappings"`
	Restart   string    `json:"restart,omitempty"` // --restart, "" for none
	Started   time.Time `json:"started"`
	Targets   []Target  `json:"targets"`
}

// Mapping is one LOCAL:REMOTE of the session.
type Mapping struct {
	Local  string `json:"local"`
	Remote string `json:"remote"`
}

// Target is one container the session syncs into, and what stands in its way if anything.
type Target struct {
	Pod         string `json:"pod"`
	Container   string `json:"container"`
	ContainerID string `json:"containerID,omitempty"`
	// Synced: its initial sync converged and it holds no deletes back.
	Synced bool `json:"synced"`
	// Problem is the last thing that went wrong there (a held delete, a failed batch, a
	// restart that failed), one line; "" when none is current.
	Problem string `json:"problem,omitempty"`
	// Restarts counts the --restart runs there, and LastRestart is when the last one ended.
	Restarts    int       `json:"restarts,omitempty"`
	LastRestart time.Time `json:"lastRestart,omitzero"`
}

// WaitResult is the answer to a wait: OK, or per replica what is missing.
type WaitResult struct {
	OK  bool   `json:"ok"`
	For string `json:"for"`
	// Name, Workload and Namespace say which session answered: its livesync.yaml entry, if one.
	Name      string `json:"name,omitempty"`
	Workload  string `json:"workload"`
	Namespace string `json:"namespace"`
	// Files counts the local paths whose bytes were waited for.
	Files int `json:"files"`
	// DurationMs is how long the session waited, in milliseconds.
	DurationMs int64        `json:"durationMs"`
	Targets    []TargetWait `json:"targets"`
	// Message says in one line what is missing when the result is not OK for a reason
	// outside any one replica (no replica at all, a path outside every mapping).
	Message string `json:"message,omitempty"`
}

// TargetWait is one replica's part of a wait.
type TargetWait struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	OK        bool   `json:"ok"`
	// Missing says what this replica still lacks, one line: the first path that is not there
	// yet, why (a held delete, a failed batch), a restart that did not run or failed, a
	// container that exited with its status.
	Missing string `json:"missing,omitempty"`
}

// Logs is what the synced containers wrote since the session's last sync.
type Logs struct {
	// Following says the session follows the containers' output (--logs); without it there
	// are no lines to give.
	Following bool `json:"following"`
	// LastSync is when the session last applied a batch or an initial sync; zero before.
	LastSync time.Time `json:"lastSync,omitzero"`
	Lines    []LogLine `json:"lines"`
	// Dropped counts the lines since then that the session no longer holds (it keeps the
	// last ones only).
	Dropped int `json:"dropped,omitempty"`
}

// LogLine is one line a synced container wrote.
type LogLine struct {
	Namespace string    `json:"namespace"`
	Pod       string    `json:"pod"`
	Container string    `json:"container"`
	Time      time.Time `json:"time"`
	Text      string    `json:"text"`
}

// Handler answers a session's requests; pkg/session implements it.
type Handler interface {
	Status(ctx context.Context) Status
	Wait(ctx context.Context, req WaitRequest) WaitResult
	Logs(ctx context.Context) Logs
}

// maxLine bounds a request line: a wait naming many paths fits, a runaway client does not.
const maxLine = 4 << 20

// Serve answers the connections ln accepts until ctx ends, each on its own goroutine, and
// closes ln then. A connection carries any number of requests, one line each.
func Serve(ctx context.Context, ln net.Listener, h Handler) {
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		wg.Go(func() { serveConn(ctx, c, h) })
	}
	_ = ln.Close()
	wg.Wait()
}

func serveConn(ctx context.Context, c net.Conn, h Handler) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A client that goes away ends its wait: the closed connection unblocks the reader.
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	defer func() { _ = c.Close() }()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	enc := json.NewEncoder(c)
	for sc.Scan() {
		var req Request
		var resp Response
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			resp.Error = fmt.Sprintf("reading the request: %v", err)
		} else {
			switch req.Op {
			case "status":
				s := h.Status(ctx)
				resp.Status = &s
			case "logs":
				l := h.Logs(ctx)
				resp.Logs = &l
			case "wait":
				if req.Wait == nil {
					resp.Error = `a "wait" request needs its "wait" field`
					break
				}
				w := h.Wait(ctx, *req.Wait)
				resp.Wait = &w
			default:
				resp.Error = fmt.Sprintf("unknown op %q: use status, logs or wait", req.Op)
			}
		}
		if err := enc.Encode(&resp); err != nil {
			return
		}
	}
}

// Client talks to one session's socket.
type Client struct {
	Socket string
}

// Status asks the session what it syncs.
func (c Client) Status(ctx context.Context) (Status, error) {
	r, err := c.do(ctx, Request{Op: "status"})
	if err != nil {
		return Status{}, err
	}
	if r.Status == nil {
		return Status{}, fmt.Errorf("asking the session at %q for its status: no status in the answer", c.Socket)
	}
	return *r.Status, nil
}

// Logs asks the session what its containers wrote since its last sync.
func (c Client) Logs(ctx context.Context) (Logs, error) {
	r, err := c.do(ctx, Request{Op: "logs"})
	if err != nil {
		return Logs{}, err
	}
	if r.Logs == nil {
		return Logs{}, fmt.Errorf("asking the session at %q for its logs: no logs in the answer", c.Socket)
	}
	return *r.Logs, nil
}

// Wait asks the session to wait as req says; it returns when the session answers (at the
// latest after req.Timeout, plus a grace for the answer to arrive) or ctx ends.
func (c Client) Wait(ctx context.Context, req WaitRequest) (WaitResult, error) {
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout+10*time.Second)
		defer cancel()
	}
	r, err := c.do(ctx, Request{Op: "wait", Wait: &req})
	if err != nil {
		return WaitResult{}, err
	}
	if r.Wait == nil {
		return WaitResult{}, fmt.Errorf("asking the session at %q to wait: no result in the answer", c.Socket)
	}
	return *r.Wait, nil
}

// ErrNoSession: nothing answers at the socket (the session ended, or crashed and left it).
var ErrNoSession = errors.New("no session is running there")

func (c Client) do(ctx context.Context, req Request) (Response, error) {
	conn, err := dial(ctx, c.Socket)
	if err != nil {
		return Response{}, fmt.Errorf("connecting to the session at %q: %w", c.Socket, err)
	}
	defer func() { _ = conn.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return Response{}, fmt.Errorf("sending %s to the session at %q: %w", req.Op, c.Socket, err)
	}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	if !sc.Scan() {
		err := sc.Err()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		if err == nil {
			err = errors.New("the session closed the connection")
		}
		return Response{}, fmt.Errorf("reading the session's answer to %s at %q: %w", req.Op, c.Socket, err)
	}
	var r Response
	if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
		return Response{}, fmt.Errorf("reading the session's answer to %s at %q: %w", req.Op, c.Socket, err)
	}
	if r.Error != "" {
		return Response{}, fmt.Errorf("the session at %q refused %s: %s", c.Socket, req.Op, r.Error)
	}
	return r, nil
}
