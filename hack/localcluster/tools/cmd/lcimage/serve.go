package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// serve runs an OCI registry on addr until ctx ends. Blobs go to dir when it is set, so large layers
// do not sit in memory; manifests and tags always live in memory and die with the process.
func serve(ctx context.Context, addr, dir string, verbose bool, stderr io.Writer) error {
	logOut := io.Discard
	if verbose {
		logOut = stderr
	}
	opts := []registry.Option{registry.Logger(log.New(logOut, "registry: ", log.LstdFlags))}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating blob dir %q: %w", dir, err)
		}
		opts = append(opts, registry.WithBlobHandler(registry.NewDiskBlobHandler(dir)))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %q: %w", addr, err)
	}
	srv := &http.Server{Handler: registry.New(opts...), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "lcimage: registry listening on %s\n", ln.Addr())
	select {
	case err := <-errc:
		return fmt.Errorf("serving %q: %w", addr, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stopping the registry: %w", err)
	}
	return nil
}
