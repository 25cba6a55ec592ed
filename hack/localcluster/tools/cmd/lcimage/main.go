// Command lcimage serves the local cluster's registry and builds its test images from Debian's
// static busybox, with go-containerregistry and without Docker.
//
//	lcimage serve  [--addr 127.0.0.1:5000] [--dir DIR] [-v]
//	lcimage build  [--registry 127.0.0.1:5000] NAME[:TAG] --kind app|app-gnu|app-notar|app-nodd|app-nonroot|distroless|pause [--marker STRING] [--broken]
//	lcimage digest REF
//
// build prints the pushed manifest digest; digest prints the one a registry serves for REF.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

const usage = `usage:
  lcimage serve  [--addr 127.0.0.1:5000] [--dir DIR] [-v]
  lcimage build  [--registry 127.0.0.1:5000] NAME[:TAG] --kind app|app-gnu|app-notar|app-nodd|app-nonroot|distroless|pause [--marker STRING] [--broken]
  lcimage digest REF
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lcimage: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("missing subcommand")
	}
	fs := flag.NewFlagSet("lcimage "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	switch args[0] {
	case "serve":
		addr := fs.String("addr", "127.0.0.1:5000", "listen address")
		dir := fs.String("dir", "", "keep blobs in `DIR` instead of memory")
		verbose := fs.Bool("v", false, "log every request")
		if err := parseArgs(fs, args[1:], 0); err != nil {
			return err
		}
		return serve(ctx, *addr, *dir, *verbose, stderr)
	case "build":
		registry := fs.String("registry", "127.0.0.1:5000", "registry to push to")
		var o buildOptions
		fs.StringVar(&o.Kind, "kind", "app", "image kind: app, app-gnu, app-notar, app-nodd, app-nonroot, distroless or pause")
		fs.StringVar(&o.Marker, "marker", "", "content of /etc/livesync-build; a new marker gives a new digest")
		fs.StringVar(&o.Busybox, "busybox", "/bin/busybox", "static busybox binary (Debian busybox-static)")
		fs.StringVar(&o.Pause, "pause", "", "pause binary (default: pause next to lcimage)")
		fs.BoolVar(&o.Broken, "broken", false, "push the manifest only, so the tag resolves but pulls fail")
		if err := parseArgs(fs, args[1:], 1); err != nil {
			return err
		}
		if o.Pause == "" {
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("locating the pause binary: %w", err)
			}
			o.Pause = filepath.Join(filepath.Dir(self), "pause")
		}
		ref, err := name.ParseReference(*registry+"/"+fs.Arg(0), name.Insecure)
		if err != nil {
			return fmt.Errorf("parsing image name %q: %w", fs.Arg(0), err)
		}
		digest, err := buildAndPush(ctx, ref, o)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, digest)
		return nil
	case "digest":
		if err := parseArgs(fs, args[1:], 1); err != nil {
			return err
		}
		ref, err := name.ParseReference(fs.Arg(0), name.Insecure)
		if err != nil {
			return fmt.Errorf("parsing reference %q: %w", fs.Arg(0), err)
		}
		desc, err := remote.Head(ref, remote.WithContext(ctx))
		if err != nil {
			return fmt.Errorf("resolving %q: %w", ref, err)
		}
		fmt.Fprintln(stdout, desc.Digest)
		return nil
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown subcommand %q", args[0])
	}
}

// parseArgs parses flags placed before or after the positional arguments and checks their count:
// the documented commands put NAME between flags.
func parseArgs(fs *flag.FlagSet, args []string, positional int) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != positional {
		fs.Usage()
		return fmt.Errorf("%s: want %d argument(s), got %d", fs.Name(), positional, len(pos))
	}
	return fs.Parse(pos) // leaves fs.Args() == pos
}
