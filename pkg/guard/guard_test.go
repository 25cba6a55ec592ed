package guard

import (
	"errors"
	"strings"
	"testing"
)

func TestWrites(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	hosts := func(h string) ([]string, error) {
		switch h {
		case "kubernetes.docker.internal":
			return []string{"127.0.0.1"}, nil
		case "half.local.example":
			return []string{"127.0.0.1", "10.0.0.5"}, nil
		}
		return nil, errors.New("no such host")
	}
	prod := "https://prod.example.com:6443"
	for _, tc := range []struct {
		name    string
		c       Check
		refused bool
	}{
		{name: "a terminal writes anywhere", c: Check{Terminal: true, Context: "prod", Server: prod}},
		{name: "no terminal, remote", c: Check{Context: "prod", Server: prod}, refused: true},
		{name: "a terminal with LIVESYNC_NONINTERACTIVE", c: Check{Terminal: true, Getenv: env(EnvNonInteractive, "1"), Context: "prod", Server: prod}, refused: true},
		{name: "a terminal with CI=true", c: Check{Terminal: true, Getenv: env("CI", "true"), Context: "prod", Server: prod}, refused: true},
		{name: "a terminal with CI=false", c: Check{Terminal: true, Getenv: env("CI", "false"), Context: "prod", Server: prod}},
		{name: "loopback", c: Check{Context: "kind-dev", Server: "https://127.0.0.1:41235"}},
		{name: "loopback v6", c: Check{Context: "dev", Server: "https://[::1]:6443"}},
		{name: "localhost", c: Check{Context: "dev", Server: "https://localhost:6443"}},
		{name: "a name resolving to loopback", c: Check{Context: "docker-desktop", Server: "https://kubernetes.docker.internal:6443", LookupHost: hosts}},
		{name: "a name resolving elsewhere too", c: Check{Context: "dev", Server: "https://half.local.example:6443", LookupHost: hosts}, refused: true},
		{name: "loopback through a proxy", c: Check{Context: "bastion", Server: "https://127.0.0.1:6443", Proxy: true}, refused: true},
		{name: "no server", c: Check{Context: "dev"}, refused: true},
		{name: "allowed at its server", c: Check{Context: "staging", Server: "https://staging.example.com:443/", Allowed: []Allow{{Context: "staging", Server: "HTTPS://Staging.example.com"}}}},
		{name: "the same name at another server", c: Check{Context: "staging", Server: prod, Allowed: []Allow{{Context: "staging", Server: "https://staging.example.com"}}}, refused: true},
		{name: "another name at the same server", c: Check{Context: "prod", Server: prod, Allowed: []Allow{{Context: "staging", Server: prod}}}, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Writes("refresh deployment/web")
			if got := errors.Is(err, ErrRefused); got != tc.refused {
				t.Fatalf("refused = %v (%v), want %v", got, err, tc.refused)
			}
		})
	}
}

// TestRefusalSaysHowToAllow: one line naming the context and server, and the livesync.yaml
// line that allows them.
func TestRefusalSaysHowToAllow(t *testing.T) {
	err := Check{Context: "gke_acme_prod", Server: "https://10.1.2.3", File: "/src/app/livesync.yaml"}.Writes("refresh deployment/web")
	want := `refresh deployment/web: refused on a cluster that is not local: context "gke_acme_prod" (API server https://10.1.2.3) is neither a local cluster nor allowed: no terminal (or LIVESYNC_NONINTERACTIVE or CI is set), so this run writes to workloads only on a loopback API server or a context /src/app/livesync.yaml names, e.g. allowContexts: [{context: gke_acme_prod, server: "https://10.1.2.3"}]`
	if err == nil || err.Error() != want || strings.Contains(err.Error(), "\n") {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}
