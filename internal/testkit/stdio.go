package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// StdioServerPackage is the import path of the stdio test server.
const StdioServerPackage = "github.com/mcpgw/gateway/internal/testkit/stdioserver"

var stdioBuild struct {
	once sync.Once
	path string
	err  error
}

// StdioServer builds the Go SDK stdio test server (package stdioserver),
// once per test binary, and returns its path. See that package for its
// tools.
func StdioServer(t testing.TB) string {
	t.Helper()
	stdioBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "mcpgw-stdioserver-")
		if err != nil {
			stdioBuild.err = err
			return
		}
		path := filepath.Join(dir, "stdioserver")
		out, err := exec.Command("go", "build", "-o", path, StdioServerPackage).CombinedOutput()
		if err != nil {
			os.RemoveAll(dir)
			stdioBuild.err = fmt.Errorf("go build %s: %v\n%s", StdioServerPackage, err, out)
			return
		}
		stdioBuild.path = path
	})
	if stdioBuild.err != nil {
		t.Fatalf("testkit: %v", stdioBuild.err)
	}
	return stdioBuild.path
}

// StartStdioServerHTTP runs the stdio test server over Streamable HTTP
// (STDIOSERVER_HTTP) on a free loopback port, stopped at the end of the
// test, and returns its endpoint URL: the same server as over stdio.
func StartStdioServerHTTP(t testing.TB) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	cmd := exec.Command(StdioServer(t))
	cmd.Env = []string{"STDIOSERVER_HTTP=" + addr}
	out := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			t.Fatalf("testkit: stdioserver exited:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("testkit: stdioserver did not listen in 10s:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "http://" + addr + "/mcp"
}
