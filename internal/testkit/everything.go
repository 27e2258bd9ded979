package testkit

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// everythingMain is the entry point of @modelcontextprotocol/server-everything,
// relative to the testkit's node directory.
const everythingMain = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"

// EverythingCommand returns the command that runs the reference MCP server
// @modelcontextprotocol/server-everything over stdio: an upstreams[].command.
func EverythingCommand(t testing.TB) []string {
	t.Helper()
	dir := NodeDir(t)
	return []string{nodeBinary(t), filepath.Join(dir, everythingMain), "stdio"}
}

// StartEverythingSSE runs @modelcontextprotocol/server-everything in its
// 2024-11-05 HTTP+SSE mode on a free loopback port, stopped at the end of
// the test, and returns its SSE endpoint URL (http://127.0.0.1:PORT/sse).
func StartEverythingSSE(t testing.TB) string {
	t.Helper()
	return startEverything(t, "sse", "/sse")
}

// StartEverythingHTTP runs @modelcontextprotocol/server-everything in its
// Streamable HTTP mode on a free loopback port, stopped at the end of the
// test, and returns its MCP endpoint URL (http://127.0.0.1:PORT/mcp). Each
// of its sessions is a server of its own (with its own tasks).
func StartEverythingHTTP(t testing.TB) string {
	t.Helper()
	return startEverything(t, "streamableHttp", "/mcp")
}

// startEverything runs server-everything in mode on a free loopback port
// and returns the URL of path there.
func startEverything(t testing.TB, mode, path string) string {
	t.Helper()
	dir := NodeDir(t)
	port := FreePort(t)
	cmd := exec.Command(nodeBinary(t), filepath.Join(dir, everythingMain), mode)
	cmd.Dir = dir
	cmd.Env = []string{"PORT=" + strconv.Itoa(port), "PATH=" + filepath.Dir(nodeBinary(t))}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("testkit: starting server-everything: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(15 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			t.Fatalf("testkit: server-everything exited:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("testkit: server-everything did not listen on %s in 15s:\n%s", addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Sprintf("http://%s%s", addr, path)
}
