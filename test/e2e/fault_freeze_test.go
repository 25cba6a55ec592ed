//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"golang.org/x/sys/unix"
)

// --- tar freezing on the local node ----------------------------------------------------------------

// tarFreezer stops (SIGSTOP) the first `tar -x…` of a container that opens a file under the
// container's remote root, before that open returns, and reports its pid (on this host). It
// watches with a fanotify permission event (FAN_OPEN_PERM) on the container's mount, which holds
// the opener until this process answers, so the tar is caught however fast it is: a poll of `ps`
// in the container missed a tar that extracted a 5 MB file between two polls. It needs the node
// to be this machine (the local cluster) and root.
type tarFreezer struct {
	f      *os.File // the fanotify group
	cid    string   // the container's ID
	frozen chan nodeProc
	once   sync.Once
	done   chan struct{}
	err    error // why the loop ended early; read after done
}

// startTarFreezer marks the mount of remote in container app of pod and starts answering its
// open events.
func startTarFreezer(t *testing.T, ns, pod, remote string) *tarFreezer {
	t.Helper()
	cid := appContainerID(t, ns, pod)
	pid, err := containerPID(cid)
	if err != nil {
		t.Fatalf("the tar freezer: %v", err)
	}
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_CONTENT|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_LARGEFILE)
	if err != nil {
		t.Fatalf("the tar freezer: fanotify_init: %v (needs root and a kernel with CONFIG_FANOTIFY_ACCESS_PERMISSIONS)", err)
	}
	// /proc/PID/root resolves in the container's mount namespace: the mount marked is the one
	// the container's processes write through.
	root := fmt.Sprintf("/proc/%d/root%s", pid, remote)
	if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD|unix.FAN_MARK_MOUNT, unix.FAN_OPEN_PERM, unix.AT_FDCWD, root); err != nil {
		unix.Close(fd)
		t.Fatalf("the tar freezer: fanotify_mark %s: %v", root, err)
	}
	z := &tarFreezer{f: os.NewFile(uintptr(fd), "fanotify"), cid: cid, frozen: make(chan nodeProc, 1), done: make(chan struct{})}
	go z.loop()
	t.Cleanup(z.stop)
	return z
}

// loop answers every open event (allow), first stopping the opener when it is the container's
// first extracting tar; then it closes the group, which allows whatever is pending.
func (z *tarFreezer) loop() {
	defer close(z.done)
	defer z.stop()
	buf := make([]byte, 64*1024)
	metaLen := int(unsafe.Sizeof(unix.FanotifyEventMetadata{}))
	for {
		n, err := z.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				z.err = err
			}
			return
		}
		frozen := false
		for off := 0; off+metaLen <= n; {
			m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[off]))
			if m.Vers != unix.FANOTIFY_METADATA_VERSION || m.Event_len < uint32(metaLen) {
				z.err = fmt.Errorf("fanotify: unexpected event version %d, length %d", m.Vers, m.Event_len)
				return
			}
			off += int(m.Event_len)
			if m.Fd < 0 {
				continue
			}
			if m.Mask&unix.FAN_OPEN_PERM != 0 {
				if !frozen && z.isTar(int(m.Pid)) {
					// Stopped before the open returns: the signal is taken on the way back to
					// user space, so the tar writes nothing of this file.
					if err := unix.Kill(int(m.Pid), unix.SIGSTOP); err == nil {
						if p, ok := procOf(int(m.Pid)); ok {
							frozen = true
							z.frozen <- p
						}
					}
				}
				var r [8]byte
				binary.NativeEndian.PutUint32(r[0:], uint32(m.Fd))
				binary.NativeEndian.PutUint32(r[4:], unix.FAN_ALLOW)
				if _, err := z.f.Write(r[:]); err != nil {
					z.err = fmt.Errorf("fanotify: answering an open: %w", err)
				}
			}
			unix.Close(int(m.Fd))
		}
		if frozen || z.err != nil {
			return
		}
	}
}

// isTar says whether pid is a process of the container whose argv is an extracting tar: argv[0]
// named tar (busybox's applets keep it) and an option word with an x, as livesync's apply runs
// it (`tar -x…`); nothing else in the test images runs one.
func (z *tarFreezer) isTar(pid int) bool {
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil || !strings.Contains(string(cg), z.cid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if filepath.Base(argv[0]) != "tar" {
		return false
	}
	for _, a := range argv[1:] {
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "x") {
			return true
		}
	}
	return false
}

// next waits up to timeout for the frozen tar; ok is false if none was caught.
func (z *tarFreezer) next(timeout time.Duration) (p nodeProc, ok bool) {
	select {
	case p := <-z.frozen:
		return p, true
	case <-z.done:
		select {
		case p := <-z.frozen:
			return p, true
		default:
			return nodeProc{}, false
		}
	case <-time.After(timeout):
		return nodeProc{}, false
	}
}

// why says why next found nothing.
func (z *tarFreezer) why() string {
	select {
	case <-z.done:
		if z.err != nil {
			return z.err.Error()
		}
		return "the freezer ended"
	default:
		return "no tar opened a file under the remote root"
	}
}

// stop closes the group: the kernel allows every open still waiting for an answer.
func (z *tarFreezer) stop() { z.once.Do(func() { z.f.Close() }) }

// killFrozen kills a process a fault froze (its exec has long been given up) and waits until it
// is gone: nothing may stay stopped after a test. One already gone (the stream fence of the
// retry's loop kills a frozen loop and its tar) is left so, and so is whatever took its pid since.
func killFrozen(t *testing.T, p nodeProc) {
	t.Helper()
	if p.gone() {
		t.Logf("the frozen process (pid %d) was gone before the test's cleanup", p.pid)
		return
	}
	_ = p.signal(unix.SIGKILL)
	waitFor(t, "the frozen process (pid "+strconv.Itoa(p.pid)+") to go", 30*time.Second, func() (bool, error) {
		return p.gone(), nil
	})
}

// nodeProc is a process of this host, told from a later one with its pid by its start time: pids
// wrap within minutes on a busy node (pid_max 32768), and a process a fault froze may be killed
// by the product long before the test's cleanup.
type nodeProc struct {
	pid   int
	start string // field 22 of /proc/PID/stat, in clock ticks since boot
}

// procOf returns the process that has pid now; ok is false when there is none.
func procOf(pid int) (nodeProc, bool) {
	f := procFields(pid)
	if len(f) < 20 {
		return nodeProc{}, false
	}
	return nodeProc{pid: pid, start: f[19]}, true
}

// gone says whether p ended: its pid is free, another process's, or a zombie's (which waits
// for its parent).
func (p nodeProc) gone() bool {
	f := procFields(p.pid)
	return len(f) < 20 || f[19] != p.start || f[0] == "Z" || f[0] == "X"
}

// signal sends sig to p, unless it is gone; through a pidfd, which holds the process it was
// opened on, so the signal can't reach another that takes the pid after the check.
func (p nodeProc) signal(sig unix.Signal) error {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if p.gone() {
		return unix.ESRCH
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

// appContainerID returns the ID of the running container app of pod, as containerd names it.
func appContainerID(t *testing.T, ns, pod string) string {
	t.Helper()
	p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "app" && cs.State.Running != nil {
			if _, cid, _ := strings.Cut(cs.ContainerID, "://"); cid != "" {
				return cid
			}
		}
	}
	t.Fatalf("pod %s has no running app container", pod)
	return ""
}

// containerPID finds a process of the container with this ID on this host: one whose cgroup
// names it (containerd's cgroup paths end in the ID, under cgroupfs and systemd alike).
func containerPID(cid string) (int, error) {
	for _, pid := range procs() {
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err == nil && strings.Contains(string(cg), cid) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process of container %.12s on this host: the tar freezer needs the node to be this machine", cid)
}

// --- stream loops on the local node ------------------------------------------------------------

// streamLoops returns the pids (on this host) of the stream loops in container cid: the shells
// that run stream.sh, as the client starts it (`sh -c SCRIPT livesync-stream`), but not the
// subshells they fork for a batch, which share their command line.
func streamLoops(cid string) []int {
	var shells []int
	parent := map[int]string{}
	for _, pid := range procs() {
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !strings.Contains(string(cg), cid) {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if err != nil || len(argv) != 4 || argv[1] != "-c" || argv[3] != "livesync-stream" {
			continue
		}
		if f := procFields(pid); len(f) > 1 {
			shells = append(shells, pid)
			parent[pid] = f[1]
		}
	}
	var loops []int
	for _, pid := range shells {
		if ppid, _ := strconv.Atoi(parent[pid]); parent[ppid] == "" {
			loops = append(loops, pid)
		}
	}
	return loops
}

// procs lists the pids of this host.
func procs() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, de := range ents {
		if pid, err := strconv.Atoi(de.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procFields returns the fields of /proc/PID/stat after the command (which may hold spaces and
// parentheses): the state, the parent's pid, …; nil when pid is gone.
func procFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// unreadStdin returns how many bytes wait in the pipe on pid's stdin, unread.
func unreadStdin(pid int) (int, error) {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/fd/0", pid), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD: a pipe answers it too
}

// idleLoop says whether the stream loop pid waits for its next frame: asleep, running no batch
// (no child) and with nothing unread on its stdin. A loop between the steps of a frame runs, or
// has a child (dd, the batch's subshell) or bytes to read.
func idleLoop(pid int) bool {
	if f := procFields(pid); len(f) == 0 || f[0] != "S" {
		return false
	}
	if n, err := unreadStdin(pid); err != nil || n > 0 {
		return false
	}
	ppid := strconv.Itoa(pid)
	for _, c := range procs() {
		if f := procFields(c); len(f) > 1 && f[1] == ppid {
			return false
		}
	}
	return true
}
