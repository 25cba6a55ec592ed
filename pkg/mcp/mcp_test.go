//go:build !windows

package mcp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livesync-dev/kubectl-livesync/pkg/control"
)

// fakeSession answers as a session whose replicas hold what was asked once the test says so.
type fakeSession struct {
	waits chan control.WaitRequest
}

func (f *fakeSession) Status(context.Context) control.Status {
	return control.Status{Workload: "deployment/web", Namespace: "dev", Restart: "signal:HUP",
		Targets: []control.Target{{Pod: "web-1", Container: "app", Synced: true}}}
}

func (f *fakeSession) Wait(_ context.Context, req control.WaitRequest) control.WaitResult {
	f.waits <- req
	return control.WaitResult{OK: true, For: req.For, Workload: "deployment/web", Namespace: "dev", Files: len(req.Paths), DurationMs: 1500,
		Targets: []control.TargetWait{{Namespace: "dev", Pod: "web-1", Container: "app", OK: true}}}
}

func (f *fakeSession) Logs(context.Context) control.Logs {
	return control.Logs{Following: true, LastSync: time.Unix(1000, 0), Lines: []control.LogLine{{Pod: "web-1", Container: "app", Text: "reloaded"}}}
}

// connect serves a fake session that syncs root and an MCP server for root, and returns a
// client connected to it over in-memory transports.
func connect(t *testing.T, root string, f *fakeSession, inspect func(context.Context, string, string) (any, error)) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	state := t.TempDir()
	reg, err := control.Register(ctx, state, control.Info{Workload: "deployment/web", Namespace: "dev", Roots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { control.Serve(ctx, reg.Listener, f); close(served) }()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := NewServer(Config{StateDir: state, Dir: root, Version: "test", Inspect: inspect, DefaultTimeout: time.Minute}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
		cancel()
		<-served
		_ = reg.Close()
	})
	return cs
}

func text(r *sdk.CallToolResult) string {
	var s []string
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			s = append(s, tc.Text)
		}
	}
	return strings.Join(s, "\n")
}

// TestTools: a client lists the four read-only tools and completes a wait (paths resolved
// under the working directory), reads the logs since the last sync, the status, and inspects
// the session's workload by default.
func TestTools(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	f := &fakeSession{waits: make(chan control.WaitRequest, 1)}
	var inspected []string
	cs := connect(t, root, f, func(_ context.Context, w, ns string) (any, error) {
		inspected = append(inspected, ns+"/"+w)
		return map[string]any{"workload": w}, nil
	})
	ctx := context.Background()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("tool %s is not marked read-only", tool.Name)
		}
	}
	slices.Sort(names)
	if strings.Join(names, " ") != "inspect logs status wait" {
		t.Errorf("tools %v", names)
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: ToolWait, Arguments: map[string]any{"for": "restarted", "paths": []string{"main.go"}, "timeoutSeconds": 30}})
	if err != nil || res.IsError {
		t.Fatalf("wait: %v %s", err, text(res))
	}
	req := <-f.waits
	if req.For != control.ForRestarted || req.Timeout != 30*time.Second || len(req.Paths) != 1 || req.Paths[0] != filepath.Join(root, "main.go") {
		t.Errorf("the session was asked %+v", req)
	}
	var out WaitOutput
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || !out.OK || len(out.Results) != 1 {
		t.Errorf("structured: %s (%v)", b, err)
	}
	if want := "restarted: deployment/web (1 replica) restarted with the local bytes of 1 file in 1.5s"; text(res) != want {
		t.Errorf("text %q, want %q", text(res), want)
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: ToolLogs, Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.Contains(text(res), "web-1/app: reloaded") {
		t.Errorf("logs: %v %s", err, text(res))
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: ToolStatus, Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.Contains(text(res), `"signal:HUP"`) {
		t.Errorf("status: %v %s", err, text(res))
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: ToolInspect, Arguments: map[string]any{}})
	if err != nil || res.IsError || len(inspected) != 1 || inspected[0] != "dev/deployment/web" {
		t.Errorf("inspect: %v %s, inspected %v", err, text(res), inspected)
	}

	// No session for the entry: one line the agent can act on.
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: ToolWait, Arguments: map[string]any{"entry": "api"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), `no kubectl livesync session is running for the entry "api"`) {
		t.Errorf("wait for a missing entry: %v %s", err, text(res))
	}
}
