// Package guard decides whether a run that no one watches may write to workload objects on a
// cluster: coding agents and scripts run commands against whatever kubeconfig context is
// current, and a write to the wrong cluster is the accident it prevents. It is a guard against
// mistakes, not a security boundary: whoever runs the command can allow the context.
package guard

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// EnvNonInteractive set to a true value makes a run non-interactive even at a terminal; CI
// (set by CI systems) does too.
const EnvNonInteractive = "LIVESYNC_NONINTERACTIVE"

// ErrRefused is wrapped by the error of a write the guard refuses.
var ErrRefused = errors.New("refused on a cluster that is not local")

// Allow is one context livesync.yaml allows non-interactive writes to: by its name, and the
// API server it must point at, so that a teammate's file allows the cluster it means and not
// whatever your kubeconfig calls by that name.
type Allow struct {
	Context string `json:"context"`
	Server  string `json:"server"`
}

// Check is what the decision looks at.
type Check struct {
	// Terminal says a person may be watching: stdin and stderr are terminals.
	Terminal bool
	// Getenv reads the environment (os.Getenv).
	Getenv func(string) string
	// Context is the kubeconfig context in use, Server its cluster's API server, Proxy whether
	// the cluster is reached through a proxy (proxy-url): its loopback is not this machine's.
	Context, Server string
	Proxy           bool
	// Allowed are livesync.yaml's allowContexts, from File ("" when there is no file).
	Allowed []Allow
	File    string
	// LookupHost resolves a host name (net.LookupHost); nil: names other than localhost are
	// not resolved.
	LookupHost func(string) ([]string, error)
}

// NonInteractive says whether no one is watching this run.
func (c Check) NonInteractive() bool {
	return !c.Terminal || truthy(c.getenv(EnvNonInteractive)) || truthy(c.getenv("CI"))
}

func (c Check) getenv(k string) string {
	if c.Getenv == nil {
		return ""
	}
	return c.Getenv(k)
}

func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "no":
		return false
	}
	return true
}

// Writes says whether the run may do what (e.g. "refresh deployment/web"): nil when someone
// watches, when the cluster is local, or when livesync.yaml allows the context at its server;
// else ErrRefused, in one line that says how to allow it.
func (c Check) Writes(what string) error {
	if !c.NonInteractive() || c.Local() || c.allowed() {
		return nil
	}
	ctx := c.Context
	if ctx == "" {
		ctx = "(none)"
	}
	where := "livesync.yaml in the project"
	if c.File != "" {
		where = c.File
	}
	server := c.Server
	if c.Proxy {
		server += ", through a proxy"
	}
	return fmt.Errorf("%s: %w: context %q (API server %s) is neither a local cluster nor allowed: no terminal (or %s or CI is set), so this run writes to workloads only on a loopback API server or a context %s names, e.g. allowContexts: [{context: %s, server: %s}]",
		what, ErrRefused, ctx, server, EnvNonInteractive, where, quoteYAML(c.Context), quoteYAML(c.Server))
}

// Local reports whether the API server is on this machine: its host is a loopback address,
// localhost, or a name that resolves to loopback addresses only (Docker Desktop's
// kubernetes.docker.internal), and no proxy stands between.
func (c Check) Local() bool {
	if c.Proxy {
		return false
	}
	u, err := url.Parse(c.Server)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Hostname()
	if loopback(host) {
		return true
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if net.ParseIP(host) != nil || c.LookupHost == nil {
		return false
	}
	addrs, err := c.LookupHost(host)
	return err == nil && len(addrs) > 0 && !slices.ContainsFunc(addrs, func(a string) bool { return !loopback(a) })
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// allowed reports whether livesync.yaml names the context with the server it points at.
func (c Check) allowed() bool {
	return c.Context != "" && slices.ContainsFunc(c.Allowed, func(a Allow) bool {
		return a.Context == c.Context && sameServer(a.Server, c.Server)
	})
}

// sameServer compares API server URLs as the client would reach them: scheme and host
// case-insensitively, the default port spelled or not, a trailing slash ignored.
func sameServer(a, b string) bool {
	ua, err1 := url.Parse(strings.TrimSuffix(a, "/"))
	ub, err2 := url.Parse(strings.TrimSuffix(b, "/"))
	if err1 != nil || err2 != nil || ua.Host == "" {
		return false
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "http") {
			return "80"
		}
		return "443"
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Hostname(), ub.Hostname()) && port(ua) == port(ub) && ua.Path == ub.Path
}

// quoteYAML quotes s for the suggested line when YAML would read it otherwise.
func quoteYAML(s string) string {
	if s == "" || strings.HasPrefix(s, "-") || strings.ContainsAny(s, ":{}[],&*#?|<>=!%@`'\" ") {
		return fmt.Sprintf("%q", s)
	}
	return s
}
