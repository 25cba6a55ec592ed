package control

import (
	"fmt"
	"strings"
	"time"
)

// Summary is the one line that answers a wait asked of one or more sessions, and whether every
// replica of every one passed: what they hold and how long it took, or, per session, each
// replica that lacks it and why. wait prints it, mcp returns it.
func Summary(results []WaitResult, timeout time.Duration) (string, bool) {
	ok := true
	for _, r := range results {
		ok = ok && r.OK
	}
	var parts []string
	for _, r := range results {
		switch {
		case ok:
			what := "holds"
			switch r.For {
			case ForRestarted:
				what = "restarted with"
			case ForReady:
				what = "is Ready with"
			}
			parts = append(parts, fmt.Sprintf("%s: %s (%s) %s the local bytes of %s in %s", r.For, sessionName(r),
				count(len(r.Targets), "replica"), what, count(r.Files, "file"), time.Duration(r.DurationMs)*time.Millisecond))
		case r.OK:
		case r.Message != "":
			parts = append(parts, fmt.Sprintf("%s: %s", sessionName(r), r.Message))
		default:
			var miss []string
			for _, t := range r.Targets {
				if !t.OK {
					miss = append(miss, fmt.Sprintf("%s/%s/%s %s", t.Namespace, t.Pod, t.Container, t.Missing))
				}
			}
			parts = append(parts, fmt.Sprintf("%s: %d of %s not %s after %s: %s", sessionName(r), len(miss),
				count(len(r.Targets), "replica"), r.For, timeout, strings.Join(miss, "; ")))
		}
	}
	if !ok {
		return "wait: " + strings.Join(parts, "; "), false
	}
	return strings.Join(parts, "; "), true
}

func sessionName(r WaitResult) string {
	if r.Name != "" {
		return fmt.Sprintf("%s (entry %q)", r.Workload, r.Name)
	}
	return r.Workload
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
