package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe for concurrent writes: a log or a
// child's output that a test reads while it is written.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ProcessRunning reports whether process pid runs and is not a zombie,
// from /proc.
func ProcessRunning(pid string) bool {
	state, _, ok := procStat(pid)
	return ok && state != "Z"
}

// ChildPids returns the pids of the children of pid, from /proc.
func ChildPids(pid string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if _, ppid, ok := procStat(e.Name()); ok && ppid == pid {
			out = append(out, e.Name())
		}
	}
	return out
}

// procStat returns the state and parent pid of process pid from
// /proc/PID/stat ("pid (comm) state ppid ...": comm may hold spaces, so
// the fields are read after the last ')').
func procStat(pid string) (state, ppid string, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return "", "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return "", "", false
	}
	return f[0], f[1], true
}
