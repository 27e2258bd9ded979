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
// during the call (server-everything's get-roots-list) gets an answer
// promptly, never the upstream timeout: the gateway holds the shared
// upstream session's GET stream while calls are in flight on it, and
// refuses there, at once, what belongs to no one call.
func TestRootsOnTheStandaloneStreamStateless(t *testing.T) {
	ev := testkit.StartEverythingHTTP(t)
	url := startGateway(t, []upstreamSpec{{name: "ev", url: ev, timeout: 30 * time.Second}})
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{ProtocolVersion: "2026-07-28"})
	for i := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__get-roots-list"})
		cancel()
		// The upstream's request refused, its tool answers without roots.
		if err != nil {
			t.Fatalf("call %d: %v (a deadline: the call waited for the upstream's timeout)", i, err)
		}
	}
}
