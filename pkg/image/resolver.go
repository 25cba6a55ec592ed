package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"k8s.io/client-go/kubernetes"
)

// DefaultTimeout bounds one Resolve call when WithTimeout is not given.
const DefaultTimeout = 10 * time.Second

// Resolver asks registries which digest a tag serves. One Resolver keeps its
// connections and registry tokens across calls, so `refresh --watch` should poll
// with a single one. Resolve is safe for concurrent use; UseKubernetesAuth is not.
type Resolver struct {
	timeout   time.Duration
	userAgent string
	transport http.RoundTripper
	insecure  map[string]bool // lower-case HOST or HOST:PORT
	keychain  authn.Keychain  // local credentials; Kubernetes pull secrets are added on top
	puller    *remote.Puller
	indexes   sync.Map // digest -> true: Resolve found it to be a multi-platform index
}

// Option configures a Resolver.
type Option func(*Resolver)

// WithInsecureRegistries allows plain HTTP to these registries, given as HOST (any
// port) or HOST:PORT. Loopback registries never need it. It does not disable TLS
// verification for registries that do speak HTTPS.
func WithInsecureRegistries(hosts []string) Option {
	return func(r *Resolver) {
		for _, h := range hosts {
			r.insecure[strings.ToLower(h)] = true
		}
	}
}

// WithTimeout bounds each Resolve call, ping, token and manifest requests together.
// The default, also kept for d <= 0, is DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return func(r *Resolver) {
		if d > 0 {
			r.timeout = d
		}
	}
}

// WithTransport sets the base HTTP transport, for tests and proxies. The default is a
// clone of http.DefaultTransport owned by the Resolver, so connections are reused
// across calls without sharing state with the rest of the process.
func WithTransport(t http.RoundTripper) Option {
	return func(r *Resolver) { r.transport = t }
}

// WithUserAgent names the client in registry logs; the default is "kubectl-livesync".
func WithUserAgent(ua string) Option {
	return func(r *Resolver) { r.userAgent = ua }
}

// withKeychain replaces the local docker credentials, so tests never read the
// developer's ~/.docker/config.json.
func withKeychain(k authn.Keychain) Option {
	return func(r *Resolver) { r.keychain = k }
}

// NewResolver returns a Resolver that authenticates with the local docker
// credentials (config file and credential helpers), like docker pull would.
func NewResolver(opts ...Option) (*Resolver, error) {
	r := &Resolver{
		timeout:   DefaultTimeout,
		userAgent: "kubectl-livesync",
		transport: defaultTransport(),
		insecure:  map[string]bool{},
		keychain:  authn.DefaultKeychain,
	}
	for _, o := range opts {
		o(r)
	}
	for h := range r.insecure {
		if err := checkHost(h); err != nil {
			return nil, err
		}
	}
	if err := r.usePuller(r.keychain); err != nil {
		return nil, err
	}
	return r, nil
}

// defaultTransport is a private clone of http.DefaultTransport: proxies from the
// environment and keep-alives, without sharing idle connections with other packages.
func defaultTransport() http.RoundTripper {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		return t.Clone()
	}
	return http.DefaultTransport
}

// checkHost rejects the common mistakes of writing a URL or an image instead of a host.
func checkHost(h string) error {
	if _, err := name.NewRegistry(h); err != nil || h == "" || strings.ContainsAny(h, "/@") {
		return fmt.Errorf("invalid insecure registry %q: write HOST or HOST:PORT, e.g. 10.1.2.3:5000", h)
	}
	return nil
}

func (r *Resolver) usePuller(k authn.Keychain) error {
	p, err := remote.NewPuller(
		remote.WithAuthFromKeychain(k),
		remote.WithTransport(&plainHTTPGuard{next: r.transport, allowed: r.plainHTTPAllowed}),
		remote.WithUserAgent(r.userAgent),
		// One quick retry for flakes; `refresh --watch` polls again anyway, and a
		// long backoff would outlive the timeout. 429 is not retried: retrying feeds it.
		remote.WithRetryBackoff(remote.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Steps: 2}),
		remote.WithRetryStatusCodes(http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout),
	)
	if err != nil {
		return fmt.Errorf("configuring registry client: %w", err)
	}
	r.puller = p
	return nil
}

// UseKubernetesAuth adds the pull secrets a pod would use: those named in
// pullSecrets and those of serviceAccount ("" means "default") in namespace. Local
// credentials still come first. Reading secrets is a sensitive permission, so when
// it is denied or fails the Resolver keeps working with local credentials and the
// returned error is only a warning, worth printing at -v.
// Call it before sharing the Resolver between goroutines.
func (r *Resolver) UseKubernetesAuth(ctx context.Context, client kubernetes.Interface, namespace, serviceAccount string, pullSecrets []string) error {
	k, err := kauth.New(ctx, client, kauth.Options{
		Namespace:          namespace,
		ServiceAccountName: serviceAccount,
		ImagePullSecrets:   pullSecrets,
	})
	if err != nil {
		return fmt.Errorf("reading image pull secrets in namespace %q (using local docker credentials only): %w", namespace, err)
	}
	return r.usePuller(authn.NewMultiKeychain(r.keychain, k))
}

// Resolve returns the digest ref's tag serves now, ignoring any digest ref pins.
// For a multi-platform image that is the index digest, which is what containerd
// records as imageID and what pins every platform at once.
func (r *Resolver) Resolve(ctx context.Context, ref Reference) (string, error) {
	if ref.Tag == "" {
		return "", &resolveError{
			msg:  fmt.Sprintf("resolving %q: the image is pinned by digest only, so there is no tag to follow; write it as IMAGE:TAG@DIGEST", ref.Written),
			kind: ErrNoTag,
		}
	}
	// Where plain HTTP is allowed, go-containerregistry tries HTTPS first and falls back to HTTP.
	tag, err := name.NewTag(ref.Registry+"/"+ref.Repository+":"+ref.Tag, r.nameOpts(ref)...)
	if err != nil {
		return "", fmt.Errorf("resolving %q: %w", ref.WithoutDigest(), err)
	}
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	// HEAD is free of rate limits on Docker Hub and carries Docker-Content-Digest;
	// GET is the fallback for registries that refuse HEAD or omit the header.
	desc, err := r.puller.Head(tctx, tag)
	if err == nil {
		return r.resolved(*desc), nil
	}
	if headFallback(err) {
		d, gerr := r.puller.Get(tctx, tag)
		if gerr == nil {
			return r.resolved(d.Descriptor), nil
		}
		err = gerr
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("resolving %q: %w", ref.WithoutDigest(), ctx.Err())
	}
	return "", r.classify(ref, err)
}

// resolved notes whether a resolved digest is an index, for IsIndex.
func (r *Resolver) resolved(d v1.Descriptor) string {
	if d.MediaType.IsIndex() {
		r.indexes.Store(d.Digest.String(), true)
	}
	return d.Digest.String()
}

// IsIndex reports whether Resolve found digest to be a multi-platform index, so that a pod
// running it can be said to match the index rather than a platform manifest, at no cost.
func (r *Resolver) IsIndex(digest string) bool {
	_, ok := r.indexes.Load(digest)
	return ok
}

// headFallback tells whether a failed HEAD is worth a GET: yes when the registry
// answered but not usefully (405, a missing header, a 404 without the body that
// tells tag from repository), no when it refused us or could not be reached at all
// (the http.Client's *url.Error), since GET would fail the same way.
func headFallback(err error) bool {
	var httpErr *transport.Error
	if errors.As(err, &httpErr) {
		switch httpErr.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
			return false
		}
		return true
	}
	var urlErr *url.Error
	return !errors.As(err, &urlErr)
}

// plainHTTPAllowed is the security policy: plain HTTP only to loopback and to the
// registries the user named. go-containerregistry alone would also use it for
// RFC 1918 addresses and *.localhost names, sending credentials in clear text.
func (r *Resolver) plainHTTPAllowed(hostport string) bool {
	hostport = strings.ToLower(hostport)
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return true
	}
	return r.insecure[hostport] || r.insecure[host] || r.insecure["["+host+"]"]
}

// plainHTTPGuard enforces plainHTTPAllowed below go-containerregistry, on every
// request it makes: pings, token fetches, manifests.
type plainHTTPGuard struct {
	next    http.RoundTripper
	allowed func(hostport string) bool
}

func (g *plainHTTPGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.allowed(req.URL.Host) {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper owns the body, even when it refuses
		}
		return nil, &plainHTTPError{host: req.URL.Host}
	}
	return g.next.RoundTrip(req)
}
