//go:build !unix

package localmodel

import "os/exec"

// setProcessGroup does nothing where there are no Unix process groups.
func setProcessGroup(*exec.Cmd) {}

// signalGroup kills the server process (no process groups here; SIGTERM
// has no portable equivalent).
func signalGroup(cmd *exec.Cmd, _ bool) {
	_ = cmd.Process.Kill()
}
