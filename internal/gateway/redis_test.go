package gateway_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

// redisStore points a test gateway at the real Redis with a key prefix of
// its own.
func redisStore(t testing.TB) func(*config.Config) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "mcpgw-gwtest-" + hex.EncodeToString(b[:]) + ":"
	return func(c *config.Config) {
		c.Sessions.Store = config.StoreRedis
		c.Sessions.IdleTTL = config.Duration(time.Minute) // what a test leaves behind expires
		c.Sessions.Redis = config.Redis{Addrs: []string{"127.0.0.1:6379"}, KeyPrefix: prefix, Timeout: config.Duration(500 * time.Millisecond)}
	}
}

// TestSessionSharedAcrossReplicas runs two gateways on one Redis: a
// session opened on one is served by the other, and ended for both.
func TestSessionSharedAcrossReplicas(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	store := redisStore(t)
	one := startGateway(t, []upstreamSpec{spec(a)}, store)
	two := startGateway(t, []upstreamSpec{spec(a)}, store)

	sid := initialize(t, one)
	body := postJSON(t, two, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if body != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("ping on the other replica: %s", body)
	}
	resp, out := do(t, post(t, two, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"r"}}}`))
	if resp.StatusCode != 200 || !strings.Contains(out, "alpha:r") {
		t.Fatalf("call on the other replica: %d %s", resp.StatusCode, out)
	}
	// The upstream session opened at initialize (on replica one) is the one
	// replica two used: one initialize in all.
	inits := 0
	for _, r := range a.Requests() {
		if r.RPCMethod == "initialize" {
			inits++
		}
	}
	if inits != 1 {
		t.Errorf("upstream saw %d initialize requests, want 1", inits)
	}

	// The upstream forgets its sessions; replica two re-initializes and
	// stores the new upstream session for replica one too.
	a.Restart()
	// The restart also closed the replicas' idle connections to alpha: the
	// call right after it goes out on a live one.
	if resp, out := do(t, post(t, two, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"s"}}}`)); resp.StatusCode != 200 || !strings.Contains(out, "alpha:s") {
		t.Fatalf("call after upstream restart: %d %s", resp.StatusCode, out)
	}
	// The call reached alpha twice: on the session it forgot (refused with
	// 404, which the gateway answers by re-initializing) and on the new
	// one, where the tool ran. It ran once.
	var fresh string
	for _, r := range a.Requests() {
		if r.RPCMethod == "notifications/initialized" {
			fresh = r.Header.Get("Mcp-Session-Id")
		}
	}
	received, ran := 0, 0
	for _, r := range a.Requests() {
		if r.RPCMethod == "tools/call" && strings.Contains(string(r.Body), `"text":"s"`) {
			received++
			if r.Header.Get("Mcp-Session-Id") == fresh {
				ran++
			}
		}
	}
	if received != 2 || ran != 1 {
		t.Errorf("alpha received the call after its restart %d times and ran it %d times, want 2 and 1", received, ran)
	}
	if resp, out := do(t, post(t, one, sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"t"}}}`)); resp.StatusCode != 200 || !strings.Contains(out, "alpha:t") {
		t.Fatalf("call on replica one after the re-initialization: %d %s", resp.StatusCode, out)
	}
	inits = 0
	for _, r := range a.Requests() {
		if r.RPCMethod == "initialize" {
			inits++
		}
	}
	if inits != 2 {
		t.Errorf("upstream saw %d initialize requests, want 2 (one re-initialization, shared)", inits)
	}

	req, _ := http.NewRequest(http.MethodDelete, two, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, _ := do(t, req); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if resp, _ := do(t, post(t, one, sid, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("replica one after DELETE on two: %d, want 404", resp.StatusCode)
	}
}

// TestRedisDownIsA503 points the gateway at a Redis that is not there:
// requests that need session state fail fast and cleanly.
func TestRedisDownIsA503(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	url := startGateway(t, []upstreamSpec{spec(a)}, func(c *config.Config) {
		c.Sessions.Store = config.StoreRedis
		c.Sessions.Redis = config.Redis{Addrs: []string{"127.0.0.1:1"}, Timeout: config.Duration(200 * time.Millisecond)}
	})
	start := time.Now()
	resp, body := do(t, post(t, url, "", initBody))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("initialize with Redis down: %d %q, session id %q", resp.StatusCode, body, resp.Header.Get("Mcp-Session-Id"))
	}
	if _, code := rpcError(t, body); code != -32603 {
		t.Errorf("error code %d", code)
	}
	resp, body = do(t, post(t, url, "0123456789abcdef0123456789abcdef", `{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("request with Redis down: %d %s", resp.StatusCode, body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("failing took %v", d)
	}
}

// TestRedisDownLogsOnce: with the store down every request fails the
// same way; the error is logged once per window, and the rest are counted
// in mcpgw_log_suppressed_total.
func TestRedisDownLogsOnce(t *testing.T) {
	cfg := &config.Config{Auth: config.Auth{Anonymous: true}}
	cfg.Sessions.Store = config.StoreRedis
	cfg.Sessions.Redis = config.Redis{Addrs: []string{"127.0.0.1:1"}, Timeout: config.Duration(200 * time.Millisecond)}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	g, err := gateway.New(cfg, gateway.Options{Version: "test",
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	const n = 20
	for range n {
		resp, body := do(t, post(t, srv.URL+"/mcp", "0123456789abcdef0123456789abcdef", `{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("request with Redis down: %d %s", resp.StatusCode, body)
		}
	}
	if got := strings.Count(logs.String(), `"msg":"session store"`); got != 1 {
		t.Errorf("%d session store errors logged for %d requests, want 1:\n%s", got, n, logs.String())
	}
	rec := httptest.NewRecorder()
	g.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if want := fmt.Sprintf(`mcpgw_log_suppressed_total{message="session store"} %d`, n-1); !strings.Contains(rec.Body.String(), want) {
		t.Errorf("metrics lack %s", want)
	}
}
