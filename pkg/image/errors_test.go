package image

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestClassify(t *testing.T) {
	viaClient := func(err error) error { return &url.Error{Op: "Get", URL: "https://127.0.0.1:5000/v2/", Err: err} }
	status := func(code int, codes ...transport.ErrorCode) error {
		e := &transport.Error{StatusCode: code}
		for _, c := range codes {
			e.Errors = append(e.Errors, transport.Diagnostic{Code: c})
		}
		return e
	}
	r := &Resolver{timeout: 10 * time.Second}
	tests := []struct {
		name  string
		image string
		err   error
		kind  error // nil: unclassified
		msg   string
	}{
		{"401", "127.0.0.1:5000/app:dev", status(401), ErrUnauthorized,
			`resolving "127.0.0.1:5000/app:dev": unauthorized (401): log in with "docker login 127.0.0.1:5000" or add an imagePullSecret`},
		{"401 on Docker Hub", "nginx", status(401), ErrUnauthorized, `log in with "docker login" or`},
		{"UNAUTHORIZED code", "app:dev", status(400, transport.UnauthorizedErrorCode), ErrUnauthorized, "unauthorized"},
		{"403", "ghcr.io/org/app:dev", status(403), ErrForbidden, "access denied (403): your credentials for ghcr.io may not pull org/app"},
		{"DENIED code", "app:dev", status(400, transport.DeniedErrorCode), ErrForbidden, "access denied"},
		{"404", "127.0.0.1:5000/app:dev", status(404), ErrNotFound,
			`resolving "127.0.0.1:5000/app:dev": tag "dev" not found in 127.0.0.1:5000/app: push it, or check the image name`},
		{"MANIFEST_UNKNOWN", "app:dev", status(400, transport.ManifestUnknownErrorCode), ErrNotFound, `tag "dev" not found`},
		{"NAME_UNKNOWN", "app:dev", status(400, transport.NameUnknownErrorCode), ErrNotFound, `tag "dev" not found`},
		{"digest stripped from message", "app:dev@" + digestA, status(404), ErrNotFound, `resolving "app:dev": `},
		{"429", "nginx", status(429), ErrRateLimited, "rate limited (429) by docker.io"},
		{"TOOMANYREQUESTS code", "nginx", status(400, transport.TooManyRequestsErrorCode), ErrRateLimited, "rate limited"},
		{"503", "ghcr.io/o/a:1", status(503), ErrRegistryUnavailable, `registry "ghcr.io" answered 503 Service Unavailable: retry later`},
		{"connection refused", "127.0.0.1:5000/app:dev",
			viaClient(&net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "connection refused"}}),
			ErrRegistryUnavailable, `registry "127.0.0.1:5000" unreachable`},
		{"reset", "app:dev", viaClient(syscall.ECONNRESET), ErrRegistryUnavailable, "dropped the connection"},
		{"EOF", "app:dev", viaClient(io.EOF), ErrRegistryUnavailable, "dropped the connection"},
		{"DNS", "reg.example:5000/app:dev",
			viaClient(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "reg.example"}}),
			ErrRegistryUnavailable, `cannot look up registry host "reg.example" (no such host)`},
		{"timeout", "app:dev", viaClient(context.DeadlineExceeded), ErrRegistryUnavailable, "did not answer within 10s"},
		{"untrusted certificate", "reg.example/app:dev",
			viaClient(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}),
			ErrRegistryUnavailable, "TLS certificate this machine does not trust"},
		{"HTTP-only registry", "reg.example:5000/app:dev", viaClient(http.ErrSchemeMismatch), ErrInsecureRefused,
			`resolving "reg.example:5000/app:dev": registry "reg.example:5000" speaks plain HTTP only; pass --insecure-registry reg.example:5000 if you trust it`},
		{"guard", "reg.example/app:dev", viaClient(&plainHTTPError{host: "auth.example"}), ErrInsecureRefused,
			`refusing plain HTTP to "auth.example": pass --insecure-registry auth.example`},
		// A private IP is pinged over https and http at once; both failures arrive joined.
		{"https scheme mismatch beats the guard", "10.1.2.3:5000/app:dev",
			errors.Join(viaClient(&plainHTTPError{host: "10.1.2.3:5000"}), viaClient(http.ErrSchemeMismatch)),
			ErrInsecureRefused, `registry "10.1.2.3:5000" speaks plain HTTP only; pass --insecure-registry 10.1.2.3:5000`},
		{"allowed http: its own failure counts", "127.0.0.1:5000/app:dev",
			errors.Join(viaClient(http.ErrSchemeMismatch), viaClient(context.DeadlineExceeded)),
			ErrRegistryUnavailable, "did not answer within 10s"},
		{"refused https beats the guard", "10.1.2.3:5000/app:dev",
			errors.Join(viaClient(&plainHTTPError{host: "10.1.2.3:5000"}), viaClient(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED})),
			ErrRegistryUnavailable, "unreachable"},
		{"unknown status", "app:dev", status(418), nil, `resolving "app:dev": `},
		{"unknown error", "app:dev", errors.New("boom"), nil, `resolving "app:dev": boom`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.classify(mustParse(t, tt.image), tt.err)
			if !errors.Is(got, tt.err) {
				t.Errorf("classify lost the cause: %v", got)
			}
			for _, kind := range []error{ErrUnauthorized, ErrForbidden, ErrNotFound, ErrRateLimited, ErrRegistryUnavailable, ErrInsecureRefused, ErrNoTag} {
				if is := errors.Is(got, kind); is != errors.Is(tt.kind, kind) {
					t.Errorf("errors.Is(%v, %v) = %v", got, kind, is)
				}
			}
			if msg := got.Error(); !strings.Contains(msg, tt.msg) || strings.Contains(msg, "\n") {
				t.Errorf("message %q, want one line containing %q", msg, tt.msg)
			}
		})
	}
}

func TestHeadFallback(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&transport.Error{StatusCode: http.StatusMethodNotAllowed}, true},
		{&transport.Error{StatusCode: http.StatusNotFound}, true},
		{fmt.Errorf("HEAD %s: response did not include Docker-Content-Digest header", "u"), true},
		{&transport.Error{StatusCode: http.StatusUnauthorized}, false},
		{&transport.Error{StatusCode: http.StatusForbidden}, false},
		{&transport.Error{StatusCode: http.StatusTooManyRequests}, false},
		{&url.Error{Op: "Head", Err: syscall.ECONNREFUSED}, false},
		{&url.Error{Op: "Head", Err: &plainHTTPError{host: "h"}}, false},
	}
	for _, tt := range tests {
		if got := headFallback(tt.err); got != tt.want {
			t.Errorf("headFallback(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
