package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/testkit"
)

// errorUpstream is a 2026-07-28 upstream, as the TypeScript SDK's servers
// are, that answers every JSON-RPC error with HTTP 400: resources/read of
// anything is -32602 naming the URI in data, and tools/call is -32021.
// Its error messages hold the secret token it was sent.
func errorUpstream(t *testing.T) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				URI string `json:"uri"`
			} `json:"params"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &m) != nil || r.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		answer := func(status int, body string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,`+body+`}`)
		}
		switch m.Method {
		case "server/discover":
			answer(200, `"result":{"supportedVersions":["2026-07-28"],"capabilities":{"resources":{},"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"errors","version":"1"}}}`)
		case "resources/list":
			answer(200, `"result":{"resources":[{"uri":"test://known","name":"known"}]}`)
		case "tools/list":
			answer(200, `"result":{"tools":[{"name":"ask","inputSchema":{"type":"object"}}]}`)
		case "resources/read":
			uri, _ := json.Marshal(m.Params.URI)
			answer(400, `"error":{"code":-32602,"message":"Resource not found","data":{"uri":`+string(uri)+`}}`)
		case "tools/call":
			answer(400, `"error":{"code":-32021,"message":"Missing required client capability: elicitation (token s3cr3t-upstream)","data":{"requiredCapabilities":{"elicitation":{}}}}`)
		default:
			answer(400, `"error":{"code":-32601,"message":"Method not found"}`)
		}
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestUpstreamErrorsRelayed: a JSON-RPC error a 2026-07-28 upstream answers
// with HTTP 400 is the answer: its code, message and data reach the client
// (data.uri in the gateway's namespace, a secret in the message scrubbed),
// never "-32603 upstream …: HTTP 400: <body>" with the gateway's own
// request id; a 2025-11-25 client gets it with HTTP 200, a 2026-07-28
// client with HTTP 400.
func TestUpstreamErrorsRelayed(t *testing.T) {
	url := startGateway(t, []upstreamSpec{{name: "m", url: errorUpstream(t), headers: map[string]string{"Authorization": "Bearer s3cr3t-upstream"}}})

	// 2025-11-25.
	cs := testkit.Connect(t, url, nil)
	_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "m+test://gone"})
	var we *sdkjsonrpc.Error
	if !errors.As(err, &we) || we.Code != -32602 || we.Message != "Resource not found" || !strings.Contains(string(we.Data), `"uri":"m+test://gone"`) {
		t.Errorf("2025-11-25 resources/read: %v", err)
	}
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "m__ask"})
	if !errors.As(err, &we) || we.Code != -32021 || strings.Contains(we.Message, "HTTP 400") || strings.Contains(we.Message, "s3cr3t") || !strings.Contains(string(we.Data), "requiredCapabilities") {
		t.Errorf("2025-11-25 tools/call: %v", err)
	}

	// 2026-07-28.
	resp, body := do(t, post2026(t, url, 6, "resources/read", `"uri":"m+test://gone"`, func(r *http.Request) { r.Header.Set("Mcp-Name", "m+test://gone") }))
	if resp.StatusCode != 400 || !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, `"data":{"uri":"m+test://gone"}`) || !strings.Contains(body, `"id":6`) || strings.Contains(body, "HTTP 400") {
		t.Errorf("2026-07-28 resources/read: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, post2026(t, url, 7, "tools/call", `"name":"m__ask"`, func(r *http.Request) { r.Header.Set("Mcp-Name", "m__ask") }))
	if resp.StatusCode != 400 || !strings.Contains(body, `"code":-32021`) || !strings.Contains(body, `"requiredCapabilities":{"elicitation":{}}`) || strings.Contains(body, "s3cr3t") {
		t.Errorf("2026-07-28 tools/call: %d %s", resp.StatusCode, body)
	}
}
