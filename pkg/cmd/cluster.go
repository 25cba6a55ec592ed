package cmd

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultConnectTimeout bounds the first answer of the API server (--connect-timeout).
const DefaultConnectTimeout = 10 * time.Second

// restConfig reads the kubeconfig flags into a client config, or says in one line what is
// missing: no kubeconfig at all, a context or cluster that is not in it.
func (g *globalOptions) restConfig() (*rest.Config, error) {
	loader := g.configFlags.ToRawKubeConfigLoader()
	raw, rawErr := loader.RawConfig()
	cfg, err := g.configFlags.ToRESTConfig()
	if err == nil && rawErr == nil && len(raw.Contexts) == 0 && !g.serverGiven() {
		err = clientcmd.ErrEmptyConfig
	}
	if err == nil {
		return cfg, nil
	}
	switch {
	case clientcmd.IsEmptyConfig(err), errors.Is(err, fs.ErrNotExist):
		return nil, clusterError{fmt.Errorf("no cluster to talk to: %s; set KUBECONFIG, pass --kubeconfig, or --server", g.kubeconfigWhere())}
	case g.flagValue(g.configFlags.Context) != "" && rawErr == nil && raw.Contexts[*g.configFlags.Context] == nil:
		return nil, clusterError{fmt.Errorf("context %q is not in %s: use one of %s", *g.configFlags.Context, g.kubeconfigWhere(), listNames(raw.Contexts))}
	case g.flagValue(g.configFlags.ClusterName) != "" && rawErr == nil && raw.Clusters[*g.configFlags.ClusterName] == nil:
		return nil, clusterError{fmt.Errorf("cluster %q is not in %s: use one of %s", *g.configFlags.ClusterName, g.kubeconfigWhere(), listNames(raw.Clusters))}
	}
	return nil, clusterError{fmt.Errorf("reading kubeconfig (%s): %w", g.kubeconfigWhere(), err)}
}

// probe asks the API server for its version within timeout, so that a cluster that refuses,
// does not answer, fails TLS or rejects the credentials fails here in one line, before
// anything is planned or written.
func (g *globalOptions) probe(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return clusterError{fmt.Errorf("creating a Kubernetes client for %s: %w", cfg.Host, err)}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = dc.RESTClient().Get().AbsPath("/version").Do(ctx).Error()
	if err == nil || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return nil // it answered: what the caller may do is asked where it matters
	}
	return clusterError{g.explain(cfg.Host, timeout, err)}
}

// explain turns a failed first request into the cause and the next step.
func (g *globalOptions) explain(host string, timeout time.Duration, err error) error {
	where := fmt.Sprintf("the API server at %s (%s)", host, g.contextName())
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var certErr x509.CertificateInvalidError
	var urlErr *url.Error
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s rejected the credentials (401 Unauthorized): log in again or refresh the token, or choose another --context", where)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("%s: cannot resolve %q: check the kubeconfig's server address, your VPN, or --context", where, dnsErr.Name)
	case errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &certErr):
		return fmt.Errorf("%s: TLS: %v: check the cluster's certificate-authority in the kubeconfig, or --context", where, tlsCause(err))
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return fmt.Errorf("%s did not answer within %s: check that the cluster is up and reachable (VPN, proxy), or raise --connect-timeout", where, timeout)
	case errors.As(err, &opErr) && strings.Contains(opErr.Err.Error(), "refused"):
		return fmt.Errorf("%s refused the connection: is the cluster running? choose another with --context%s", where, g.otherContexts())
	case errors.As(err, &urlErr):
		return fmt.Errorf("%s: %w: check the cluster, or --context", where, urlErr.Err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

func tlsCause(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.As(err, &unknownCA):
		return "its certificate is signed by an authority the kubeconfig does not trust"
	case errors.As(err, &hostErr):
		return fmt.Sprintf("its certificate is not valid for %q", hostErr.Host)
	}
	var certErr x509.CertificateInvalidError
	if errors.As(err, &certErr) {
		return "its certificate is invalid: " + certErr.Error()
	}
	return err.Error()
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// contextName is the context in use, as kubectl would pick it, for the error lines.
func (g *globalOptions) contextName() string {
	if c := g.flagValue(g.configFlags.Context); c != "" {
		return "context " + c
	}
	raw, err := g.configFlags.ToRawKubeConfigLoader().RawConfig()
	if err != nil || raw.CurrentContext == "" {
		return "no context"
	}
	return "context " + raw.CurrentContext
}

// otherContexts is ": contexts a, b" (the kubeconfig's others), or "".
func (g *globalOptions) otherContexts() string {
	raw, err := g.configFlags.ToRawKubeConfigLoader().RawConfig()
	if err != nil || len(raw.Contexts) < 2 {
		return ""
	}
	return " (contexts: " + listNames(raw.Contexts) + ")"
}

// kubeconfigWhere names the kubeconfig that was read: the flag, $KUBECONFIG, or the default.
func (g *globalOptions) kubeconfigWhere() string {
	if k := g.flagValue(g.configFlags.KubeConfig); k != "" {
		return "kubeconfig " + k + existence(k)
	}
	if k := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); k != "" {
		return "KUBECONFIG=" + k + existence(k)
	}
	return "kubeconfig " + clientcmd.RecommendedHomeFile + existence(clientcmd.RecommendedHomeFile)
}

func existence(paths string) string {
	for _, p := range strings.Split(paths, string(os.PathListSeparator)) {
		if _, err := os.Stat(p); err == nil {
			return ""
		}
	}
	return " (not found)"
}

func (g *globalOptions) serverGiven() bool { return g.flagValue(g.configFlags.APIServer) != "" }

func (g *globalOptions) flagValue(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func listNames[V any](m map[string]V) string {
	names := sortedKeys(m)
	if len(names) == 0 {
		return "(none)"
	}
	if len(names) > 8 {
		names = append(slices.Clip(names[:8]), fmt.Sprintf("and %d more", len(names)-8))
	}
	return strings.Join(names, ", ")
}
