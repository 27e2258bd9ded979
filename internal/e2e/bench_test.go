package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

// The store benchmarks run an in-process gateway (anonymous auth) in front
// of one JSON-answering upstream, once with each session store, in the same
// run, and drive one session over raw HTTP with a keep-alive client. The
// difference between the two is what the store costs per request:
//
//	go test -run '^$' -bench 'BenchmarkGatewayStore' -benchtime 3s ./internal/e2e/
//
// The Redis store talks to a private redis-server on loopback.

// BenchmarkGatewayStore measures one tools/call of echo, routed to the
// upstream.
func BenchmarkGatewayStore(b *testing.B) {
	benchStores(b, func(id int) string { return echoCall(id, "alpha__echo", "x") }, `"text":"alpha:x"`)
}

// BenchmarkGatewayStorePing measures one ping, which the gateway answers
// itself: the request's whole cost is transport, auth and the session
// lookup, so the store's share stands out.
func BenchmarkGatewayStorePing(b *testing.B) {
	benchStores(b, func(id int) string { return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"ping"}` }, `"result":{}`)
}

func benchStores(b *testing.B, body func(id int) string, want string) {
	up := testkit.NewUpstreamWith(b, "alpha", testkit.UpstreamOptions{JSONResponse: true, Tools: []string{"echo"}})
	redis := testkit.StartRedis(b)
	for _, store := range []string{config.StoreMemory, config.StoreRedis} {
		b.Run(store, func(b *testing.B) {
			url := benchGateway(b, up, store, redis.Addr)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 10 * time.Second}
			b.Cleanup(client.CloseIdleConnections)
			sid := benchInitialize(b, client, url)
			// Warm the catalog and the connections.
			benchPost(b, client, url, sid, body(1), want)

			cmds := redisCommands(b, redis)
			b.ReportAllocs()
			b.ResetTimer()
			n := 0
			for b.Loop() {
				benchPost(b, client, url, sid, body(n+2), want)
				n++
			}
			if store == config.StoreRedis {
				// Every request is one MULTI PEXPIRE HGETALL EXEC: four
				// commands in one round trip.
				b.ReportMetric(float64(redisCommands(b, redis)-cmds-1)/float64(n), "redis-cmds/op")
			}
		})
	}
}

// redisCommands returns how many commands the server has processed.
func redisCommands(b *testing.B, r *testkit.Redis) int {
	b.Helper()
	v, err := r.Do("INFO", "stats")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(v.(string), "\r\n") {
		if n, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			c, err := strconv.Atoi(n)
			if err != nil {
				b.Fatal(err)
			}
			return c
		}
	}
	b.Fatalf("no total_commands_processed in INFO stats:\n%s", v)
	return 0
}

// benchGateway starts an in-process gateway with the given session store
// and returns its MCP endpoint.
func benchGateway(b testing.TB, up *testkit.Upstream, store, redisAddr string) string {
	b.Helper()
	cfg := &config.Config{Auth: config.Auth{Anonymous: true}}
	cfg.Upstreams = []config.Upstream{{Name: up.Name, URL: up.URL}}
	cfg.Sessions.Store = store
	if store == config.StoreRedis {
		cfg.Sessions.Redis = config.Redis{Addrs: []string{redisAddr}, KeyPrefix: "bench:"}
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	b.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		g.Close()
	})
	if problems := g.Ready(b.Context()); len(problems) > 0 {
		b.Fatalf("gateway not ready: %v", problems)
	}
	return srv.URL + "/mcp"
}

func benchRequest(b *testing.B, url, sid, body string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return req
}

func benchInitialize(b *testing.B, client *http.Client, url string) string {
	b.Helper()
	resp, err := client.Do(benchRequest(b, url, "", initBody))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		b.Fatalf("initialize: %d, session id %q", resp.StatusCode, sid)
	}
	resp, err = client.Do(benchRequest(b, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b.Fatalf("notifications/initialized: %d", resp.StatusCode)
	}
	return sid
}

func benchPost(b *testing.B, client *http.Client, url, sid, body, want string) {
	resp, err := client.Do(benchRequest(b, url, sid, body))
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(want)) {
		b.Fatalf("%s: %d %v %s", body, resp.StatusCode, err, out)
	}
}
