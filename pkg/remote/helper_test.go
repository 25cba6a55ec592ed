package remote

import (
	"strings"
	"testing"
)

func TestParseHelperProbe(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want ProbeResult
		err  string
	}{
		{"P 1 4242 65532 65532 ok\n", ProbeResult{PID: 1, Start: 4242, UID: 65532, GID: 65532, Reachable: true}, ""},
		{"P 7 0 0 0 denied\n", ProbeResult{PID: 7}, ""},
		{"N\n", ProbeResult{}, "no process"},
		{"P 1 0 x 0 ok", ProbeResult{}, "unexpected"},
		{"P 1 -1 0 0 ok", ProbeResult{}, "unexpected"},
		{"P 1 0 0 ok", ProbeResult{}, "unexpected"},
		{"", ProbeResult{}, "unexpected"},
	} {
		got, err := ParseHelperProbe(tc.out)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.out, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q = %+v, %v; want %+v", tc.out, got, err, tc.want)
		}
	}
}
