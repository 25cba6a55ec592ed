package remote

import "strings"

// streamLoop is the remote side of a persistent stream (scripts/stream.sh,
// whose header describes the framing), with applyScript, scanScript and
// downloadScript as the bodies of its functions livesync_apply,
// livesync_scan and livesync_download.
var streamLoop = strings.NewReplacer(
	"livesync_apply_body\n", applyScript,
	"livesync_scan_body\n", scanScript,
	"livesync_download_body\n", downloadScript,
).Replace(script("stream.sh"))

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
