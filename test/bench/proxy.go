//go:build bench

package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// The remote profile: most users sync into a cluster across a network, not over loopback.
const (
	remoteRate = 50e6 / 8              // bytes per second, each direction
	remoteRTT  = 20 * time.Millisecond // round trip added to every byte
)

// link is one direction of the shaped network: bytes leave in arrival order at rate, and
// arrive oneWay later.
type link struct {
	rate   float64
	oneWay time.Duration
	mu     sync.Mutex
	free   time.Time // when the link has sent everything queued so far
}

// deliverAt reserves the link for n bytes that arrived at at and returns when they reach the
// other end.
func (l *link) deliverAt(at time.Time, n int) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := at
	if l.free.After(at) {
		start = l.free
	}
	l.free = start.Add(time.Duration(float64(n) / l.rate * float64(time.Second)))
	return l.free.Add(l.oneWay)
}

// shapedProxy forwards TCP connections to target through two links (up and down) shared by all
// connections, like one network path.
type shapedProxy struct {
	ln       net.Listener
	target   string
	up, down *link
}

func startProxy(target string, rate float64, rtt time.Duration) (*shapedProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &shapedProxy{ln: ln, target: target,
		up: &link{rate: rate, oneWay: rtt / 2}, down: &link{rate: rate, oneWay: rtt / 2}}
	go p.serve()
	return p, nil
}

func (p *shapedProxy) addr() string { return p.ln.Addr().String() }
func (p *shapedProxy) close()       { _ = p.ln.Close() }

func (p *shapedProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				return
			}
			go pipeShaped(s, c, p.up)
			pipeShaped(c, s, p.down)
		}()
	}
}

// pipeShaped copies src to dst through l: a reader stamps each chunk with its arrival, a writer
// delivers it when l says it arrives.
func pipeShaped(dst, src net.Conn, l *link) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b[:n], l.deliverAt(time.Now(), n)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	for range q { // drain, so the reader can end
	}
	_ = dst.Close()
	_ = src.Close()
}

// throughProxy returns a copy of c whose client, executor, kubectl and sessions reach the
// apiserver through p: a kubeconfig of its own in dir points at the proxy, with the
// apiserver's name kept for TLS.
func (c *cluster) throughProxy(dir string, p *shapedProxy) (*cluster, error) {
	raw, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		return nil, err
	}
	ctx := raw.Contexts[raw.CurrentContext]
	if ctx == nil || raw.Clusters[ctx.Cluster] == nil {
		return nil, fmt.Errorf("kubeconfig %q has no current cluster", c.kubeconfig)
	}
	cl := raw.Clusters[ctx.Cluster]
	u, err := url.Parse(cl.Server)
	if err != nil {
		return nil, err
	}
	if cl.TLSServerName == "" {
		cl.TLSServerName = u.Hostname()
	}
	u.Host = p.addr()
	cl.Server = u.String()
	path := filepath.Join(dir, "kubeconfig-remote")
	if err := clientcmd.WriteToFile(*raw, path); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	r := *c
	r.kubeconfig, r.client, r.exec = path, client, &workload.PodExecutor{Config: cfg, Client: client}
	return &r, nil
}

// apiserverAddr is host:port of the apiserver in c's kubeconfig.
func (c *cluster) apiserverAddr() (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}

// measureRemote runs save→visible of one small file, the exec floor and the hand-rolled
// `kubectl exec … cat >` through a proxy that shapes the path to the apiserver like a remote
// cluster's (remoteRate each way, remoteRTT), interleaved as on loopback.
func (b *bench) measureRemote(ctx context.Context) error {
	rc, closeProxy, err := b.remoteCluster()
	if err != nil {
		return err
	}
	defer closeProxy()
	local := filepath.Join(b.tmp, "remote")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(local, "edit.txt"), []byte("start\n"), 0o644); err != nil {
		return err
	}
	saved := b.c
	b.c = rc
	l, err := b.startLatency(ctx, "lat", local)
	b.c = saved
	if err != nil {
		return err
	}
	defer l.stop()
	floors, saves, hands, err := l.triples(ctx, b, max(b.edits/2, 10))
	if err != nil {
		return err
	}
	b.logf("remote floor ms: %s", fmtDurations(floors))
	b.logf("remote save  ms: %s", fmtDurations(saves))
	b.logf("remote kubectl exec cat ms: %s", fmtDurations(hands))
	n := fmt.Sprintf(" (n=%d)", len(saves))
	prof := fmt.Sprintf("remote profile (%.0f Mbit/s, %s RTT)", remoteRate*8/1e6, remoteRTT)
	f50, s50, h50 := median(floors), median(saves), median(hands)
	b.res.pair("save→visible, 1 small file, p50, "+prof+n, msec(s50), "ms", "exec floor through the same proxy, p50", msec(f50)).
		target("≤ 0.15× floor", msec(s50) <= 0.15*msec(f50))
	b.res.pair("save→visible, 1 small file, p50, "+prof+n, msec(s50), "ms", fmt.Sprintf("hand-rolled `kubectl exec -i … cat >` through the same proxy, p50 (%d of its writes lost)", l.handLost), msec(h50))
	return nil
}

// remoteCluster is b's cluster reached through a proxy shaped like a remote cluster's path
// (remoteRate each way, remoteRTT); close the proxy when done.
func (b *bench) remoteCluster() (*cluster, func(), error) {
	addr, err := b.c.apiserverAddr()
	if err != nil {
		return nil, nil, err
	}
	p, err := startProxy(addr, remoteRate, remoteRTT)
	if err != nil {
		return nil, nil, err
	}
	rc, err := b.c.throughProxy(b.tmp, p)
	if err != nil {
		p.close()
		return nil, nil, err
	}
	return rc, p.close, nil
}
