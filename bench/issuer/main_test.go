package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/testkit"
)

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestRun(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, []string{"-token-file", tokenFile}, &stdout, &stderr) }()
	testkit.Eventually(t, 5*time.Second, func() bool { return strings.Contains(stdout.String(), "listening on http://127.0.0.1:") },
		"no listening line; stderr: %s", &stderr)
	fi, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() == 0 {
		t.Errorf("token file: mode %v, %d bytes", fi.Mode().Perm(), fi.Size())
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestRunRefusesNonLoopback(t *testing.T) {
	err := run(context.Background(), []string{"-token-file", filepath.Join(t.TempDir(), "t"), "-addr", "0.0.0.0:0"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("run with -addr 0.0.0.0:0: %v, want a loopback error", err)
	}
}
