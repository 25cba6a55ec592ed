package forward

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Spec is one --forward: a local listener and the port it reaches in the pod.
type Spec struct {
	// Address is the local address to listen on; empty means 127.0.0.1.
	Address string
	// Local is the local port; 0 picks a free one (the listening event says which).
	Local int
	// Remote is the pod's port: a number, or the name of a container port.
	Remote string
}

// DefaultAddress is where a forward listens when no address is given: this machine only.
const DefaultAddress = "127.0.0.1"

// Parse reads [ADDRESS:]LOCAL:REMOTE, kubectl port-forward's LOCAL:REMOTE with an optional
// address in front ([::1] for IPv6). REMOTE alone means the same port locally, or a free one
// when it is a name; :REMOTE means a free local port.
func Parse(s string) (Spec, error) {
	bad := func(why string) error {
		return fmt.Errorf("invalid forward %q: %s: want [ADDRESS:]LOCAL:REMOTE, e.g. 8080:80, 0:http or 0.0.0.0:8080:80", s, why)
	}
	rest := s
	var sp Spec
	if strings.HasPrefix(rest, "[") {
		end := strings.Index(rest, "]:")
		if end < 0 {
			return Spec{}, bad("an IPv6 address needs its port after ]:")
		}
		sp.Address, rest = rest[1:end], rest[end+2:]
		if ip := net.ParseIP(sp.Address); ip == nil || ip.To4() != nil {
			return Spec{}, bad(fmt.Sprintf("%q is not an IPv6 address", sp.Address))
		}
	}
	parts := strings.Split(rest, ":")
	switch {
	case len(parts) == 3 && sp.Address == "":
		sp.Address, parts = parts[0], parts[1:]
		if sp.Address == "" {
			return Spec{}, bad("the address is empty")
		}
	case len(parts) > 2:
		return Spec{}, bad("too many colons (write an IPv6 address in brackets)")
	}
	if sp.Address == "localhost" {
		sp.Address = DefaultAddress
	}
	if sp.Address != "" && net.ParseIP(sp.Address) == nil {
		return Spec{}, bad(fmt.Sprintf("%q is not an IP address", sp.Address))
	}
	remote := parts[len(parts)-1]
	if err := checkRemote(remote); err != nil {
		return Spec{}, bad(err.Error())
	}
	sp.Remote = remote
	switch {
	case len(parts) == 2 && parts[0] == "":
		sp.Local = 0
	case len(parts) == 2:
		n, err := port(parts[0], true)
		if err != nil {
			return Spec{}, bad("LOCAL " + err.Error())
		}
		sp.Local = n
	default: // REMOTE alone
		if n, err := strconv.Atoi(remote); err == nil {
			sp.Local = n
		}
	}
	return sp, nil
}

func checkRemote(r string) error {
	if r == "" {
		return fmt.Errorf("REMOTE is empty")
	}
	if r[0] >= '0' && r[0] <= '9' {
		if _, err := port(r, false); err != nil {
			return fmt.Errorf("REMOTE %w", err)
		}
		return nil
	}
	if errs := validation.IsValidPortName(r); len(errs) > 0 {
		return fmt.Errorf("REMOTE %q is neither a port number nor a port name: %s", r, errs[0])
	}
	return nil
}

func port(s string, zero bool) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 65535 || n == 0 && !zero {
		if zero {
			return 0, fmt.Errorf("%q is not a port (0-65535; 0 picks a free one)", s)
		}
		return 0, fmt.Errorf("%q is not a port (1-65535)", s)
	}
	return n, nil
}

// ListenAddress is the address the forward listens on.
func (s Spec) ListenAddress() string {
	if s.Address == "" {
		return DefaultAddress
	}
	return s.Address
}

// Loopback says whether the forward listens on this machine only (127.0.0.0/8 or ::1): no
// other machine can reach the pod through it.
func (s Spec) Loopback() bool {
	ip := net.ParseIP(s.ListenAddress())
	return ip != nil && ip.IsLoopback()
}

// String is the spec as Parse reads it.
func (s Spec) String() string {
	local := strconv.Itoa(s.Local) + ":" + s.Remote
	switch {
	case s.Address == "":
		return local
	case strings.Contains(s.Address, ":"):
		return "[" + s.Address + "]:" + local
	}
	return s.Address + ":" + local
}

// RemotePort is the pod's port for the spec: the number, or the container port of that name
// (looked up in containers first, then in the pod's other containers, as kubectl does).
func RemotePort(s Spec, ports []NamedPort) (int, error) {
	if n, err := strconv.Atoi(s.Remote); err == nil {
		return n, nil
	}
	for _, p := range ports {
		if p.Name == s.Remote {
			return p.Port, nil
		}
	}
	return 0, fmt.Errorf("no container port named %q", s.Remote)
}

// NamedPort is a container port with a name.
type NamedPort struct {
	Name string
	Port int
}
