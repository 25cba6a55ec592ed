//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// TestHeldDeleteAnsweredInTerminal: in a terminal, a mass delete is held with a question that
// the mapping growing does not answer; y deletes exactly what was held in every replica, and
// Ctrl-C still ends the session cleanly.
func TestHeldDeleteAnsweredInTerminal(t *testing.T) {
	ns := namespace(t)
	repo := "held-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 2, corev1.PullIfNotPresent)
	local := t.TempDir()
	write(t, filepath.Join(local, "keep/main.py"), "print('kept')")
	for i := range 80 {
		write(t, filepath.Join(local, fmt.Sprintf("vendor/pkg/f%03d.go", i)), "package pkg")
	}
	const sel, root = "app=web", "/app"

	term := startInPty(t, local, "--kubeconfig", kubeconfigFor([]string{"-n", ns}), "-n", ns, "deploy/web", local+":"+root)
	waitConverged(t, ns, sel, 2, local, root, 2*time.Minute)
	term.waitFor(t, "watching ", time.Minute)

	// Moved out of the tree: one event, so one batch holds all 82 deletes whatever the load (an
	// rm -rf may be cut into batches, whose later ones the guard holds as part of the same
	// burst, but then the question counts only those: TestEngineHoldsMassDeleteCutIntoBatches).
	if err := os.Rename(filepath.Join(local, "vendor"), filepath.Join(t.TempDir(), "vendor")); err != nil {
		t.Fatal(err)
	}
	const question = "apply these 82 deletes under ./vendor? [y/N] "
	term.waitFor(t, question, time.Minute)
	// The mapping grows until the held deletes are no longer "more than half": still held.
	for i := range 200 {
		write(t, filepath.Join(local, fmt.Sprintf("more/f%03d.txt", i)), "more")
	}
	pods := runningPods(t, ns, sel)
	for _, p := range pods {
		waitFor(t, "more/ in "+p.Name, time.Minute, func() (bool, error) {
			return kexec(t, ns, p.Name, "test", "-e", root+"/more/f199.txt").code == 0, nil
		})
	}
	// Whatever batch or rescan more/ brought had its chance to delete: the watcher's rescan of
	// a burst follows its batch within a second or two.
	time.Sleep(3 * time.Second)
	for _, p := range pods {
		if r := kexec(t, ns, p.Name, "test", "-e", root+"/vendor/pkg/f000.go"); r.code != 0 {
			t.Fatalf("%s: held deletes ran without an answer: %s", p.Name, r)
		}
	}
	if n := strings.Count(term.String(), "? [y/N]"); n != 2 {
		t.Errorf("%d questions, want one per replica:\n%s", n, term.String())
	}

	term.typeIn(t, "y\n")
	term.waitFor(t, "applying 82 deletes under ./vendor", 10*time.Second)
	waitConverged(t, ns, sel, 2, local, root, time.Minute)

	term.typeIn(t, "\x03") // Ctrl-C, as the terminal sends it
	if err := term.wait(30 * time.Second); err != nil {
		t.Fatalf("after Ctrl-C: %v\n%s", err, term.String())
	}
	if !strings.Contains(term.String(), "livesync: 2 containers") {
		t.Errorf("no summary after Ctrl-C:\n%s", term.String())
	}
}

// ptySession is the binary under test run with a pseudo-terminal as its stdin, stdout and
// stderr (and controlling terminal), as a user's shell runs it.
type ptySession struct {
	cmd    *exec.Cmd
	master *os.File
	done   chan error
	mu     sync.Mutex
	screen strings.Builder
}

func startInPty(t *testing.T, dir string, args ...string) *ptySession {
	t.Helper()
	master, slave, err := openPty()
	if err != nil {
		t.Fatalf("opening a pty: %v", err)
	}
	defer slave.Close()
	s := &ptySession{cmd: exec.Command(e.binary, args...), master: master, done: make(chan error, 1)}
	s.cmd.Dir = dir
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = slave, slave, slave
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			s.mu.Lock()
			s.screen.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return // EIO once the binary has exited
			}
		}
	}()
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		_ = s.wait(10 * time.Second)
		_ = master.Close()
		t.Logf("terminal:\n%s", s.String())
	})
	return s
}

// openPty opens a pseudo-terminal pair: its master for the test, its slave for the binary.
func openPty() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlocking the pty: %w", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("numbering the pty: %w", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

func (s *ptySession) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.screen.String()
}

// waitFor waits until the screen shows text.
func (s *ptySession) waitFor(t *testing.T, text string, timeout time.Duration) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%q on the terminal", text), timeout, func() (bool, error) {
		return strings.Contains(s.String(), text), nil
	})
}

// typeIn types text at the terminal.
func (s *ptySession) typeIn(t *testing.T, text string) {
	t.Helper()
	if _, err := s.master.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the binary to exit and returns how it did.
func (s *ptySession) wait(timeout time.Duration) error {
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(timeout):
		return fmt.Errorf("still running after %s", timeout)
	}
}
