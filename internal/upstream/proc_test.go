package upstream

import (
	"os"
	"path/filepath"
	"strings"
)

// processRunning reports whether process pid runs (and is not a zombie),
// from /proc.
func processRunning(pid string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, the state follows ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}

// childrenOf returns the pids of the children of pid, from /proc.
func childrenOf(pid string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == pid {
			out = append(out, e.Name())
		}
	}
	return out
}
