//go:build !unix

package pipe

import (
	"os"
	"os/exec"
)

// setProcessGroup does nothing: without process groups only the server
// itself is stopped, not what it started.
func setProcessGroup(*exec.Cmd) {}

func termGroup(pid int) { killGroup(pid) }

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
