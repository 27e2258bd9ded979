//go:build unix

package pipe

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes cmd the leader of a new process group, whose id is
// its pid.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// termGroup sends SIGTERM to process group pgid.
func termGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGTERM) }

// killGroup sends SIGKILL to process group pgid.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }
