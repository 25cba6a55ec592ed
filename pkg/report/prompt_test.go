package report

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
)

// lockedBuffer is a terminal's screen: the reporter writes it from the goroutine that reads
// the answers too.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor returns the screen once it contains s, failing the test after 10s.
func (l *lockedBuffer) waitFor(t *testing.T, s string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(l.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("screen has no %q:\n%s", s, l.String())
		}
		time.Sleep(time.Millisecond)
	}
	return l.String()
}

func massHeld(pod, id string) filesync.Held {
	return filesync.Held{Target: filesync.Target{Namespace: "ns", Pod: pod, Container: "app"}, Reason: "more than half of the 9,000 entries the container has",
		Deleted: 4957, Examples: []string{"/app/vendor"}, Hint: "if that is intended, restart with --initial=mirror --allow-mass-delete",
		ID: id, Under: "/work/src/vendor"}
}

// In a terminal, a held mass delete's line asks, and only a y lets it through: its ID goes to
// the session that holds it, once. No, an empty line and the end of stdin keep it held.
func TestHeldQuestion(t *testing.T) {
	const question = "held: ns/web-1/app: not deleting 4,957 remote entries (/app/vendor, ...): more than half of the 9,000 entries the container has; apply these 4,957 deletes under ./vendor? [y/N] "
	for _, tt := range []struct {
		name, answer string
		eof          bool
		release      bool
		said         string
	}{
		{name: "yes", answer: "y\n", release: true, said: "applying 4,957 deletes under ./vendor\n"},
		{name: "YES", answer: " YES \n", release: true, said: "applying 4,957 deletes under ./vendor\n"},
		{name: "no", answer: "n\n", said: "still held: 4,957 deletes under ./vendor; a change under it decides them again\n"},
		{name: "enter", answer: "\n", said: "still held: 4,957 deletes under ./vendor"},
		{name: "eof", eof: true, said: "\nstill held: 4,957 deletes under ./vendor"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in, typed := io.Pipe()
			var out, errOut lockedBuffer
			r := NewPrinter(&out, &errOut, false)
			r.AskOn(in, "/work/src")
			releases := r.Releases("", session.Config{})
			r.Report(massHeld("web-1", "id-1"))
			if got := errOut.String(); got != question {
				t.Fatalf("screen = %q, want the one-line question %q", got, question)
			}
			if tt.eof {
				_ = typed.Close()
			} else {
				_, _ = io.WriteString(typed, tt.answer)
			}
			screen := errOut.waitFor(t, tt.said)
			select {
			case id := <-releases:
				if !tt.release || id != "id-1" {
					t.Errorf("released %q", id)
				}
			default:
				if tt.release {
					t.Error("nothing released")
				}
			}
			if strings.Count(screen, "? [y/N]") != 1 {
				t.Errorf("screen = %q, want one question", screen)
			}
			// An answer with no question open does nothing.
			_, _ = io.WriteString(typed, "y\n")
			if len(releases) != 0 {
				t.Errorf("an answer with no question released %q", <-releases)
			}
			if tt.eof {
				// stdin ended: later holds say how to allow them instead of asking.
				r.Report(massHeld("web-1", "id-2"))
				if got := errOut.String(); strings.Count(got, "? [y/N]") != 1 || !strings.HasSuffix(got, "--allow-mass-delete\n") {
					t.Errorf("screen = %q", got)
				}
			}
			_ = typed.Close()
		})
	}
}

// The sync goes on while a question is open: other lines go below it; a newer hold replaces
// the question, and the answer is for the newest; output stays one line per event.
func TestHeldQuestionReplacedAndOutputBelow(t *testing.T) {
	in, typed := io.Pipe()
	defer typed.Close()
	var out, errOut lockedBuffer
	r := NewPrinter(&out, &errOut, false)
	r.AskOn(in, "/work/src")
	releases := r.Releases("", session.Config{})
	r.Report(massHeld("web-1", "id-1"))
	r.Report(filesync.Error{Target: filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app"}, Err: io.ErrUnexpectedEOF})
	r.Report(massHeld("web-2", "id-2"))
	_, _ = io.WriteString(typed, "y\n")
	screen := errOut.waitFor(t, "applying")
	// A terminal echoes the answer's newline; this screen doesn't.
	lines := strings.Split(screen, "\n")
	if len(lines) != 4 || !strings.HasSuffix(lines[0], "[y/N] ") || !strings.HasPrefix(lines[1], "error: ") ||
		!strings.HasPrefix(lines[2], "held: ns/web-2/app") || !strings.HasSuffix(lines[2], "[y/N] applying 4,957 deletes under ./vendor") {
		t.Errorf("screen:\n%s", screen)
	}
	if id := <-releases; id != "id-2" {
		t.Errorf("released %q, want the newest hold", id)
	}
}

// Sessions that don't ask keep today's line: --once, --dry-run, -o json, a root problem, and
// any reporter not given a terminal.
func TestHeldQuestionOnlyInInteractiveSessions(t *testing.T) {
	for _, cfg := range []session.Config{{Once: true}, {Sync: filesync.Config{DryRun: true}}} {
		var out, errOut lockedBuffer
		r := NewPrinter(&out, &errOut, false)
		r.AskOn(strings.NewReader(""), "/work/src")
		if ch := r.Releases("", cfg); ch != nil {
			t.Errorf("%+v: asks", cfg)
		}
		r.Report(massHeld("web-1", "id-1"))
		if strings.Contains(errOut.String(), "[y/N]") {
			t.Errorf("%+v: %q", cfg, errOut.String())
		}
	}
	var out, errOut lockedBuffer
	r := NewPrinter(&out, &errOut, false)
	r.AskOn(strings.NewReader(""), "/work/src")
	r.Releases("", session.Config{})
	root := massHeld("web-1", "")
	root.Reason, root.Hint = `local root "/work/src" is missing`, "nothing is deleted until it is back"
	r.Report(root)
	if !strings.HasSuffix(errOut.String(), "is missing; nothing is deleted until it is back\n") {
		t.Errorf("root problem: %q", errOut.String())
	}
	if Interactive(strings.NewReader(""), &out, &errOut, false) {
		t.Error("buffers are a terminal")
	}
}

func TestGrouped(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 4956: "4,956", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := grouped(n); got != want {
			t.Errorf("grouped(%d) = %q, want %q", n, got, want)
		}
	}
}
