//go:build unix

package localmodel

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the server in its own process group, so that Close
// reaches anything node starts as well.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends SIGTERM (or SIGKILL) to the server's process group.
func signalGroup(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	// The group id is the server's pid (Setpgid with Pgid 0).
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
