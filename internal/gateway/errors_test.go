package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/testkit"
	"github.com/mcpgw/gateway/internal/upstream"
)

// modernErrorUpstream is a 2026-07-28 server that answers its errors the
// way that revision's servers do: HTTP 400 (404 for an unknown method) with
// a JSON-RPC error body. It remembers the ids of the requests it got.
type modernErrorUpstream struct {
	url string
	mu  sync.Mutex
	ids []string
}

const modernSecret = "sekret-token-0123456789"

func newModernErrorUpstream(t *testing.T) *modernErrorUpstream {
	t.Helper()
	u := &modernErrorUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
				URI  string `json:"uri"`
			} `json:"params"`
		}
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || json.Unmarshal(b, &req) != nil {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		u.mu.Lock()
		u.ids = append(u.ids, string(req.ID))
		u.mu.Unlock()
		answer := func(status int, member string, v any) {
			m, _ := json.Marshal(v)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"`+member+`":`+string(m)+`}`)
		}
		fail := func(status int, code int, msg string, data any) {
			e := map[string]any{"code": code, "message": msg}
			if data != nil {
				e["data"] = data
			}
			answer(status, "error", e)
		}
		switch req.Method {
		case "server/discover":
			answer(200, "result", map[string]any{"resultType": "complete", "supportedVersions": []string{"2026-07-28"},
				"capabilities": map[string]any{"tools": map[string]any{}, "resources": map[string]any{}},
				"_meta":        map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "modern", "version": "1"}}})
		case "tools/list":
			answer(200, "result", map[string]any{"resultType": "complete", "tools": []any{
				map[string]any{"name": "needs", "inputSchema": map[string]any{"type": "object"}},
				map[string]any{"name": "leaky", "inputSchema": map[string]any{"type": "object"}},
				map[string]any{"name": "broken", "inputSchema": map[string]any{"type": "object"}},
			}})
		case "resources/list":
			answer(200, "result", map[string]any{"resultType": "complete", "resources": []any{map[string]any{"uri": "file:///a", "name": "a"}}})
		case "resources/templates/list":
			answer(200, "result", map[string]any{"resultType": "complete", "resourceTemplates": []any{map[string]any{"uriTemplate": "file:///{name}", "name": "files"}}})
		case "resources/read":
			// 2026-07-28 server/resources, "Error Handling".
			fail(400, -32602, "Resource not found", map[string]any{"uri": req.Params.URI})
		case "tools/call":
			switch req.Params.Name {
			case "needs":
				fail(400, -32021, "Missing required client capability: sampling", map[string]any{"requiredCapabilities": map[string]any{"sampling": map[string]any{}}})
			case "leaky":
				// A debugging server that echoes the request's headers.
				fail(400, -32000, "refused: "+r.Header.Get("Authorization"), map[string]any{"auth": r.Header.Get("Authorization")})
			default:
				fail(500, -32603, "upstream crashed", nil)
			}
		default:
			fail(404, -32601, "Method not found", nil)
		}
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

func (u *modernErrorUpstream) sawID(body string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, id := range u.ids {
		if len(id) > 3 && strings.Contains(body, id) {
			return true
		}
	}
	return false
}

// errorBody is a JSON-RPC error response.
type errorBody struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// TestModernUpstreamErrors: a 2026-07-28 upstream's JSON-RPC errors,
// which come with HTTP 400, reach the client as the answer: code, message
// and data as the upstream sent them, data.uri in the gateway's namespace,
// under the HTTP status of the client's revision (400 for a 2026-07-28
// client, 200 for a 2025-11-25 one), without the upstream's secrets and
// without the gateway's own request id. A 5xx stays the gateway's -32603.
func TestModernUpstreamErrors(t *testing.T) {
	u := newModernErrorUpstream(t)
	url := startGateway(t, []upstreamSpec{{name: "modern", url: u.url, headers: map[string]string{"Authorization": "Bearer " + modernSecret}}})
	sid := initialize(t, url)

	for _, tc := range []struct {
		name, method, params, mcpName string
		want2026                      int // HTTP status for a 2026-07-28 client
		code                          int64
		message, data                 string
	}{
		{"unknown resource", "resources/read", `"uri":"modern+file:///nope"`, "modern+file:///nope",
			400, -32602, "Resource not found", `{"uri":"modern+file:///nope"}`},
		{"missing capability", "tools/call", `"name":"modern__needs"`, "modern__needs",
			400, -32021, "Missing required client capability: sampling", `{"requiredCapabilities":{"sampling":{}}}`},
		{"secret echoed", "tools/call", `"name":"modern__leaky"`, "modern__leaky",
			200, -32000, "refused: " + upstream.Redacted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(who string, resp *http.Response, body string, wantStatus int, wantID string) {
				t.Helper()
				if resp.StatusCode != wantStatus || resp.Header.Get("Content-Type") != "application/json" {
					t.Errorf("%s: HTTP %d %s, want %d application/json: %s", who, resp.StatusCode, resp.Header.Get("Content-Type"), wantStatus, body)
				}
				var m errorBody
				if err := json.Unmarshal([]byte(body), &m); err != nil || m.Error == nil {
					t.Fatalf("%s: not an error response: %s", who, body)
				}
				if string(m.ID) != wantID || m.Error.Code != tc.code || m.Error.Message != tc.message || string(m.Error.Data) != tc.data {
					t.Errorf("%s: %s, want id %s, code %d, message %q, data %s", who, body, wantID, tc.code, tc.message, tc.data)
				}
				if strings.Contains(body, modernSecret) || strings.Contains(body, "upstream modern") || u.sawID(body) {
					t.Errorf("%s: a secret, the gateway's wording or its request id in %s", who, body)
				}
			}
			resp, body := do(t, post2026(t, url, 7, tc.method, tc.params, func(r *http.Request) { r.Header.Set("Mcp-Name", tc.mcpName) }))
			check("2026-07-28", resp, body, tc.want2026, "7")
			resp, body = do(t, post(t, url, sid, `{"jsonrpc":"2.0","id":"a","method":"`+tc.method+`","params":{`+tc.params+`}}`))
			check("2025-11-25", resp, body, 200, `"a"`)
		})
	}

	// The SDK's clients see the errors as errors, with their codes.
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{ProtocolVersion: "2026-07-28"})
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "modern+file:///nope"}); !isRPC(err, -32602) {
		t.Errorf("2026-07-28 SDK client: %v", err)
	}
	cs = testkit.Connect(t, url, nil)
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "modern+file:///nope"}); !isRPC(err, -32602) {
		t.Errorf("2025-11-25 SDK client: %v", err)
	}

	// An upstream failing with 5xx is the gateway's error, as before.
	resp, body := do(t, post(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"modern__broken"}}`))
	if _, code := rpcError(t, body); resp.StatusCode != 200 || code != -32603 || !strings.Contains(body, "HTTP 500") {
		t.Errorf("5xx: %d %s", resp.StatusCode, body)
	}
}

// TestLegacyUpstreamMissingCapability: a 2025-11-25 upstream's own -32021
// (the conformance everything-server's test_missing_capability answers it,
// with HTTP 200 as its revision has it) reaches a 2026-07-28 client with
// HTTP 400 (2026-07-28 basic/index, "Per-request protocol fields"), and a
// 2025-11-25 client with 200.
func TestLegacyUpstreamMissingCapability(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "test_missing_capability"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		return nil, nil, &jsonrpc.Error{Code: -32021, Message: "sampling capability required but not declared by client",
			Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	t.Cleanup(srv.Close)
	url := startGateway(t, []upstreamSpec{{name: "legacy", url: srv.URL}})

	resp, body := do(t, post2026(t, url, 3, "tools/call", `"name":"legacy__test_missing_capability","arguments":{}`, func(r *http.Request) {
		r.Header.Set("Mcp-Name", "legacy__test_missing_capability")
	}))
	if id, code := rpcError(t, body); resp.StatusCode != 400 || id != "3" || code != -32021 || !strings.Contains(body, `"requiredCapabilities":{"sampling":{}}`) {
		t.Errorf("2026-07-28: %d %s", resp.StatusCode, body)
	}
	sid := initialize(t, url)
	resp, body = do(t, post(t, url, sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"legacy__test_missing_capability","arguments":{}}}`))
	if d := lastData(body); d != "" {
		body = d
	}
	if _, code := rpcError(t, body); resp.StatusCode != 200 || code != -32021 {
		t.Errorf("2025-11-25: %d %s", resp.StatusCode, body)
	}
}

// isRPC reports whether err is a JSON-RPC error with code.
func isRPC(err error, code int64) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == code
}
