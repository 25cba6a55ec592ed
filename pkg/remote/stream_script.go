package remote

import "strings"

// streamLoop is the remote side of a persistent stream (scripts/stream.sh,
// whose header describes the framing), with applyScript as the body of its
// function livesync_apply.
var streamLoop = strings.Replace(script("stream.sh"), "livesync_apply_body\n", applyScript, 1)

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
