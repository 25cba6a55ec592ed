// Package mcp serves kubectl livesync to coding agents over the Model Context Protocol (stdio):
// the running sessions' status, a wait for the current local bytes, what the containers wrote
// since the last sync, and a workload's images. Everything it does is a read: it asks the
// sessions over their control sockets (pkg/control), and the cluster only through the Inspect
// function pkg/cmd gives it. It is the only importer of the MCP SDK.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livesync-dev/kubectl-livesync/pkg/control"
)

// Config is what the server serves from.
type Config struct {
	// StateDir is where the sessions register (see control.Dir); Dir is the directory the
	// agent works in: the sessions that sync it answer, and relative paths are under it.
	StateDir, Dir string
	// Version is the plugin's, as the server names itself.
	Version string
	// Inspect reports the images of a workload (TYPE/NAME) in a namespace ("" for the
	// kubeconfig's), read-only; nil: the inspect tool says it cannot.
	Inspect func(ctx context.Context, workload, namespace string) (any, error)
	// DefaultTimeout bounds a wait that names none.
	DefaultTimeout time.Duration
}

// Tool names.
const (
	ToolStatus  = "status"
	ToolWait    = "wait"
	ToolLogs    = "logs"
	ToolInspect = "inspect"
)

// NewServer returns the MCP server with its tools.
func NewServer(cfg Config) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "kubectl-livesync", Version: cfg.Version}, &sdk.ServerOptions{
		Instructions: "kubectl livesync syncs local files into running containers. After editing synced files, call wait " +
			"(for: restarted when the session restarts the app) before testing the change: it returns once every " +
			"replica runs the current local bytes, or says which replica does not and why. Nothing here changes the cluster.",
	})
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true}
	h := handlers{cfg}
	sdk.AddTool(s, &sdk.Tool{Name: ToolStatus, Annotations: readOnly,
		Description: "The running kubectl livesync sessions that sync the working directory (or the livesync.yaml entry named): workload, mappings, --restart, and per replica whether it is synced and what went wrong."}, h.status)
	sdk.AddTool(s, &sdk.Tool{Name: ToolWait, Annotations: readOnly,
		Description: "Wait until every replica holds the current local bytes of the paths (all synced paths when none are given), compared by sha256; for=restarted also waits for the session's --restart to have run after them (and the app to have survived it), for=ready for the pods to be Ready. Returns ok, or per replica what is missing and why."}, h.wait)
	sdk.AddTool(s, &sdk.Tool{Name: ToolLogs, Annotations: readOnly,
		Description: "What the synced containers wrote since the session's last sync (the session must run with --logs)."}, h.logs)
	sdk.AddTool(s, &sdk.Tool{Name: ToolInspect, Annotations: readOnly,
		Description: "A workload's images: the digest each container runs, the one its tag points to in the registry now, and whether a refresh would change anything. Defaults to the session's workload."}, h.inspect)
	return s
}

// Serve runs the server over in and out (the process's stdin and stdout) until the client
// goes away or ctx ends.
func Serve(ctx context.Context, cfg Config, in io.ReadCloser, out io.WriteCloser) error {
	err := NewServer(cfg).Run(ctx, &sdk.IOTransport{Reader: in, Writer: out})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

type handlers struct{ cfg Config }

// EntryInput picks a session: the livesync.yaml entry's, else those that sync the directory.
type EntryInput struct {
	Entry string `json:"entry,omitempty" jsonschema:"a livesync.yaml entry's name; default: the sessions that sync the working directory"`
}

// StatusOutput is the status tool's answer.
type StatusOutput struct {
	Sessions []control.Status `json:"sessions"`
}

func (h handlers) status(ctx context.Context, _ *sdk.CallToolRequest, in EntryInput) (*sdk.CallToolResult, StatusOutput, error) {
	var out StatusOutput
	picked, err := control.Pick(ctx, h.cfg.StateDir, h.cfg.Dir, in.Entry, nil)
	if err != nil {
		return failed(err), out, nil
	}
	for _, p := range picked {
		st, err := control.Client{Socket: p.Info.Socket}.Status(ctx)
		if err != nil {
			return failed(err), out, nil
		}
		out.Sessions = append(out.Sessions, st)
	}
	return nil, out, nil
}

// WaitInput is the wait tool's question.
type WaitInput struct {
	For            string   `json:"for,omitempty" jsonschema:"synced (default), restarted or ready"`
	Paths          []string `json:"paths,omitempty" jsonschema:"local paths, relative to the working directory; default: every synced path"`
	Entry          string   `json:"entry,omitempty" jsonschema:"a livesync.yaml entry's name; default: the sessions that sync the working directory"`
	TimeoutSeconds float64  `json:"timeoutSeconds,omitempty" jsonschema:"give up after this many seconds; default 120"`
}

// WaitOutput is the wait tool's answer: OK, the one line that says so or what is missing, and
// each session's result.
type WaitOutput struct {
	OK      bool                 `json:"ok"`
	Summary string               `json:"summary"`
	Results []control.WaitResult `json:"results"`
}

func (h handlers) wait(ctx context.Context, _ *sdk.CallToolRequest, in WaitInput) (*sdk.CallToolResult, WaitOutput, error) {
	var out WaitOutput
	if in.For == "" {
		in.For = control.ForSynced
	}
	switch in.For {
	case control.ForSynced, control.ForRestarted, control.ForReady:
	default:
		return failed(fmt.Errorf("for %q: use synced, restarted or ready", in.For)), out, nil
	}
	timeout := h.cfg.DefaultTimeout
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
	}
	paths := make([]string, 0, len(in.Paths))
	for _, p := range in.Paths {
		r, err := control.Resolve(h.cfg.Dir, p)
		if err != nil {
			return failed(err), out, nil
		}
		paths = append(paths, r)
	}
	picked, err := control.Pick(ctx, h.cfg.StateDir, h.cfg.Dir, in.Entry, paths)
	if err != nil {
		return failed(err), out, nil
	}
	out.Results, err = control.WaitAll(ctx, picked, control.WaitRequest{For: in.For, Timeout: timeout})
	if err != nil {
		return failed(err), out, nil
	}
	out.Summary, out.OK = control.Summary(out.Results, timeout)
	// A wait that found a replica lacking the bytes answered the question: the agent reads why
	// in the summary, and it is no tool error.
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out.Summary}}}, out, nil
}

// LogsOutput is the logs tool's answer, per session.
type LogsOutput struct {
	Sessions []SessionLogs `json:"sessions"`
}

// SessionLogs is one session's lines since its last sync.
type SessionLogs struct {
	Workload string `json:"workload"`
	Name     string `json:"name,omitempty"`
	control.Logs
	// Note says why there are no lines, when there are none.
	Note string `json:"note,omitempty"`
}

func (h handlers) logs(ctx context.Context, _ *sdk.CallToolRequest, in EntryInput) (*sdk.CallToolResult, LogsOutput, error) {
	var out LogsOutput
	picked, err := control.Pick(ctx, h.cfg.StateDir, h.cfg.Dir, in.Entry, nil)
	if err != nil {
		return failed(err), out, nil
	}
	var text []string
	for _, p := range picked {
		l, err := control.Client{Socket: p.Info.Socket}.Logs(ctx)
		if err != nil {
			return failed(err), out, nil
		}
		sl := SessionLogs{Workload: p.Info.Workload, Name: p.Info.Name, Logs: l}
		switch {
		case !l.Following:
			sl.Note = "this session does not follow its containers' output: start it with --logs (logs: true in livesync.yaml) to have it here, or run kubectl logs"
		case len(l.Lines) == 0:
			sl.Note = "nothing written since the last sync"
		}
		out.Sessions = append(out.Sessions, sl)
		text = append(text, renderLogs(sl))
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Join(text, "\n")}}}, out, nil
}

func renderLogs(sl SessionLogs) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", sl.Workload)
	if !sl.LastSync.IsZero() {
		fmt.Fprintf(&b, ", since the last sync at %s", sl.LastSync.UTC().Format(time.RFC3339))
	}
	if sl.Note != "" {
		fmt.Fprintf(&b, ": %s", sl.Note)
	}
	b.WriteString("\n")
	if sl.Dropped > 0 {
		fmt.Fprintf(&b, "(%d earlier lines no longer kept)\n", sl.Dropped)
	}
	for _, l := range sl.Lines {
		fmt.Fprintf(&b, "%s/%s: %s\n", l.Pod, l.Container, l.Text)
	}
	return b.String()
}

// InspectInput names the workload to inspect.
type InspectInput struct {
	Workload  string `json:"workload,omitempty" jsonschema:"TYPE/NAME, e.g. deployment/web; default: the session's workload"`
	Namespace string `json:"namespace,omitempty" jsonschema:"default: the session's namespace, else the kubeconfig's"`
	Entry     string `json:"entry,omitempty" jsonschema:"a livesync.yaml entry's name, to inspect its session's workload"`
}

func (h handlers) inspect(ctx context.Context, _ *sdk.CallToolRequest, in InspectInput) (*sdk.CallToolResult, any, error) {
	if h.cfg.Inspect == nil {
		return failed(errors.New("inspect is not available in this server")), nil, nil
	}
	if in.Workload == "" {
		picked, err := control.Pick(ctx, h.cfg.StateDir, h.cfg.Dir, in.Entry, nil)
		if err != nil {
			return failed(fmt.Errorf("%w; or name a workload", err)), nil, nil
		}
		if len(picked) > 1 {
			return failed(fmt.Errorf("%d sessions sync %s: name the workload or the entry", len(picked), h.cfg.Dir)), nil, nil
		}
		in.Workload = picked[0].Info.Workload
		if in.Namespace == "" {
			in.Namespace = picked[0].Info.Namespace
		}
	}
	rep, err := h.cfg.Inspect(ctx, in.Workload, in.Namespace)
	if err != nil {
		return failed(err), nil, nil
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return failed(err), nil, nil
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, rep, nil
}

// failed is a tool's error as the agent should read it: one line in the result, not a protocol
// error, so that it can act on it (start a session, name an entry).
func failed(err error) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
}
