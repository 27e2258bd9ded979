package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

// post builds a POST to the endpoint with the headers a conforming client
// sends; sid may be "".
func post(t testing.TB, url, sid, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return req
}

func do(t testing.TB, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// initialize opens a session with raw HTTP and returns its id.
func initialize(t testing.TB, url string) string {
	t.Helper()
	resp, body := do(t, post(t, url, "", initBody))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if len(sid) < 32 {
		t.Fatalf("session id %q is too short for 128 random bits", sid)
	}
	for _, c := range sid {
		if c < 0x21 || c > 0x7e {
			t.Fatalf("session id %q has a non-visible character", sid)
		}
	}
	resp, body = do(t, post(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if resp.StatusCode != http.StatusAccepted || body != "" {
		t.Fatalf("initialized notification: %d %q", resp.StatusCode, body)
	}
	return sid
}

// postJSON posts body in session sid and returns the response body, which
// must be a 200 application/json answer.
func postJSON(t testing.TB, url, sid, body string) string {
	t.Helper()
	resp, b := do(t, post(t, url, sid, body))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("POST %s: %d %s %s", body, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return b
}

// rpcError is the error member of a JSON-RPC response body.
func rpcError(t testing.TB, body string) (id string, code int64) {
	t.Helper()
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || m.Error == nil {
		t.Fatalf("not a JSON-RPC error response: %q", body)
	}
	return string(m.ID), m.Error.Code
}

func TestTransportRules(t *testing.T) {
	a := testkit.NewUpstreamWith(t, "alpha", testkit.UpstreamOptions{JSONResponse: true})
	url := startGateway(t, []upstreamSpec{spec(a)}, func(c *config.Config) {
		c.Server.PublicURL = "https://mcp.example.com/mcp"
		c.Server.AllowedOrigins = []string{"https://app.example.com"}
		c.Server.MaxBodyBytes = 4096
	})
	sid := initialize(t, url)
	other := initialize(t, url)

	// deleted is a session that existed and was ended.
	deleted := initialize(t, url)
	delReq, _ := http.NewRequest(http.MethodDelete, url, nil)
	delReq.Header.Set("Mcp-Session-Id", deleted)
	if resp, body := do(t, delReq); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}

	type edit func(*http.Request)
	setH := func(k, v string) edit { return func(r *http.Request) { r.Header.Set(k, v) } }
	delH := func(k string) edit { return func(r *http.Request) { r.Header.Del(k) } }
	tests := []struct {
		name     string
		method   string
		sid      string
		body     string
		edits    []edit
		status   int
		code     int64  // JSON-RPC error code in the body; 0: none expected
		id       string // expected id of the error response
		bodyWant string // substring of the body
	}{
		{name: "request in session", sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, status: 200, bodyWant: `{"jsonrpc":"2.0","id":2,"result":{}}`},
		{name: "notification gets 202", sid: sid, body: `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, status: 202},
		{name: "response gets 202", sid: sid, body: `{"jsonrpc":"2.0","id":"s1","result":{}}`, status: 202},
		{name: "missing Accept", sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, edits: []edit{delH("Accept")}, status: 406, code: -32600},
		{name: "Accept without event-stream", sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, edits: []edit{setH("Accept", "application/json")}, status: 406, code: -32600},
		{name: "Accept without json", sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, edits: []edit{setH("Accept", "text/event-stream")}, status: 406, code: -32600},
		{name: "wrong content type", sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, edits: []edit{setH("Content-Type", "text/plain")}, status: 415, code: -32600},
		{name: "parse error", sid: sid, body: `{"jsonrpc":"2.0","id":2,`, status: 400, code: -32700, id: "null"},
		{name: "invalid request keeps id", sid: sid, body: `{"jsonrpc":"1.0","id":5,"method":"ping"}`, status: 400, code: -32600, id: "5"},
		{name: "not an object", sid: sid, body: `42`, status: 400, code: -32600, id: "null"},
		{name: "batch rejected", sid: sid, body: `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`, status: 400, code: -32600},
		{name: "method not found", sid: sid, body: `{"jsonrpc":"2.0","id":3,"method":"tools/explode"}`, status: 200, code: -32601, id: "3"},
		{name: "invalid params", sid: sid, body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{}}}`, status: 200, code: -32602, id: "4"},
		{name: "case variant of routed member", sid: sid, body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"alpha__echo","Name":"alpha__fail"}}`, status: 200, code: -32602, id: "4"},
		{name: "duplicate routed member", sid: sid, body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"alpha__echo","name":"alpha__fail"}}`, status: 200, code: -32602, id: "4"},
		{name: "unknown tool", sid: sid, body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"alpha__nope"}}`, status: 200, code: -32602, id: "4", bodyWant: "Unknown tool: alpha__nope"},
		{name: "invalid cursor", sid: sid, body: `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"cursor":"zzz"}}`, status: 200, code: -32602, id: "4"},
		{name: "too large", sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`, status: 413, code: -32600},
		{name: "no session id", body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, status: 400, code: -32600},
		{name: "unknown session id", sid: "0123456789abcdef0123456789abcdef", body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, status: 404, code: -32001},
		{name: "deleted session id", sid: deleted, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, status: 404, code: -32001},
		{name: "unsupported protocol version", sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, edits: []edit{setH("Mcp-Protocol-Version", "1999-01-01")}, status: 400, code: -32600},
		{name: "absent protocol version is accepted", sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, edits: []edit{delH("Mcp-Protocol-Version")}, status: 200},
		{name: "older supported protocol version", sid: other, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, edits: []edit{setH("Mcp-Protocol-Version", "2025-03-26")}, status: 200},
		{name: "initialize with a session id", sid: sid, body: initBody, status: 400, code: -32600},
		{name: "foreign origin", sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, edits: []edit{setH("Origin", "https://evil.example")}, status: 403},
		{name: "public URL origin", sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, edits: []edit{setH("Origin", "https://mcp.example.com")}, status: 200},
		{name: "allowed origin", sid: sid, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, edits: []edit{setH("Origin", "https://app.example.com")}, status: 200},
		{name: "GET without session", method: http.MethodGet, edits: []edit{setH("Accept", "text/event-stream")}, status: 400},
		{name: "GET without event-stream accept", method: http.MethodGet, sid: sid, edits: []edit{setH("Accept", "application/json")}, status: 406},
		{name: "DELETE without session", method: http.MethodDelete, status: 400},
		{name: "DELETE unknown session", method: http.MethodDelete, sid: "0123456789abcdef0123456789abcdef", status: 404},
		{name: "PUT", method: http.MethodPut, sid: sid, status: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := post(t, url, tt.sid, tt.body)
			if tt.method != "" {
				req.Method = tt.method
				if tt.body == "" {
					req.Body, req.ContentLength = http.NoBody, 0
				}
			}
			for _, e := range tt.edits {
				e(req)
			}
			resp, body := do(t, req)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.status, body)
			}
			if tt.status == 202 && body != "" {
				t.Errorf("202 with body %q", body)
			}
			if tt.code != 0 {
				id, code := rpcError(t, body)
				if code != tt.code {
					t.Errorf("error code %d, want %d; body %s", code, tt.code, body)
				}
				if tt.id != "" && id != tt.id {
					t.Errorf("error id %s, want %s", id, tt.id)
				}
			}
			if tt.bodyWant != "" && !strings.Contains(body, tt.bodyWant) {
				t.Errorf("body %s does not contain %s", body, tt.bodyWant)
			}
		})
	}
}

func TestDeleteEndsUpstreamSessions(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	url := startGateway(t, []upstreamSpec{spec(a)})
	sid := initialize(t, url)
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, body := do(t, req); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	var deletes int
	for _, r := range a.Requests() {
		if r.Method == http.MethodDelete {
			deletes++
		}
	}
	if deletes != 1 {
		t.Errorf("upstream saw %d DELETEs, want 1", deletes)
	}
	if resp, _ := do(t, post(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("request after DELETE: %d, want 404", resp.StatusCode)
	}
}

func TestVersionNegotiation(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	url := startGateway(t, []upstreamSpec{spec(a)})
	for _, tt := range []struct{ client, want string }{
		{"2025-11-25", "2025-11-25"},
		{"2025-06-18", "2025-06-18"},
		{"2025-03-26", "2025-03-26"},
		{"2024-11-05", "2025-11-25"},
		{"2030-01-01", "2025-11-25"},
	} {
		body := strings.Replace(initBody, "2025-11-25", tt.client, 1)
		resp, b := do(t, post(t, url, "", body))
		if resp.StatusCode != 200 || !strings.Contains(b, `"protocolVersion":"`+tt.want+`"`) {
			t.Errorf("client %s: %d %s, want version %s", tt.client, resp.StatusCode, b, tt.want)
		}
	}
	resp, b := do(t, post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if _, code := rpcError(t, b); resp.StatusCode != 200 || code != -32602 {
		t.Errorf("initialize without version: %d %s", resp.StatusCode, b)
	}
	// A 2025-03-26 client works end to end with the SDK.
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{ProtocolVersion: "2025-03-26"})
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Error(err)
	}
}

func TestBatchesOnlyFor20250326(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	url := startGateway(t, []upstreamSpec{spec(a)})
	resp, body := do(t, post(t, url, "", strings.Replace(initBody, "2025-11-25", "2025-03-26", 1)))
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	batch := `[{"jsonrpc":"2.0","id":1,"method":"ping"},` +
		`{"jsonrpc":"2.0","method":"notifications/initialized"},` +
		`{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"b"}}},` +
		`{"jsonrpc":"2.0","id":3,"method":"nope"},` +
		`{"jsonrpc":"1.0","id":4,"method":"ping"}]`
	req := post(t, url, sid, batch)
	req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	resp, body = do(t, req)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("batch: %d %s", resp.StatusCode, body)
	}
	var replies []struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &replies); err != nil || len(replies) != 4 {
		t.Fatalf("batch replies %s: %v", body, err)
	}
	if string(replies[0].ID) != "1" || string(replies[0].Result) != "{}" {
		t.Errorf("ping reply %s", body)
	}
	if string(replies[1].ID) != `"two"` || !strings.Contains(string(replies[1].Result), "alpha:b") {
		t.Errorf("tools/call reply %s", body)
	}
	if replies[2].Error == nil || replies[2].Error.Code != -32601 || replies[3].Error == nil || replies[3].Error.Code != -32600 {
		t.Errorf("error replies %s", body)
	}
	// A batch of notifications only is accepted with 202.
	req = post(t, url, sid, `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
	if resp, body := do(t, req); resp.StatusCode != 202 || body != "" {
		t.Errorf("notification batch: %d %q", resp.StatusCode, body)
	}
}
