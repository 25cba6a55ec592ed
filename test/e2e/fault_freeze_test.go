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
	frozen chan int
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
	z := &tarFreezer{f: os.NewFile(uintptr(fd), "fanotify"), cid: cid, frozen: make(chan int, 1), done: make(chan struct{})}
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
						frozen = true
						z.frozen <- int(m.Pid)
					}
				}
				var r [8]byte
				binary.NativeEndian.PutUint32(r[0:], uint32(m.Fd))
				binary.NativeEndian.PutUint32(r[4:], unix.FAN_ALLOW)
				if _, err := z.f.Write(r[:]); err != nil {
					z.err = fmt.Errorf("fanotify: answering an open: %v", err)
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

// next waits up to timeout for the frozen tar's pid; ok is false if none was caught.
func (z *tarFreezer) next(timeout time.Duration) (pid int, ok bool) {
	select {
	case pid := <-z.frozen:
		return pid, true
	case <-z.done:
		select {
		case pid := <-z.frozen:
			return pid, true
		default:
			return 0, false
		}
	case <-time.After(timeout):
		return 0, false
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

// killFrozen kills a frozen tar (its exec has long been given up) and waits until it is gone:
// nothing may stay stopped after a test.
func killFrozen(t *testing.T, pid int) {
	t.Helper()
	_ = unix.Kill(pid, unix.SIGKILL)
	waitFor(t, "the frozen tar (pid "+strconv.Itoa(pid)+") to go", 30*time.Second, func() (bool, error) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true, nil
		}
		// The state follows the command's closing parenthesis; a zombie waits for its parent.
		s := string(st)
		i := strings.LastIndexByte(s, ')')
		return i >= 0 && i+2 < len(s) && s[i+2] == 'Z', nil
	})
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
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, de := range ents {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile("/proc/" + de.Name() + "/cgroup")
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
	parent := map[int]int{}
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
		if _, ppid, ok := procStat(pid); ok {
			shells = append(shells, pid)
			parent[pid] = ppid
		}
	}
	var loops []int
	for _, pid := range shells {
		if _, sub := parent[parent[pid]]; !sub {
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

// procStat returns the state letter and the parent of pid; ok is false when it is gone.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The fields after the command's closing parenthesis, which may itself hold one.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0][0], ppid, err == nil
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
	state, _, ok := procStat(pid)
	if !ok || state != 'S' {
		return false
	}
	if n, err := unreadStdin(pid); err != nil || n > 0 {
		return false
	}
	for _, c := range procs() {
		if _, ppid, ok := procStat(c); ok && ppid == pid {
			return false
		}
	}
	return true
}
