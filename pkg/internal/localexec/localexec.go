// Package localexec runs commands on this machine the way an exec runs them
// in a container, so that tests can exercise real remote scripts against
// temp dirs, with busybox or the host's GNU tools, and without a cluster.
// It is test support: nothing outside tests imports it.
package localexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Busybox returns a Runner whose tools are busybox applets (see NewBusybox)
// in a directory of the test's, skipping the test when busybox is not
// installed.
func Busybox(t testing.TB, without ...string) *Runner {
	t.Helper()
	if runtime.GOOS == "windows" {
		// Under wine, /bin/busybox is found (Z: is /) but is a Linux program.
		t.Skip("the container side runs Linux's busybox, which a Windows test binary cannot start")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("needs /bin/busybox (apt-get install busybox-static)")
	}
	r, err := NewBusybox("/bin/busybox", t.TempDir(), without...)
	if err != nil {
		t.Fatal(err)
	}
	r.Tmp = TempDir(t)
	return r
}

// TempDir returns a directory of the test's for a Runner's Tmp, writable by
// every user as /tmp is (tests run the remote side as nobody too).
func TempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Variants returns the busybox and GNU (host) runners to run a test with,
// skipping the test when either is missing.
func Variants(t testing.TB) map[string]*Runner {
	t.Helper()
	if _, err := os.Stat("/bin/tar"); err != nil {
		t.Skip("needs GNU tar at /bin/tar")
	}
	return map[string]*Runner{"busybox": Busybox(t), "gnu": {Tmp: TempDir(t)}}
}

// Runner runs argv on this machine. With Bin set (see NewBusybox) PATH holds
// only that directory, so sh and every tool a script calls are busybox
// applets; otherwise the host's sh and GNU tools run.
type Runner struct {
	Bin string
	// SysProcAttr, if set, is used for every command: tests run the remote
	// side as a non-root user with it, as most containers do.
	SysProcAttr *syscall.SysProcAttr
	// Tmp, if set, is every command's TMPDIR: what the scripts stage there
	// (a stream's frame and loop record, which a killed loop leaves) goes
	// with the test's temp dirs instead of staying in this machine's /tmp.
	Tmp string
}

// NewBusybox fills dir with links to busybox's applets, except those in
// without (e.g. "sha256sum" to test an image without it), and returns a
// Runner that runs with only dir on PATH.
//
// A busybox built with FEATURE_SH_STANDALONE (Debian's busybox-static) runs
// its own applets whatever PATH says, so when without names tools other than
// sh, sh is the host's /bin/sh instead, which does honour PATH.
func NewBusybox(busybox, dir string, without ...string) (*Runner, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("listing applets of %q: %w", busybox, err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if slices.Contains(without, applet) {
			continue
		}
		target := busybox
		if applet == "sh" && len(without) > 0 {
			target = "/bin/sh"
		}
		if err := os.Symlink(target, filepath.Join(dir, applet)); err != nil {
			return nil, fmt.Errorf("linking applet %q: %w", applet, err)
		}
	}
	return &Runner{Bin: dir}, nil
}

// Run runs argv with stdin, streaming its output to stdout and stderr (either
// may be nil); a non-zero exit is an ExitCode. Cancelling ctx ends it the
// way a closed exec stream does.
func (l *Runner) Run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	name := argv[0]
	env := os.Environ()
	if l.Tmp != "" {
		env = append(env, "TMPDIR="+l.Tmp)
	}
	if l.Bin != "" {
		name = filepath.Join(l.Bin, argv[0])
		env = append(env, "PATH="+l.Bin)
		if _, err := os.Stat(name); err != nil {
			// What container runtimes say when the image lacks argv[0].
			return fmt.Errorf("exec: %q: executable file not found in $PATH", argv[0])
		}
	}
	cmd := exec.Command(name, argv[1:]...)
	cmd.Env, cmd.Stdin, cmd.SysProcAttr = env, stdin, l.SysProcAttr
	ownGroup(cmd)
	// The output goes through pipes of our own: with a writer that is not an
	// *os.File, os/exec waits for EOF on its pipe even after ctx is done, and a
	// background child (`sleep 1000 &`) holds it open, the way it holds a
	// container's exec stream open.
	var (
		pipes  []*os.File
		copies sync.WaitGroup
	)
	closePipes := func() {
		for _, p := range pipes {
			_ = p.Close()
		}
	}
	pipe := func(w io.Writer) (*os.File, error) {
		if w == nil {
			return nil, nil
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		pipes = append(pipes, pr, pw)
		copies.Go(func() { _, _ = io.Copy(w, pr) })
		return pw, nil
	}
	var err error
	if cmd.Stdout, err = pipe(stdout); err == nil {
		if stderr == stdout {
			cmd.Stderr = cmd.Stdout
		} else {
			cmd.Stderr, err = pipe(stderr)
		}
	}
	// So does stdin, unless it is a file: os/exec's Wait waits for its copy
	// to end, which the stdin of a stream, open until the exec ends, never
	// does by itself; a container's exec ends with its process, whatever it
	// left unread.
	var stdinR, stdinW *os.File
	if _, isFile := stdin.(*os.File); err == nil && stdin != nil && !isFile {
		if stdinR, stdinW, err = os.Pipe(); err == nil {
			cmd.Stdin = stdinR
		}
	}
	if err == nil {
		err = cmd.Start()
	}
	if stdinR != nil {
		_ = stdinR.Close() // the child's now
	}
	if err != nil {
		if stdinW != nil {
			_ = stdinW.Close()
		}
		closePipes()
		copies.Wait()
		return err
	}
	if stdinW != nil {
		go func() {
			_, _ = io.Copy(stdinW, stdin)
			_ = stdinW.Close()
		}()
		defer stdinW.Close() // a write the exited child can't read fails
	}
	for i := 1; i < len(pipes); i += 2 {
		_ = pipes[i].Close() // the write ends now belong to the child
	}
	// Cancelling tears the exec down like a closed stream, and also kills the
	// process group: unlike a container, where a background child outlives
	// its exec, a test must leave nothing running on the host.
	stop := make(chan struct{})
	cancelled := make(chan struct{})
	go func() {
		defer close(cancelled)
		select {
		case <-ctx.Done():
			killGroup(cmd)
			closePipes()
		case <-stop:
		}
	}()
	err = cmd.Wait()
	copies.Wait()
	close(stop)
	<-cancelled
	closePipes()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ExitCode(ee.ExitCode())
	}
	return err
}

// ExitCode is the error of a command that exited with this non-zero code; it
// has an ExitStatus, as client-go's exec.CodeExitError does.
type ExitCode int

func (c ExitCode) Error() string   { return fmt.Sprintf("command terminated with exit code %d", int(c)) }
func (c ExitCode) ExitStatus() int { return int(c) }

// Sandboxed returns argv with the remote directory argument of a livesync script (sh -c
// SCRIPT livesync-NAME DIR ...) moved under the host directory dir, so several fake targets
// can share this machine; any other argv (the on-sync command's included) is returned as is.
func Sandboxed(argv []string, dir string) []string {
	if len(argv) <= 4 || !strings.HasPrefix(argv[3], "livesync") || argv[3] == "livesync-on-sync" {
		return argv
	}
	argv = slices.Clone(argv)
	argv[4] = filepath.Join(dir, argv[4])
	return argv
}
