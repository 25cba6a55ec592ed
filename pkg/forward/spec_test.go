package forward

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     Spec
		loopback bool
		err      string
	}{
		{in: "8080:80", want: Spec{Local: 8080, Remote: "80"}, loopback: true},
		{in: "0:http", want: Spec{Local: 0, Remote: "http"}, loopback: true},
		{in: ":80", want: Spec{Local: 0, Remote: "80"}, loopback: true},
		{in: "80", want: Spec{Local: 80, Remote: "80"}, loopback: true},
		{in: "http", want: Spec{Local: 0, Remote: "http"}, loopback: true},
		{in: "0.0.0.0:8080:80", want: Spec{Address: "0.0.0.0", Local: 8080, Remote: "80"}},
		{in: "localhost:8080:80", want: Spec{Address: "127.0.0.1", Local: 8080, Remote: "80"}, loopback: true},
		{in: "127.0.0.2:8080:80", want: Spec{Address: "127.0.0.2", Local: 8080, Remote: "80"}, loopback: true},
		{in: "[::1]:8080:80", want: Spec{Address: "::1", Local: 8080, Remote: "80"}, loopback: true},
		{in: "[::]:8080:80", want: Spec{Address: "::", Local: 8080, Remote: "80"}},
		{in: "8080:0", err: `REMOTE "0" is not a port`},
		{in: "70000:80", err: `LOCAL "70000" is not a port`},
		{in: "8080:", err: "REMOTE is empty"},
		{in: "8080:Not_A_Name", err: "neither a port number nor a port name"},
		{in: "host.example:8080:80", err: "is not an IP address"},
		{in: ":8080:80", err: "the address is empty"},
		{in: "::1:8080:80", err: "too many colons"},
		{in: "[127.0.0.1]:8080:80", err: "is not an IPv6 address"},
		{in: "[::1]8080:80", err: "needs its port after ]:"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%q) = %+v, %v; want error with %q", tc.in, got, err, tc.err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error is not one line: %q", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			if got.Loopback() != tc.loopback {
				t.Fatalf("Loopback() = %v, want %v", got.Loopback(), tc.loopback)
			}
			again, err := Parse(got.String())
			if err != nil || again != got {
				t.Fatalf("Parse(String()) = %+v, %v; want %+v", again, err, got)
			}
		})
	}
}

func TestRemotePort(t *testing.T) {
	ports := []NamedPort{{"http", 8080}, {"metrics", 9090}, {"http", 1}}
	for _, tc := range []struct {
		remote string
		want   int
		err    bool
	}{{"80", 80, false}, {"http", 8080, false}, {"metrics", 9090, false}, {"grpc", 0, true}} {
		got, err := RemotePort(Spec{Remote: tc.remote}, ports)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("RemotePort(%q) = %d, %v; want %d (error %v)", tc.remote, got, err, tc.want, tc.err)
		}
	}
}
