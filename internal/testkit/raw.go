package testkit

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
)

// RawSessionID is the Mcp-Session-Id a [RawUpstream] assigns.
const RawSessionID = "raw-session"

// RawToolJSON is the one tool a [RawUpstream] lists, byte for byte: a tool
// "raw" carrying fields no SDK knows about.
const RawToolJSON = `{"name":"raw","description":"A tool with unknown fields.","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}},"x-vendor":{"k":[1,2,3]},"annotations":{"destructiveHint":true,"x-custom":1}}`

// rawCallResultHead is the start of a RawUpstream's tools/call result; the
// params of the call and a closing brace follow.
const rawCallResultHead = `{"content":[{"type":"text","text":"ok","x-block-extra":true}],"structuredContent":{"value":42,"x-extra":[true,{"deep":"yes"}]},"x-unknown-result-field":{"nested":[1,"two",null]},"_meta":{"vendor/x":1},"echo":`

// rawProtocolVersions are the versions a RawUpstream accepts from a client;
// it answers any other with the first.
var rawProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// A RawUpstream is a hand-written Streamable HTTP MCP server on 127.0.0.1,
// with no SDK in the way, to check that the gateway passes bytes through.
// It always answers application/json, never SSE:
//
//   - initialize: protocolVersion echoes the client's (2025-11-25, 2025-06-18
//     or 2025-03-26; otherwise 2025-11-25), capabilities tools, resources and
//     prompts, and Mcp-Session-Id [RawSessionID].
//   - notifications and responses: 202 Accepted.
//   - tools/list: the one tool [RawToolJSON].
//   - tools/call: a result with unknown fields in the result and in its
//     content block, _meta {"vendor/x": 1}, and "echo": the call's params,
//     byte for byte.
//   - ping and the resources, templates and prompts lists: empty results.
//   - any other method: JSON-RPC error -32601.
//
// It does not check session ids or headers, and rejects batches.
type RawUpstream struct {
	URL string // the MCP endpoint: http://127.0.0.1:PORT/mcp

	mu      sync.Mutex
	bodies  map[string][]byte
	headers map[string]http.Header
}

// NewRawUpstream starts a RawUpstream, stopped at the end of the test.
func NewRawUpstream(t testing.TB) *RawUpstream {
	t.Helper()
	u := &RawUpstream{
		bodies:  make(map[string][]byte),
		headers: make(map[string]http.Header),
	}
	srv := httptest.NewServer(http.HandlerFunc(u.serveHTTP))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	u.URL = srv.URL + "/mcp"
	return u
}

// LastBody returns the body of the last request with the given JSON-RPC
// method, exactly as received, or nil if there was none. Responses from the
// client are recorded under the empty method.
func (u *RawUpstream) LastBody(method string) []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.bodies[method])
}

// LastHeader returns the HTTP headers of the last request with the given
// JSON-RPC method, or nil if there was none.
func (u *RawUpstream) LastHeader(method string) http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.headers[method].Clone()
}

// rawMessage is what a hand-written test upstream routes a JSON-RPC
// message on.
type rawMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// readRawMessage serves the transport part of a hand-written upstream's
// request: DELETE ends a session (204), anything but POST gets 405, and a
// POST body of at most 64 MiB must be one JSON-RPC message (not a batch).
// It answers the request itself and returns ok false when the request
// stops there.
func readRawMessage(w http.ResponseWriter, r *http.Request) (msg rawMessage, body []byte, ok bool) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return msg, nil, false
	default:
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return msg, nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return msg, nil, false
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(body, &msg) != nil {
		writeRaw(w, http.StatusBadRequest, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error (batches are not supported)"}}`)
		return msg, nil, false
	}
	return msg, body, true
}

func (u *RawUpstream) serveHTTP(w http.ResponseWriter, r *http.Request) {
	msg, body, ok := readRawMessage(w, r)
	if !ok {
		return
	}
	u.mu.Lock()
	u.bodies[msg.Method] = body
	u.headers[msg.Method] = r.Header.Clone()
	u.mu.Unlock()

	if len(msg.ID) == 0 || msg.Method == "" {
		// A notification, or a response to a request we never send.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result string
	switch msg.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		json.Unmarshal(msg.Params, &p)
		version := rawProtocolVersions[0]
		if slices.Contains(rawProtocolVersions, p.ProtocolVersion) {
			version = p.ProtocolVersion
		}
		w.Header().Set("Mcp-Session-Id", RawSessionID)
		result = `{"protocolVersion":"` + version + `","capabilities":{"tools":{},"resources":{},"prompts":{}},"serverInfo":{"name":"raw","version":"0.0.1"}}`
	case "ping":
		result = `{}`
	case "tools/list":
		result = `{"tools":[` + RawToolJSON + `]}`
	case "tools/call":
		params := string(msg.Params)
		if params == "" {
			params = "null"
		}
		result = rawCallResultHead + params + `}`
	case "resources/list":
		result = `{"resources":[]}`
	case "resources/templates/list":
		result = `{"resourceTemplates":[]}`
	case "prompts/list":
		result = `{"prompts":[]}`
	default:
		writeRaw(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"error":{"code":-32601,"message":"method not found"}}`)
		return
	}
	writeRaw(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+result+`}`)
}

func writeRaw(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}
