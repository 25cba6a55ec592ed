package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Info is a running session's entry in the registry: where its socket is and what it syncs.
type Info struct {
	PID    int    `json:"pid"`
	Socket string `json:"socket"`
	// Name is the livesync.yaml entry the session runs, if one; Dir the directory it ran in.
	Name      string `json:"name,omitempty"`
	Dir       string `json:"dir,omitempty"`
	Workload  string `json:"workload"`
	Namespace string `json:"namespace"`
	// Roots are the absolute local roots of its mappings.
	Roots []string `json:"roots"`
}

// Dir is where the sessions under stateDir register: readable by the owner only.
func Dir(stateDir string) string { return filepath.Join(stateDir, "sessions") }

// Registration is a session's socket and registry entry; Close removes both.
type Registration struct {
	Listener net.Listener
	Info     Info
	entry    string
}

// Close stops listening and removes the socket and the entry.
func (r *Registration) Close() error {
	err := r.Listener.Close()
	_ = os.Remove(r.entry)
	_ = os.Remove(r.Info.Socket)
	return err
}

// Register makes the session reachable: a socket only its user may open (the directory 0700,
// the socket 0600) under Dir(stateDir), named in an entry beside it. Entries of sessions that
// ended without removing theirs (a crash) are removed on the way.
func Register(ctx context.Context, stateDir string, info Info) (*Registration, error) {
	dir := Dir(stateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the session directory %q: %w", dir, err)
	}
	if err := private(dir); err != nil {
		return nil, err
	}
	prune(ctx, dir)
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	// Short names: a unix socket's path has ~100 bytes at most.
	info.Socket = filepath.Join(dir, id+".sock")
	ln, err := listen(info.Socket)
	if err != nil {
		return nil, fmt.Errorf("listening on %q: %w", info.Socket, err)
	}
	r := &Registration{Listener: ln, Info: info, entry: filepath.Join(dir, id+".json")}
	data, err := json.MarshalIndent(info, "", "  ")
	if err == nil {
		err = writeFile(r.entry, data)
	}
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("registering the session in %q: %w", dir, err)
	}
	return r, nil
}

// writeFile writes data whole or not at all: a reader never sees half an entry.
func writeFile(name string, data []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// Sessions returns the registered sessions under stateDir whose socket answers; none (and no
// error) when there is no registry yet.
func Sessions(ctx context.Context, stateDir string) ([]Info, error) {
	dir := Dir(stateDir)
	infos, err := read(dir)
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, in := range infos {
		if alive(ctx, in.Socket) {
			out = append(out, in)
		}
	}
	return out, nil
}

func read(dir string) ([]Info, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("reading the session directory %q: %w", dir, err)
	}
	sort.Strings(names)
	var out []Info
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			continue // removed meanwhile
		}
		var in Info
		if json.Unmarshal(data, &in) != nil || in.Socket == "" {
			continue
		}
		out = append(out, in)
	}
	return out, nil
}

// prune removes the entries and sockets of sessions that no longer answer.
func prune(ctx context.Context, dir string) {
	infos, _ := read(dir)
	for _, in := range infos {
		if alive(ctx, in.Socket) {
			continue
		}
		id := strings.TrimSuffix(filepath.Base(in.Socket), ".sock")
		_ = os.Remove(filepath.Join(dir, id+".json"))
		_ = os.Remove(in.Socket)
	}
}

func alive(ctx context.Context, socket string) bool {
	c, err := dial(ctx, socket)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Match picks the sessions that sync dir or the given paths: a session one of whose roots is
// dir, holds it, or lies under it; when paths are given, one whose roots hold every path.
// name, when set, picks the livesync.yaml entry of that name among them.
func Match(infos []Info, dir string, paths []string, name string) []Info {
	var out []Info
	for _, in := range infos {
		if name != "" && in.Name != name {
			continue
		}
		ok := false
		if len(paths) > 0 {
			ok = true
			for _, p := range paths {
				if !slices.ContainsFunc(in.Roots, func(r string) bool { return within(p, r) }) {
					ok = false
					break
				}
			}
		} else {
			ok = slices.ContainsFunc(in.Roots, func(r string) bool { return within(dir, r) || within(r, dir) }) || in.Dir == dir
		}
		if ok {
			out = append(out, in)
		}
	}
	return out
}

// within reports whether p is root or under it.
func within(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// errNotPrivate: the session directory is open to others, so a socket in it would be too.
var errNotPrivate = errors.New("is open to other users")

// private makes sure only the owner may use dir; a directory another user owns is refused.
func private(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("checking the session directory %q: %w", dir, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, fi.Mode().Perm()&^fs.FileMode(0o077)); err != nil {
			return fmt.Errorf("the session directory %q %w: %w", dir, errNotPrivate, err)
		}
	}
	return owned(dir, fi)
}
