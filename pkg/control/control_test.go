//go:build !windows

package control

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type fakeHandler struct{ waits []WaitRequest }

func (f *fakeHandler) Status(context.Context) Status {
	return Status{PID: 7, Workload: "deployment/web", Targets: []Target{{Pod: "web-1", Container: "app", Synced: true}}}
}

func (f *fakeHandler) Logs(context.Context) Logs {
	return Logs{Following: true, Lines: []LogLine{{Pod: "web-1", Text: "reloaded"}}}
}

func (f *fakeHandler) Wait(_ context.Context, req WaitRequest) WaitResult {
	f.waits = append(f.waits, req)
	return WaitResult{OK: true, For: req.For, Files: len(req.Paths)}
}

// TestRegisterServeFind: a session's socket is private, found by the directory it syncs, and
// answers status and wait; once it ends it is no longer found.
func TestRegisterServeFind(t *testing.T) {
	state := t.TempDir()
	root := filepath.Join(state, "src")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg, err := Register(ctx, state, Info{PID: 7, Workload: "deployment/web", Roots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{Dir(state): 0o700, reg.Info.Socket: 0o600} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", name, got, want)
		}
	}
	h := &fakeHandler{}
	served := make(chan struct{})
	go func() { Serve(ctx, reg.Listener, h); close(served) }()

	infos, err := Sessions(ctx, state)
	if err != nil || len(infos) != 1 {
		t.Fatalf("Sessions: %v, %v", infos, err)
	}
	for _, tc := range []struct {
		dir   string
		paths []string
		name  string
		n     int
	}{
		{dir: root, n: 1},
		{dir: filepath.Join(root, "pkg"), n: 1},
		{dir: state, n: 1}, // the project directory above the root
		{dir: "/elsewhere", n: 0},
		{dir: "/elsewhere", paths: []string{filepath.Join(root, "a.go")}, n: 1},
		{dir: root, paths: []string{"/elsewhere/a.go"}, n: 0},
		{dir: root, name: "api", n: 0},
	} {
		if got := Match(infos, tc.dir, tc.paths, tc.name); len(got) != tc.n {
			t.Errorf("Match(%q, %q, %q) = %d sessions, want %d", tc.dir, tc.paths, tc.name, len(got), tc.n)
		}
	}
	c := Client{Socket: infos[0].Socket}
	st, err := c.Status(ctx)
	if err != nil || st.PID != 7 || len(st.Targets) != 1 {
		t.Fatalf("Status: %+v, %v", st, err)
	}
	if l, err := c.Logs(ctx); err != nil || !l.Following || len(l.Lines) != 1 {
		t.Fatalf("Logs: %+v, %v", l, err)
	}
	res, err := c.Wait(ctx, WaitRequest{For: ForSynced, Paths: []string{"/a", "/b"}, Timeout: time.Second})
	if err != nil || !res.OK || res.Files != 2 || h.waits[0].Timeout != time.Second {
		t.Fatalf("Wait: %+v, %v (requests %+v)", res, err, h.waits)
	}
	cancel()
	<-served
	if err := reg.Close(); err != nil {
		t.Log(err)
	}
	if infos, _ := Sessions(context.Background(), state); len(infos) != 0 {
		t.Errorf("after the session ended: %v", infos)
	}
}

// TestRegisterPrunesCrashed: the entry of a session that died without removing it is removed by
// the next registration, and never listed.
func TestRegisterPrunesCrashed(t *testing.T) {
	state := t.TempDir()
	ctx := context.Background()
	if err := os.MkdirAll(Dir(state), 0o700); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(Dir(state), "dead.json")
	if err := os.WriteFile(dead, []byte(`{"pid":1,"socket":"`+filepath.Join(Dir(state), "dead.sock")+`","roots":["/src"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if infos, _ := Sessions(ctx, state); len(infos) != 0 {
		t.Errorf("a dead session is listed: %v", infos)
	}
	reg, err := Register(ctx, state, Info{Roots: []string{"/src"}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead entry is still there: %v", err)
	}
}

// TestRegisterTightensDir: a session directory others may read is made owner-only.
func TestRegisterTightensDir(t *testing.T) {
	state := t.TempDir()
	if err := os.MkdirAll(Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	reg, err := Register(context.Background(), state, Info{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	fi, _ := os.Stat(Dir(state))
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v, want 0700", fi.Mode().Perm())
	}
}
