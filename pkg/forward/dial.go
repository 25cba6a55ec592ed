package forward

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
)

// PodDialer dials pods/portforward through the API server: WebSocket first, SPDY when the
// server or a proxy cannot upgrade to WebSocket (what kubectl port-forward and the exec of
// pkg/workload do).
type PodDialer struct {
	Config *rest.Config
	Client kubernetes.Interface
}

// Dial implements Dialer. client-go's dialers take no context: the dial runs aside, and a
// connection that arrives after ctx ended is closed.
func (d *PodDialer) Dial(ctx context.Context, namespace, pod string) (httpstream.Connection, error) {
	u := d.Client.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(d.Config)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	ws, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, d.Config)
	if err != nil {
		return nil, err
	}
	dialer := portforward.NewFallbackDialerForStreaming(ws, spdyDialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	type result struct {
		conn httpstream.Connection
		err  error
	}
	done := make(chan result, 1)
	go func() {
		conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
		done <- result{conn, err}
	}()
	select {
	case r := <-done:
		return r.conn, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.conn != nil {
				_ = r.conn.Close()
			}
		}()
		return nil, fmt.Errorf("dialling pods/portforward: %w", ctx.Err())
	}
}
