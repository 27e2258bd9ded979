package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/testkit"
)

// TestBridgeDefaults: the bridge listens on loopback by default, and its
// help says it has no authentication.
func TestBridgeDefaults(t *testing.T) {
	code, _, stderr := runCmd(t, nil, "bridge", "-h")
	if code != 2 && code != 0 {
		t.Fatalf("bridge -h: exit %d", code)
	}
	for _, want := range []string{"no authentication", `-listen string`, `(default "127.0.0.1:8080")`, "-allow-origin"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("bridge -h lacks %q:\n%s", want, stderr)
		}
	}
	if _, _, usage := runCmd(t, nil); !strings.Contains(usage, "WITHOUT authentication, on 127.0.0.1:8080 by default") {
		t.Errorf("usage does not say the bridge has no authentication:\n%s", usage)
	}
	if code, _, stderr := runCmd(t, nil, "bridge", "-allow-origin", "https://a.example/path", "--", "true"); code != 2 || !strings.Contains(stderr, "is not an origin") {
		t.Errorf("an origin with a path: exit %d\n%s", code, stderr)
	}
}

// startBridge runs gateway bridge in this process on a free loopback port
// with args, serving the stdio test server, and returns its endpoint and
// its log.
func startBridge(t *testing.T, args ...string) (string, *testkit.SyncBuffer) {
	t.Helper()
	server := testkit.StdioServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	var logs testkit.SyncBuffer
	done := make(chan error, 1)
	args = append(append([]string{"bridge", "-listen", "127.0.0.1:0", "-stop-grace", "1s"}, args...), "--", server)
	go func() { done <- run(ctx, args, func(string) string { return "" }, io.Discard, &logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bridge: %v", err)
		}
	})
	re := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+/mcp)`)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			return m[1], &logs
		}
		select {
		case err := <-done:
			t.Fatalf("bridge ended: %v\n%s", err, logs.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("the bridge did not listen:\n%s", logs.String())
	return "", nil
}

// TestBridgeOrigin: a request whose Origin is present and not allowed gets
// 403 with a JSON-RPC error without id, before it reaches the server; an
// allowed Origin and no Origin are served.
func TestBridgeOrigin(t *testing.T) {
	endpoint, logs := startBridge(t, "-allow-origin", "http://localhost:3000")
	if strings.Contains(logs.String(), "beyond loopback") {
		t.Errorf("a loopback listener warned of itself:\n%s", logs.String())
	}
	post := func(origin string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	for _, origin := range []string{"http://evil.example", "http://127.0.0.1:1", "null", "http://localhost:3000.evil.example"} {
		resp, body := post(origin)
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if resp.StatusCode != http.StatusForbidden || json.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" ||
			msg.Error.Code != -32600 || !strings.Contains(msg.Error.Message, "origin not allowed") || (len(msg.ID) != 0 && string(msg.ID) != "null") {
			t.Errorf("Origin %s: %d %s, want 403 with a JSON-RPC error", origin, resp.StatusCode, body)
		}
	}
	if strings.Contains(logs.String(), "stdio server started") {
		t.Fatalf("a refused request started the server:\n%s", logs.String())
	}
	for _, origin := range []string{"http://localhost:3000", "HTTP://LOCALHOST:3000", ""} {
		if resp, body := post(origin); resp.StatusCode != http.StatusOK {
			t.Errorf("Origin %q: %d %s, want it served", origin, resp.StatusCode, body)
		}
	}
	// A real client (no Origin) is served end to end.
	cs := testkit.Connect(t, endpoint, nil)
	if _, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{}); err != nil {
		t.Fatal(err)
	}
	cs.Close()
}
