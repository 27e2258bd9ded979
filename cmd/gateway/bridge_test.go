package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/testkit"
)

// TestBridgeBinary: gateway bridge serves the Go SDK stdio test server to a
// Go SDK client over Streamable HTTP, logs its stderr, and leaves no
// process behind when it stops.
func TestBridgeBinary(t *testing.T) {
	bin := testkit.BuildGateway(t)
	server := testkit.StdioServer(t)
	p := testkit.StartGateway(t, bin, []string{"bridge", "-listen", "127.0.0.1:0", "-stop-grace", "1s", "--", server}, []string{"BRIDGE_SECRET=s3cr3t-value", "STDIOSERVER_CHILD=1"})
	ctx := context.Background()
	cs := testkit.Connect(t, p.Endpoint, nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "env", Arguments: map[string]any{"name": "BRIDGE_SECRET"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "s3cr3t-value" {
		t.Errorf("the server's env = %q", got)
	}
	// A second client shares the one process.
	cs2 := testkit.Connect(t, p.Endpoint, nil)
	pid := func(cs *mcp.ClientSession) string {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pid"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	a, b := pid(cs), pid(cs2)
	if a != b {
		t.Errorf("two processes %s and %s, want one", a, b)
	}
	tools, err := cs2.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stderr", Arguments: map[string]any{"text": "bridged stderr line"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Poll(5*time.Second, func() bool { return strings.Contains(p.Output(), "bridged stderr line") })
	if !strings.Contains(p.Output(), "bridged stderr line") {
		t.Errorf("stderr not logged:\n%s", p.Output())
	}
	children := testkit.ChildPids(a)
	if len(children) == 0 {
		t.Fatal("the server started no child")
	}
	cs.Close()
	cs2.Close()
	if err := p.Stop(); err != nil {
		t.Logf("stop: %v", err)
	}
	for _, pid := range append(children, a) {
		testkit.Poll(5*time.Second, func() bool { return !testkit.ProcessRunning(pid) })
		if testkit.ProcessRunning(pid) {
			t.Errorf("process %s still running after the bridge stopped", pid)
		}
	}
}

// TestServeBinaryStdio runs the built gateway with a stdio upstream from
// YAML: the server gets its configured env (a secret from the gateway's
// environment), its stderr reaches the log tagged with the upstream and
// tenant and without the secret, a reload that changes its settings
// replaces its process, and SIGTERM leaves no process behind.
func TestServeBinaryStdio(t *testing.T) {
	bin := testkit.BuildGateway(t)
	server := testkit.StdioServer(t)
	write := func(mode string) string {
		return testkit.WriteFile(t, "gateway.yaml", `
server:
  listen: "127.0.0.1:0"
  drain_delay: 0s
auth:
  anonymous: true
upstreams:
  - name: fs
    command: ["`+server+`"]
    env:
      FS_SECRET: "${FS_SECRET}"
      STDIOSERVER_CHILD: "1"
      MODE: "`+mode+`"
    stdio:
      stop_grace: 1s
`)
	}
	cfg := write("one")
	p := testkit.StartGateway(t, bin, []string{"serve", "-config", cfg, "-log-format", "json"}, []string{"FS_SECRET=fs-secret-value"})
	cs := testkit.Connect(t, p.Endpoint, nil)
	ctx := context.Background()
	call := func(tool string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	// The process got its secret; the gateway's own secrets are redacted
	// from what comes back.
	if got := call("fs__env", map[string]any{"name": "FS_SECRET"}); got != "[redacted:gateway-secret]" {
		t.Errorf("FS_SECRET = %q", got)
	}
	call("fs__stderr", map[string]any{"text": "leaking fs-secret-value to stderr"})
	testkit.Poll(5*time.Second, func() bool { return strings.Contains(p.Output(), "leaking") })
	out := p.Output()
	if !strings.Contains(out, `"upstream":"fs"`) || !strings.Contains(out, `"tenant":"default"`) || !strings.Contains(out, "leaking") {
		t.Errorf("stderr not logged with upstream and tenant:\n%s", out)
	}
	pid := call("fs__pid", nil)
	procs := append(testkit.ChildPids(pid), pid)

	// A reload that changes the upstream's settings stops its process;
	// the session goes on, on a new one.
	write("two")
	if !testkit.Poll(10*time.Second, func() bool { return call("fs__env", map[string]any{"name": "MODE"}) == "two" }) {
		t.Fatalf("the reload was not applied:\n%s", p.Output())
	}
	for _, old := range procs {
		testkit.Poll(5*time.Second, func() bool { return !testkit.ProcessRunning(old) })
		if testkit.ProcessRunning(old) {
			t.Errorf("process %s of the replaced upstream still running", old)
		}
	}
	pid = call("fs__pid", nil)
	procs = append(testkit.ChildPids(pid), pid)
	if len(procs) < 2 {
		t.Fatal("the server started no child")
	}
	cs.Close()
	if err := p.Stop(); err != nil {
		t.Errorf("gateway did not exit cleanly on SIGTERM: %v", err)
	}
	for _, old := range procs {
		testkit.Poll(5*time.Second, func() bool { return !testkit.ProcessRunning(old) })
		if testkit.ProcessRunning(old) {
			t.Errorf("process %s still running after the gateway stopped", old)
		}
	}
	if strings.Contains(p.Output(), "fs-secret-value") {
		t.Errorf("the secret reached the log:\n%s", p.Output())
	}
}
