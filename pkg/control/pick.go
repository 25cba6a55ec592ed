package control

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// ErrNotRunning: no running session matches what the client asked for; the error's text says
// what is running instead, if anything.
var ErrNotRunning = errors.New("no kubectl livesync session is running")

// Picked is one running session a client waits on, with the paths of its own to wait for
// (none: every path it syncs).
type Picked struct {
	Info  Info
	Paths []string
}

// Pick finds the running sessions under stateDir a client in dir means: the one named name (a
// livesync.yaml entry, from any directory) if given; each path (absolute, symlinks resolved; see Resolve) goes to
// every session whose roots hold it, and every path must have one; with no paths, the
// sessions that sync dir, what is under it or what holds it.
func Pick(ctx context.Context, stateDir, dir, name string, paths []string) ([]Picked, error) {
	all, err := Sessions(ctx, stateDir)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: start one (kubectl livesync deploy/my-app ./src:/app, or kubectl livesync in a directory with livesync.yaml) and wait again", ErrNotRunning)
	}
	infos := all
	if name != "" {
		infos = slices.DeleteFunc(slices.Clone(all), func(in Info) bool { return in.Name != name })
		if len(infos) == 0 {
			return nil, fmt.Errorf("%w for the entry %q: running: %s", ErrNotRunning, name, describe(all))
		}
	}
	if len(paths) == 0 {
		var out []Picked
		match := Match(infos, dir, nil, "")
		if name != "" {
			match = infos // the entry, wherever the client is
		}
		for _, in := range match {
			out = append(out, Picked{Info: in})
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w for %s: running: %s; cd there, or name a path or an entry", ErrNotRunning, dir, describe(infos))
		}
		return out, nil
	}
	var out []Picked
	for _, p := range paths {
		found := false
		for _, in := range infos {
			if !slices.ContainsFunc(in.Roots, func(r string) bool { return within(p, r) }) {
				continue
			}
			found = true
			i := slices.IndexFunc(out, func(pk Picked) bool { return pk.Info.Socket == in.Socket })
			if i < 0 {
				out = append(out, Picked{Info: in})
				i = len(out) - 1
			}
			out[i].Paths = append(out[i].Paths, p)
		}
		if !found {
			return nil, fmt.Errorf("%w that syncs %s: running: %s", ErrNotRunning, p, describe(infos))
		}
	}
	return out, nil
}

// describe names the running sessions in one line: entry or workload, and roots.
func describe(infos []Info) string {
	var s []string
	for _, in := range infos {
		what := in.Workload
		if in.Name != "" {
			what = fmt.Sprintf("entry %q (%s)", in.Name, in.Workload)
		}
		s = append(s, fmt.Sprintf("%s, syncing %s", what, strings.Join(in.Roots, ", ")))
	}
	return strings.Join(s, "; ")
}

// Resolve makes p absolute with its symlinks resolved, as a session's roots are; a path that
// does not exist (a file deleted locally: a wait for its delete) keeps its name under its
// nearest existing parent, resolved.
func Resolve(dir, p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p = filepath.Clean(p)
	var tail []string
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{real}, tail...)...), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("resolving %q: %w", p, err)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", fmt.Errorf("resolving %q: %w", p, err)
		}
		tail = append([]string{filepath.Base(p)}, tail...)
		p = parent
	}
}

// WaitAll asks each picked session to wait, all at once, and returns their answers in order;
// an error is a session that could not be asked (it ended meanwhile).
func WaitAll(ctx context.Context, picked []Picked, req WaitRequest) ([]WaitResult, error) {
	res := make([]WaitResult, len(picked))
	errs := make([]error, len(picked))
	var wg sync.WaitGroup
	for i, p := range picked {
		wg.Go(func() {
			r := req
			r.Paths = p.Paths
			res[i], errs[i] = Client{Socket: p.Info.Socket}.Wait(ctx, r)
		})
	}
	wg.Wait()
	return res, errors.Join(errs...)
}
