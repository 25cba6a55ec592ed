//go:build bench

// Command probe runs inside a benchmark container and says when files got their expected
// content, by the container's wall clock: the cluster runs on the benchmark's machine, so that
// clock is the host's and a host timestamp taken before a local write can be subtracted from it.
//
// It reads requests on stdin, one at a time:
//
//	W <n>
//	<size> <sha256 hex> <absolute path>   (n lines)
//
// and answers "A" once it is watching (the writer may start), then "T <unix nanoseconds>" when
// every file has its content, taken just before the check that found the last one; "E <reason>"
// on a bad request. It wakes on inotify events of the files' directories and polls every 2 ms as
// well, for directories that do not exist yet.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

type want struct {
	path string
	size int64
	sum  []byte
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	reply := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 2 || f[0] != "W" {
			reply("E bad request %q", in.Text())
			continue
		}
		n, _ := strconv.Atoi(f[1])
		wants := make([]want, 0, n)
		for range n {
			if !in.Scan() {
				return
			}
			parts := strings.SplitN(in.Text(), " ", 3)
			if len(parts) != 3 {
				reply("E bad line %q", in.Text())
				os.Exit(2) // the request is out of step now
			}
			size, _ := strconv.ParseInt(parts[0], 10, 64)
			sum, _ := hex.DecodeString(parts[1])
			wants = append(wants, want{path: parts[2], size: size, sum: sum})
		}
		fd := watchDirs(wants)
		reply("A")
		t := wait(fd, wants)
		if fd >= 0 {
			unix.Close(fd)
		}
		reply("T %d", t.UnixNano())
	}
}

func watchDirs(wants []want) int {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return -1
	}
	seen := map[string]bool{}
	for _, w := range wants {
		d := filepath.Dir(w.path)
		if !seen[d] {
			seen[d] = true
			_, _ = unix.InotifyAddWatch(fd, d, unix.IN_CREATE|unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO|unix.IN_ATTRIB)
		}
	}
	return fd
}

// wait returns the time of the check that found the last pending file in place. Each check
// goes through the pending files in order and stops at the first one missing, so waiting for
// 10,000 files costs one stat per wake-up until they arrive (in the order they were asked for,
// ideally: a tar stream's).
func wait(fd int, wants []want) time.Time {
	pending := wants
	buf := make([]byte, 64<<10)
	for {
		now := time.Now()
		for len(pending) > 0 && has(pending[0]) {
			pending = pending[1:]
		}
		if len(pending) == 0 {
			return now
		}
		if fd < 0 {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, _ := unix.Poll(pfd, 2); n > 0 {
			for {
				if k, err := unix.Read(fd, buf); k <= 0 || err != nil {
					break
				}
			}
		}
	}
}

// has reports whether the file has the wanted size and content; the size is checked first so
// a big file being written is not hashed on every event.
func has(w want) bool {
	fi, err := os.Stat(w.path)
	if err != nil || fi.Size() != w.size {
		return false
	}
	f, err := os.Open(w.path)
	if err != nil {
		return false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	return bytes.Equal(h.Sum(nil), w.sum)
}
