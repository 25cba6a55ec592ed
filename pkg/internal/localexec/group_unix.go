//go:build unix

package localexec

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, so that killGroup also
// reaches the background processes it leaves behind. cmd.SysProcAttr may be
// shared: it is copied.
func ownGroup(cmd *exec.Cmd) {
	var attr syscall.SysProcAttr
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	attr.Setpgid = true
	cmd.SysProcAttr = &attr
}

// killGroup kills cmd's process group, which outlives cmd itself while a
// background child is in it.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
