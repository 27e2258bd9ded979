package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// stdioUpstream is a config edit adding the Go SDK stdio test server as
// upstream "fs", with env, isolated per tenant.
func stdioUpstream(t testing.TB, env map[string]string) func(*config.Config) {
	bin := testkit.StdioServer(t)
	return func(c *config.Config) {
		c.Upstreams = append(c.Upstreams, config.Upstream{Name: "fs", Command: []string{bin}, Env: env,
			Stdio: &config.UpstreamStdio{StopGrace: config.Duration(time.Second)}})
	}
}

// TestStdioUpstreamThroughGateway: a stdio upstream is an upstream like any
// other: lists, calls, progress, cancellation; and each tenant's process
// gets the tenant's own credential.
func TestStdioUpstreamThroughGateway(t *testing.T) {
	lab := newLabIssuer(t)
	g, url := startGatewayG(t, nil, labAuth(lab), stdioUpstream(t, map[string]string{"TOKEN": "shared-default"}), func(c *config.Config) {
		c.Tenants = []config.Tenant{
			{ID: "acme", Upstreams: []config.TenantUpstream{{Name: "fs", Env: map[string]string{"TOKEN": "acme-secret"}}}},
			{ID: "globex", Upstreams: []config.TenantUpstream{{Name: "fs", Env: map[string]string{"TOKEN": "globex-secret"}}}},
		}
	})
	admin := httptest.NewServer(g.AdminHandler())
	t.Cleanup(admin.Close)
	metrics := func() string {
		resp, err := http.Get(admin.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	ctx := context.Background()
	connect := func(tenant string, progress func(context.Context, *mcp.ProgressNotificationClientRequest)) *mcp.ClientSession {
		tok := labToken(t, lab, url, "user-"+tenant, tenant)
		return testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}, ProgressHandler: progress})
	}
	progressed := make(chan float64, 16)
	acme := connect("acme", func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progressed <- r.Params.Progress })
	globex := connect("globex", nil)

	res, err := acme.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range res.Tools {
		found = found || tl.Name == "fs__echo"
	}
	if !found {
		t.Fatalf("fs__echo not listed: %v", res.Tools)
	}
	call := func(cs *mcp.ClientSession, tool string, args map[string]any) string {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return text(t, r)
	}
	if got := call(acme, "fs__echo", map[string]any{"text": "hi"}); got != "hi" {
		t.Errorf("echo = %q", got)
	}
	// Per-tenant env: two tenants, two processes, each its own credential.
	// (By hash: the gateway redacts its own secrets from results.)
	hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	if got := call(acme, "fs__envhash", map[string]any{"name": "TOKEN"}); got != hash("acme-secret") {
		t.Errorf("acme's TOKEN is not acme's")
	}
	if got := call(globex, "fs__envhash", map[string]any{"name": "TOKEN"}); got != hash("globex-secret") {
		t.Errorf("globex's TOKEN is not globex's")
	}
	if a, b := call(acme, "fs__pid", nil), call(globex, "fs__pid", nil); a == b {
		t.Errorf("acme and globex share process %s", a)
	}
	if m := metrics(); !strings.Contains(m, `mcpgw_upstream_processes{upstream="fs"} 2`) {
		t.Errorf("metrics lack 2 processes of fs:\n%s", grepLines(m, "mcpgw_upstream_process"))
	}
	// Progress reaches the client through the gateway.
	r, err := acme.CallTool(ctx, &mcp.CallToolParams{Name: "fs__progress", Arguments: map[string]any{"steps": 3}, Meta: mcp.Meta{"progressToken": "p1"}})
	if err != nil || text(t, r) != "done" {
		t.Fatalf("progress: %v", err)
	}
	for i := 1; i <= 3; i++ {
		select {
		case p := <-progressed:
			if p != float64(i) {
				t.Errorf("progress %v, want %d", p, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("progress %d did not arrive", i)
		}
	}
	// Cancellation: the client gives up; the call ends and the gateway
	// still serves the session.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = acme.CallTool(cctx, &mcp.CallToolParams{Name: "fs__block"})
	cancel()
	if err == nil {
		t.Fatal("block returned")
	}
	if got := call(acme, "fs__echo", map[string]any{"text": "after"}); got != "after" {
		t.Errorf("echo after cancel = %q", got)
	}

	// A crash mid-call fails that call with an error naming the upstream;
	// the next call gets a new process.
	before := call(acme, "fs__pid", nil)
	r, err = acme.CallTool(ctx, &mcp.CallToolParams{Name: "fs__crash"})
	if err == nil && !r.IsError {
		t.Fatal("crash call succeeded")
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	} else {
		msg = text(t, r)
	}
	if !strings.Contains(msg, "fs") {
		t.Errorf("crash error %q does not name the upstream", msg)
	}
	after := call(acme, "fs__pid", nil)
	if after == before {
		t.Errorf("same process %s after the crash", after)
	}
	if m := metrics(); !strings.Contains(m, `mcpgw_upstream_process_exits_total{reason="exited",upstream="fs"} 1`) {
		t.Errorf("metrics lack the crash:\n%s", grepLines(m, "mcpgw_upstream_process"))
	}
}

// TestStdioIdleShutdownIsTransparent: a process stopped when idle is
// started again on the session's next call, which the client does not
// notice.
func TestStdioIdleShutdownIsTransparent(t *testing.T) {
	bin := testkit.StdioServer(t)
	g, url := startGatewayG(t, nil, func(c *config.Config) {
		c.Upstreams = append(c.Upstreams, config.Upstream{Name: "fs", Command: []string{bin},
			Stdio: &config.UpstreamStdio{IdleTimeout: config.Duration(200 * time.Millisecond), StopGrace: config.Duration(time.Second)}})
	})
	admin := httptest.NewServer(g.AdminHandler())
	t.Cleanup(admin.Close)
	processes := func() string {
		resp, err := http.Get(admin.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return grepLines(string(b), `mcpgw_upstream_processes{upstream="fs"}`)
	}
	cs := testkit.Connect(t, url, nil)
	ctx := context.Background()
	pid := func() string {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__pid"})
		if err != nil {
			t.Fatal(err)
		}
		return text(t, r)
	}
	first := pid()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasSuffix(processes(), " 0") {
		if time.Now().After(deadline) {
			t.Fatalf("the idle process was not stopped: %s", processes())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if second := pid(); second == first {
		t.Errorf("the same process %s after idle shutdown", second)
	}
}

// TestStdioReloadLetsCallsFinish: a reload that changes a stdio upstream's
// settings replaces its process, but a call in flight on the old one
// finishes first; the next call runs on the new process.
func TestStdioReloadLetsCallsFinish(t *testing.T) {
	bin := testkit.StdioServer(t)
	g, url := startGatewayG(t, nil, func(c *config.Config) {
		c.Upstreams = append(c.Upstreams, config.Upstream{Name: "fs", Command: []string{bin}, Env: map[string]string{"MODE": "one"},
			Stdio: &config.UpstreamStdio{StopGrace: config.Duration(time.Second)}})
	})
	cs := testkit.Connect(t, url, nil)
	ctx := context.Background()
	call := func(tool string, args map[string]any) (string, error) {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return "", err
		}
		return text(t, r), nil
	}
	if got, err := call("fs__env", map[string]any{"name": "MODE"}); err != nil || got != "one" {
		t.Fatalf("MODE = %q, %v", got, err)
	}
	done := make(chan error, 1)
	go func() {
		got, err := call("fs__sleep", map[string]any{"ms": 700})
		if err == nil && got != "slept" {
			err = fmt.Errorf("sleep = %q", got)
		}
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	next := *g.Config()
	next.Upstreams = []config.Upstream{next.Upstreams[0]}
	next.Upstreams[0].Env = map[string]string{"MODE": "two"}
	if err := g.Reload(&next); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("the call in flight during the reload: %v", err)
	}
	if got, err := call("fs__env", map[string]any{"name": "MODE"}); err != nil || got != "two" {
		t.Errorf("after the reload MODE = %q, %v", got, err)
	}
}
