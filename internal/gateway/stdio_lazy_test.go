package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestStdioStartsLazily: once the replica knows what a stdio upstream
// offers (the first session after it starts opens the upstream at
// initialize to learn it), opening a session starts no process of it; a
// list that needs it starts one, and only one. With isolation: session
// every session would otherwise start its own. A second session is served
// the tools listed already (shared within the tenant) without a process,
// and starts its own with its first call. The capabilities announced at
// initialize are the server's own, resources.subscribe included.
func TestStdioStartsLazily(t *testing.T) {
	bin := testkit.StdioServer(t)
	g, url := startGatewayG(t, nil, func(c *config.Config) {
		c.Upstreams = append(c.Upstreams, config.Upstream{Name: "fs", Command: []string{bin},
			Stdio: &config.UpstreamStdio{Isolation: config.IsolationSession, StopGrace: config.Duration(time.Second)}})
	})
	admin := httptest.NewServer(g.AdminHandler())
	t.Cleanup(admin.Close)
	metrics := func() string {
		t.Helper()
		resp, err := http.Get(admin.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// Absent before the first process: 0.
	processes := func() float64 { return metricValue(metrics(), `mcpgw_upstream_processes{upstream="fs"}`) }
	exits := func() float64 {
		m := metrics()
		return metricValue(m, `mcpgw_upstream_process_exits_total{reason="exited",upstream="fs"}`) +
			metricValue(m, `mcpgw_upstream_process_exits_total{reason="stopped",upstream="fs"}`)
	}
	ctx := context.Background()

	first := testkit.Connect(t, url, nil)
	if n := processes(); n != 1 {
		t.Fatalf("%v processes after the replica's first initialize, want 1 (it learns what fs offers)", n)
	}
	second := testkit.Connect(t, url, nil)
	if n := processes(); n != 1 {
		t.Fatalf("%v processes after a second initialize, want still 1", n)
	}
	for _, cs := range []*mcp.ClientSession{first, second} {
		if caps := cs.InitializeResult().Capabilities; caps.Tools == nil || caps.Resources == nil || !caps.Resources.Subscribe {
			t.Errorf("capabilities: %+v; want fs's own: tools, resources with subscribe", caps)
		}
	}

	res, err := first.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "fs__echo" }) {
		t.Fatalf("fs__echo not in the first tools/list: %v", res.Tools)
	}
	if n := processes(); n != 1 {
		t.Fatalf("%v processes after the first tools/list, want 1 (the first session's own)", n)
	}
	r, err := first.CallTool(ctx, &mcp.CallToolParams{Name: "fs__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || text(t, r) != "hi" {
		t.Fatalf("echo on the lazily started process: %v", err)
	}

	// The tools the first session listed serve the second: no process.
	if _, err := second.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := processes(); n != 1 {
		t.Fatalf("%v processes after a tools/list served from the cache, want 1", n)
	}
	a, b := pid(t, first), pid(t, second)
	if a == b {
		t.Errorf("isolation session: both sessions on process %s", a)
	}
	if n := processes(); n != 2 {
		t.Errorf("%v processes after the second session's first call, want 2", n)
	}
	if n := exits(); n != 0 {
		t.Errorf("%v processes ended", n)
	}

	// A session opened now is announced what the earlier ones reported,
	// resources.subscribe included (known only from an upstream's own
	// capabilities), still without a process of its own.
	third := testkit.Connect(t, url, nil)
	if caps := third.InitializeResult().Capabilities; caps.Tools == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		t.Errorf("capabilities once fs was reached: %+v; want tools and resources with subscribe", caps)
	}
	if n := processes(); n != 2 {
		t.Errorf("%v processes after a third initialize, want 2", n)
	}
}

func pid(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs__pid"})
	if err != nil {
		t.Fatal(err)
	}
	return text(t, r)
}
