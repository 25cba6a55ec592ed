package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// watchScript is sync-back's trigger (see Watch).
var watchScript = script("watch.sh")

// ErrNoInotifywait is what Watch returns when the container has no
// inotifywait: sync-back then scans at its interval alone.
var ErrNoInotifywait = errors.New("the container has no inotifywait")

// WatchArgv is the exec that runs watch.sh in the remote directory root over
// starts ("./name", one component each).
func WatchArgv(root string, starts []string) []string {
	return append([]string{"sh", "-c", watchScript, "livesync-watch", root}, starts...)
}

// WatchEvent is one event watch.sh printed: Name is "./"-prefixed,
// relative to the remote directory.
type WatchEvent struct {
	Name  string
	IsDir bool
}

// Watch runs WatchArgv in t until ctx ends or the exec does, calling ready
// once every watch is in place and event for each event, both on the exec's
// output goroutine (they must not block). It returns ErrNoInotifywait when
// the container has none, ctx's error once ctx ends, and otherwise why the
// exec ended: a watch is only a trigger, and its caller decides whether to
// start it again.
func Watch(ctx context.Context, ex Executor, t Target, root string, starts []string, ready func(), event func(WatchEvent)) error {
	out := &watchOutput{event: event}
	errs := &watchStderr{ready: ready, tail: TailBuffer{Max: 4 << 10}}
	// stdin stays open, unwritten, until ctx ends: its EOF is what ends
	// watch.sh's inotifywait in the container (see the script).
	stdin, w := io.Pipe()
	stop := context.AfterFunc(ctx, func() { _ = w.Close() })
	defer stop()
	defer w.Close()
	err := ex.Exec(ctx, t, WatchArgv(root, starts), stdin, out, errs)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ee ExitError
	if errors.As(err, &ee) && ee.ExitStatus() == 127 && strings.Contains(errs.String(), "inotifywait not found") {
		return ErrNoInotifywait
	}
	if err == nil {
		return fmt.Errorf("watching %q in %s: inotifywait ended: %s", root, t, strings.TrimSpace(errs.String()))
	}
	return Classify(err, t, "watching for sync-back", root, errs.String())
}

// watchOutput parses watch.sh's records: "EVENTS NAME\0". A record that
// does not parse (a name with a NUL can't be made) is dropped: the next
// scan at the interval finds what it was about.
type watchOutput struct {
	event func(WatchEvent)
	buf   []byte
}

func (w *watchOutput) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, 0)
		if i < 0 {
			break
		}
		rec := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		evs, name, ok := strings.Cut(rec, " ")
		if !ok || !strings.HasPrefix(name, "./") && name != "." {
			continue
		}
		w.event(WatchEvent{Name: name, IsDir: strings.Contains(","+evs+",", ",ISDIR,")})
	}
	if len(w.buf) > 64<<10 { // no NUL in 64 KiB: not watch.sh's output
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

// watchStderr keeps the tail of watch.sh's stderr and calls ready once it
// says every watch is in place.
type watchStderr struct {
	ready func()
	mu    sync.Mutex
	seen  bool
	line  []byte
	tail  TailBuffer
}

func (w *watchStderr) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.tail.Write(p)
	if w.seen {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	if bytes.Contains(w.line, []byte("Watches established.")) {
		w.seen, w.line = true, nil
		if w.ready != nil {
			w.ready()
		}
	} else if i := bytes.LastIndexByte(w.line, '\n'); i >= 0 {
		w.line = w.line[i+1:]
	}
	return len(p), nil
}

func (w *watchStderr) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tail.String()
}
