package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
)

// A long start's progress is one line of a terminal, redrawn in place and
// cleared before the line that says the start is done; nothing anywhere
// else but -o json, which gets it at most once a second.
func TestStartProgressLine(t *testing.T) {
	tg := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app"}
	events := []filesync.Progress{
		{Target: tg, Start: true, Listed: 5000, Hashed: 0, Elapsed: 2 * time.Second},
		{Target: tg, Start: true, Listed: 9000, Hashed: 1000, Elapsed: 2500 * time.Millisecond},
		{Target: tg, Start: true, Listed: 10000, Hashed: 4000, Files: 2, Bytes: 1 << 20, TotalBytes: 4 << 20, Elapsed: 2900 * time.Millisecond},
		{Target: tg, Start: true, Listed: 10000, Hashed: 4000, Files: 2, Bytes: 3 << 20, TotalBytes: 4 << 20, Elapsed: 3100 * time.Millisecond},
	}
	t.Run("terminal", func(t *testing.T) {
		var out, errOut bytes.Buffer
		r := NewPrinter(&out, &errOut, false)
		r.tty = true // a fake terminal
		for _, e := range events[:3] {
			r.Report(e)
		}
		got := errOut.String()
		want := "\r\033[Ksyncing " + tg.String() + ": 5000 listed, 0 hashed, 2500 files/s" +
			"\r\033[Ksyncing " + tg.String() + ": 9000 listed, 1000 hashed, 4000 files/s" +
			"\r\033[Ksyncing " + tg.String() + ": 10000 listed, 4000 hashed, sending 2 files, 1.0 MiB/4.0 MiB, 353.1 KiB/s, ETA 9s"
		if got != want {
			t.Fatalf("terminal got\n%q\nwant\n%q", got, want)
		}
		errOut.Reset()
		r.Report(filesync.InitialSync{Target: tg, Files: 2, Bytes: 4 << 20, Duration: 3 * time.Second})
		if got := errOut.String(); got != "\r\033[K" {
			t.Errorf("done: stderr %q, want the line cleared", got)
		}
		if !strings.HasPrefix(out.String(), "synced "+tg.String()) {
			t.Errorf("done: stdout %q", out.String())
		}
	})
	t.Run("not a terminal", func(t *testing.T) {
		var out, errOut bytes.Buffer
		r := NewPrinter(&out, &errOut, false)
		for _, e := range events {
			r.Report(e)
		}
		if out.Len()+errOut.Len() != 0 {
			t.Errorf("printed %q %q", out.String(), errOut.String())
		}
	})
	t.Run("json", func(t *testing.T) {
		var out, errOut bytes.Buffer
		r := NewPrinter(&out, &errOut, true)
		for _, e := range events {
			r.Report(e)
		}
		// A new start of the same target reports from its beginning.
		r.Report(filesync.Progress{Target: tg, Start: true, Listed: 10, Elapsed: 2 * time.Second})
		evs := assertNDJSON(t, out.String())
		var at []float64
		for _, ev := range evs {
			if ev["type"] != "progress" {
				t.Errorf("event %v", ev)
			}
			at = append(at, ev["durationMs"].(float64))
		}
		if want := []float64{2000, 3100, 2000}; len(at) != len(want) || at[0] != want[0] || at[1] != want[1] || at[2] != want[2] {
			t.Errorf("progress events at %v ms, want %v", at, want)
		}
		if evs[1]["listed"] != 10000.0 || evs[1]["hashed"] != 4000.0 || evs[1]["bytes"] != float64(3<<20) || evs[1]["totalBytes"] != float64(4<<20) {
			t.Errorf("progress = %v", evs[1])
		}
		if errOut.Len() != 0 {
			t.Errorf("-o json wrote to stderr: %q", errOut.String())
		}
	})
}
