package openapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
)

// maxRequestBytes bounds a message the endpoint reads.
const maxRequestBytes = 32 << 20

// sessionVersions are the session-based revisions initialize answers in.
var sessionVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// Transport returns the RoundTripper that serves a as an MCP server of the
// 2026-07-28 revision, without sessions. rest sends the API's requests;
// maxBody bounds an answer's body.
func (a *API) Transport(rest *http.Client, maxBody int64) http.RoundTripper {
	return &endpoint{api: a, rest: rest, maxBody: maxBody, list: a.listResult()}
}

type endpoint struct {
	api     *API
	rest    *http.Client
	maxBody int64
	list    json.RawMessage // the tools/list result, built once
}

func (a *API) listResult() json.RawMessage {
	b := append([]byte(nil), `{"tools":`...)
	b = jsonx.AppendArray(b, a.tools)
	return append(b, '}')
}

func (e *endpoint) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if req.Method != http.MethodPost {
		return respond(req, http.StatusMethodNotAllowed, "text/plain", []byte("Method Not Allowed")), nil
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxRequestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxRequestBytes {
		return respond(req, http.StatusRequestEntityTooLarge, "text/plain", []byte("Request Entity Too Large")), nil
	}
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		return respond(req, http.StatusBadRequest, "application/json", jsonrpc.AppendError(nil, jsonrpc.ID{}, jsonrpc.AsError(err))), nil
	}
	if msg.Kind != jsonrpc.KindRequest {
		return respond(req, http.StatusAccepted, "", nil), nil
	}
	res, rpcErr, err := e.serve(req, msg)
	if err != nil {
		return nil, err
	}
	if rpcErr != nil {
		return respond(req, http.StatusOK, "application/json", jsonrpc.AppendError(nil, msg.ID, rpcErr)), nil
	}
	return respond(req, http.StatusOK, "application/json", jsonrpc.AppendResult(nil, msg.ID, res)), nil
}

// serve answers one request: a result, a JSON-RPC error, or the error the
// round trip fails with (the request's context ended).
func (e *endpoint) serve(req *http.Request, msg *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error, error) {
	a := e.api
	switch msg.Method {
	case protocol.MethodDiscover:
		b, _ := json.Marshal(map[string]any{
			"supportedVersions": []string{protocol.LatestStateless.String()},
			"capabilities":      map[string]any{"tools": map[string]any{}},
			"instructions":      a.instructions,
			"_meta":             map[string]any{protocol.MetaServerInfo: a.serverInfo()},
		})
		return b, nil, nil
	case protocol.MethodInitialize:
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(msg.Params, &p)
		v := sessionVersions[0]
		for _, s := range sessionVersions {
			if s == p.ProtocolVersion {
				v = s
			}
		}
		b, _ := json.Marshal(map[string]any{
			"protocolVersion": v,
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      a.serverInfo(),
			"instructions":    a.instructions,
		})
		return b, nil, nil
	case protocol.MethodPing:
		return json.RawMessage(`{}`), nil, nil
	case protocol.MethodToolsList:
		return e.list, nil, nil
	case protocol.MethodToolsCall:
		// The message was validated whole by Decode: its members are
		// read in place, the arguments never decoded here.
		p, err := jsonx.ParseValidObject(msg.Params)
		if err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err), nil
		}
		var name string
		if raw := p.Get("name"); len(raw) > 0 && raw[0] == '"' {
			name, _ = jsonx.Unquote(raw)
		}
		op := a.ops[name]
		if op == nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Unknown tool: %s", strconv.Quote(truncate(name, 128))), nil
		}
		res, err := a.call(req.Context(), e.rest, e.maxBody, op, p.Get("arguments"), req.Header)
		return res, nil, err
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s", strconv.Quote(truncate(msg.Method, 128))), nil
}

func (a *API) serverInfo() map[string]string {
	return map[string]string{"name": a.name, "version": cmp.Or(a.version, "0")}
}

// respond is an in-process HTTP response to req.
func respond(req *http.Request, status int, contentType string, body []byte) *http.Response {
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
