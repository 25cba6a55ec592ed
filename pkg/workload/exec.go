package workload

import (
	"context"
	"io"
	"net/http"

	"github.com/go-logr/logr"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"
)

// PodExecutor runs commands in containers through the API server's pods/exec: WebSocket
// first, SPDY when the server or a proxy cannot upgrade to WebSocket (what kubectl exec does).
type PodExecutor struct {
	Config *rest.Config
	Client kubernetes.Interface
	// ExecPerBatch turns off the persistent stream per container (see
	// PersistentStreams): every batch is an exec of its own, as before.
	ExecPerBatch bool
}

// PersistentStreams says the sync engine may keep one exec per container open
// and send it every batch (remote.StreamCapable): a pods/exec stream lives as
// long as its connection, and its stdin is closed, ending the remote loop, when
// the client closes it or the connection drops.
func (x *PodExecutor) PersistentStreams() bool { return !x.ExecPerBatch }

// Exec runs argv in the target container; a non-zero exit is returned as an error with
// ExitStatus() (client-go's CodeExitError). Cancelling ctx closes the connection and returns
// at once, even while the remote command or a background child of it holds the streams open
// (StreamWithContext returns on ctx.Done and closes the connection); the sync engine's
// deadlines rely on that. A copy goroutine may outlive the call until stdin yields or the
// connection error reaches it; the engine drops its late output.
func (x *PodExecutor) Exec(ctx context.Context, t remote.Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	req := x.Client.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(t.Namespace).Name(t.Pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: t.Container,
			Command:   argv,
			Stdin:     stdin != nil,
			Stdout:    stdout != nil,
			Stderr:    stderr != nil,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(x.Config, http.MethodGet, req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(x.Config, http.MethodPost, req.URL())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	// The stream's copy goroutines log through the context's logger when the connection closes
	// under them, as cancelling does; the error is returned here as well, so those klog lines
	// would only repeat it on the user's terminal.
	ctx = klog.NewContext(ctx, logr.Discard())
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}
