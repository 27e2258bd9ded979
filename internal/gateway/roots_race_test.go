package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/testkit"
)

// TestRootsOnTheStandaloneStream: server-everything's get-roots-list asks
// the client for its roots on the upstream session's GET stream, unrelated
// to the call, and drops the request when that stream is not open; the
// call then never ends. A 2025-11-25 client that declared roots and holds
// its GET stream gets every call answered: the gateway forwards the call
// only once its own upstream stream for the session is open. Eight
// sessions in a row, each calling at once.
func TestRootsOnTheStandaloneStream(t *testing.T) {
	ev := testkit.StartEverythingHTTP(t)
	g, url := startGatewayG(t, []upstreamSpec{{name: "ev", url: ev}})
	for i := range 8 {
		// The SDK's client declares roots, and opens its GET stream once
		// initialized; the call goes as soon as the gateway holds it.
		cs := testkit.Connect(t, url, nil)
		waitFor(t, func() bool { return sseStreamsOpen(t, g) >= i+1 })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__get-roots-list"})
		cancel()
		if err != nil {
			t.Fatalf("session %d: get-roots-list: %v", i, err)
		}
		if res.IsError {
			t.Fatalf("session %d: get-roots-list failed: %s", i, text(t, res))
		}
	}
}

// sseStreamsOpen reads mcpgw_sse_streams_open.
func sseStreamsOpen(t *testing.T, g interface{ AdminHandler() http.Handler }) int {
	t.Helper()
	rec := httptest.NewRecorder()
	g.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(line, "mcpgw_sse_streams_open "); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(n)
		}
	}
	return 0
}

// TestRootsOnTheStandaloneStreamStateless: a 2026-07-28 client bridged to
// a 2025-11-25 upstream that asks for roots on its standalone stream
// during the call (server-everything's get-roots-list) gets its roots
// asked within the call: the gateway holds the shared upstream session's
// GET stream while calls are in flight on it, and a request arriving there
// while one call holds it is that call's (see upcall.Merge), bridged
// to the client in the call's input_required result. Four calls in a row,
// each answered with the client's root, never after the upstream timeout.
func TestRootsOnTheStandaloneStreamStateless(t *testing.T) {
	ev := testkit.StartEverythingHTTP(t)
	url := startGateway(t, []upstreamSpec{{name: "ev", url: ev, timeout: 30 * time.Second}})
	client := mcp.NewClient(&mcp.Implementation{Name: "roots-2026", Version: "0.0.1"}, nil)
	//lint:ignore SA1019 roots are deprecated only from 2026-07-28; a 2026-07-28 client may still declare them
	client.AddRoots(&mcp.Root{URI: "file:///work/project", Name: "project"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	for i := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__get-roots-list"})
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v (a deadline: the call waited for the upstream's timeout)", i, err)
		}
		if got := text(t, res); !strings.Contains(got, "file:///work/project") {
			t.Fatalf("call %d: the upstream did not get the client's roots: %q", i, got)
		}
	}
}
