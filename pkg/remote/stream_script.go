package remote

import "strings"

// streamLoop is the remote side of a persistent stream (scripts/stream.sh,
// whose header describes the framing), with applyScript, scanScript and
// downloadScript as the bodies of its functions livesync_apply,
// livesync_scan and livesync_download, and scripts/marks.sh for the
// functions that keep its scans' time and markers.
var streamLoop = strings.NewReplacer(
	"livesync_apply_body\n", applyScript,
	"livesync_marks_body\n", marksScript,
	"livesync_scan_body\n", scanScript,
	"livesync_download_body\n", downloadScript,
).Replace(script("stream.sh"))

// marksScript defines the stream loop's livesync_prep, livesync_now,
// livesync_mark and livesync_pick (see scripts/marks.sh).
var marksScript = script("marks.sh")

// StreamScanFuncs returns the shell text that defines a scan's functions as
// the stream's loop defines them: those of scripts/marks.sh, and
// livesync_scan, which runs scan.sh. The loop calls livesync_mark in its own
// shell before each scan, then livesync_scan with scan.sh's arguments in a
// subshell, with $0 livesync-stream; what runs that way costs what a scan
// over the stream costs (test/bench measures it so).
func StreamScanFuncs() string {
	return marksScript + "livesync_scan() {\n" + scanScript + "}\n"
}

// streamRuns maps the scripts a stream runs as a run frame (see
// scripts/stream.sh) to the loop's function of each.
var streamRuns = map[string]string{scanScript: "livesync_scan", downloadScript: "livesync_download"}

// shellWords quotes each arg as one '…' shell word, for the loop's eval, on
// one line: a newline in an arg leaves the quotes as "$nl", which the loop
// sets to a newline. Any other byte but NUL is safe inside single quotes, so
// names with spaces, quotes, newlines and non-UTF-8 bytes arrive unchanged.
func shellWords(args []string) string {
	q := strings.NewReplacer("'", `'\''`, "\n", `'"$nl"'`)
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('\'')
		b.WriteString(q.Replace(a))
		b.WriteByte('\'')
	}
	return b.String()
}
