//go:build bench

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/livesync-dev/kubectl-livesync/pkg/sync"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

func main() {
	cfg, _ := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	cl, _ := kubernetes.NewForConfig(cfg)
	x := &workload.PodExecutor{Config: cfg, Client: cl}
	t := sync.Target{Namespace: os.Args[1], Pod: os.Args[2], Container: "livesync-bench"}
	var in io.Reader = os.Stdin
	switch os.Args[4] {
	case "pipe64":
		pr, pw := io.Pipe()
		go func() {
			bw := bufio.NewWriterSize(pw, 64<<10)
			_, err := io.Copy(bw, os.Stdin)
			bw.Flush()
			pw.CloseWithError(err)
		}()
		in = pr
	case "pipe":
		pr, pw := io.Pipe()
		go func() {
			_, err := io.Copy(pw, os.Stdin)
			pw.CloseWithError(err)
		}()
		in = pr
	}
	start := time.Now()
	err := x.Exec(context.Background(), t, []string{"sh", "-c", "mkdir -p " + os.Args[3] + " && exec tar -x -f - -C " + os.Args[3]}, in, io.Discard, os.Stderr)
	fmt.Println(os.Args[4], "exec", time.Since(start), err)
}
