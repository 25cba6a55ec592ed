package image

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Sentinel errors of Resolve, for callers that decide (retry, skip, advise) with errors.Is.
// The errors Resolve returns already carry a one-line explanation for the user.
var (
	// ErrNoTag: the reference is pinned by digest only, so there is no tag to follow.
	ErrNoTag = errors.New("no tag to resolve")
	// ErrUnauthorized: the registry wants credentials (HTTP 401).
	ErrUnauthorized = errors.New("unauthorized (401)")
	// ErrForbidden: the credentials may not pull this repository (HTTP 403).
	ErrForbidden = errors.New("access denied (403)")
	// ErrNotFound: the tag or repository does not exist (404, MANIFEST_UNKNOWN, NAME_UNKNOWN).
	ErrNotFound = errors.New("not found (404)")
	// ErrRateLimited: the registry throttles this client (HTTP 429).
	ErrRateLimited = errors.New("rate limited (429)")
	// ErrRegistryUnavailable: 5xx, refused connection, DNS failure, timeout or untrusted certificate.
	ErrRegistryUnavailable = errors.New("registry unavailable")
	// ErrInsecureRefused: the registry speaks plain HTTP and the user has not allowed it.
	ErrInsecureRefused = errors.New("plain HTTP refused")
)

// resolveError is a classified failure: one sentence for the user, the sentinel for
// decisions, the cause for debugging with errors.As.
type resolveError struct {
	msg   string
	kind  error
	cause error
}

func (e *resolveError) Error() string   { return e.msg }
func (e *resolveError) Unwrap() []error { return []error{e.kind, e.cause} }

// plainHTTPError is what the transport guard returns instead of sending an http://
// request to a host the user did not vouch for.
type plainHTTPError struct{ host string }

func (e *plainHTTPError) Error() string {
	return fmt.Sprintf("refusing plain HTTP to %q: pass --insecure-registry %s if you trust it", e.host, e.host)
}

// classify turns a go-containerregistry or net/http failure for ref into a
// resolveError, or wraps it as is when nothing more useful can be said.
func (r *Resolver) classify(ref Reference, err error) error {
	reg := ref.Registry
	fail := func(kind error, format string, args ...any) error {
		msg := fmt.Sprintf("resolving %q: ", ref.WithoutDigest()) + fmt.Sprintf(format, args...)
		return &resolveError{msg: msg, kind: kind, cause: err}
	}
	var (
		certErr  *tls.CertificateVerificationError
		dnsErr   *net.DNSError
		opErr    *net.OpError
		plainErr *plainHTTPError
		httpErr  *transport.Error
	)
	// Order matters: a ping may fail twice at once (https, then http), and the https
	// failure says more, unless http was allowed and failed for its own reason.
	switch {
	case errors.Is(err, http.ErrSchemeMismatch) && !r.plainHTTPAllowed(reg):
		return fail(ErrInsecureRefused, "registry %q speaks plain HTTP only; pass --insecure-registry %s if you trust it", reg, reg)
	case errors.As(err, &certErr):
		return fail(ErrRegistryUnavailable, "registry %q presented a TLS certificate this machine does not trust (%v): add its CA to the system trust store", reg, certErr.Err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return fail(ErrRegistryUnavailable, "registry %q did not answer within %s: check the address and your network", reg, r.timeout)
	case errors.As(err, &dnsErr):
		return fail(ErrRegistryUnavailable, "cannot look up registry host %q (%v): check the image name and your DNS", dnsErr.Name, dnsErr.Err)
	case errors.As(err, &opErr):
		return fail(ErrRegistryUnavailable, "registry %q unreachable (%v): check the address and your network", reg, opErr.Err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return fail(ErrRegistryUnavailable, "registry %q dropped the connection: retry, or check proxies in between", reg)
	case errors.As(err, &plainErr):
		return fail(ErrInsecureRefused, "%v", plainErr)
	case errors.As(err, &httpErr):
		if kind := statusKind(httpErr); kind != nil {
			return fail(kind, "%s", advice(ref, kind, httpErr))
		}
	}
	return fmt.Errorf("resolving %q: %w", ref.WithoutDigest(), err)
}

// statusKind maps a registry's HTTP error to a sentinel: the status first, then the
// distribution-spec error codes for registries that use odd statuses.
func statusKind(e *transport.Error) error {
	switch s := e.StatusCode; {
	case s == http.StatusUnauthorized:
		return ErrUnauthorized
	case s == http.StatusForbidden:
		return ErrForbidden
	case s == http.StatusNotFound:
		return ErrNotFound
	case s == http.StatusTooManyRequests:
		return ErrRateLimited
	case s >= 500:
		return ErrRegistryUnavailable
	}
	for _, d := range e.Errors {
		switch d.Code {
		case transport.UnauthorizedErrorCode:
			return ErrUnauthorized
		case transport.DeniedErrorCode:
			return ErrForbidden
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
			return ErrNotFound
		case transport.TooManyRequestsErrorCode:
			return ErrRateLimited
		}
	}
	return nil
}

// advice is the second half of the user's sentence: what happened, what to do.
func advice(ref Reference, kind error, e *transport.Error) string {
	switch {
	case errors.Is(kind, ErrUnauthorized):
		login := "docker login " + ref.Registry
		if ref.Registry == dockerHub {
			login = "docker login"
		}
		return fmt.Sprintf("%v: log in with %q or add an imagePullSecret", kind, login)
	case errors.Is(kind, ErrForbidden):
		return fmt.Sprintf("%v: your credentials for %s may not pull %s; check the account's permissions", kind, ref.Registry, ref.Repository)
	case errors.Is(kind, ErrNotFound):
		return fmt.Sprintf("tag %q not found in %s: push it, or check the image name", ref.Tag, ref.Name())
	case errors.Is(kind, ErrRateLimited):
		return fmt.Sprintf("%v by %s: wait a minute, or log in to raise the limit", kind, ref.Registry)
	default:
		return fmt.Sprintf("registry %q answered %d %s: retry later", ref.Registry, e.StatusCode, http.StatusText(e.StatusCode))
	}
}
