package dispatch

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/upstream"
)

// TestRelayedError: an upstream's JSON-RPC error, from its answer or from
// a 4xx body about the request, reaches the client with data.uri in the
// gateway's namespace and everything else as it came; a status about the
// gateway (401, 403, 407, 429), a 5xx, and any other error stay what they
// were.
func TestRelayedError(t *testing.T) {
	prefix := "fs"
	up := &upstreamRef{cat: catalog.NewUpstream(&config.Upstream{Name: "fs", Prefix: &prefix})}
	for _, tc := range []struct {
		data, want string
	}{
		{`{"uri":"file:///a","why":"gone"}`, `{"uri":"fs+file:///a","why":"gone"}`},
		{`{"name":"x"}`, `{"name":"x"}`},
		{`"file:///a"`, `"file:///a"`},
		{`{"uri":7}`, `{"uri":7}`},
		{`{"uri":`, `{"uri":`},
		{``, ``},
	} {
		e := &jsonrpc.Error{Code: -32602, Message: "Resource not found", Data: json.RawMessage(tc.data)}
		var got *jsonrpc.Error
		if !errors.As(relayedError(up, e), &got) || got.Code != e.Code || got.Message != e.Message || string(got.Data) != tc.want {
			t.Errorf("%s: %+v, want data %s", tc.data, got, tc.want)
		}
	}
	rpc := &jsonrpc.Error{Code: -32602, Message: "no", Data: json.RawMessage(`{"uri":"file:///b"}`)}
	for status, answered := range map[int]bool{400: true, 404: true, 422: true, 401: false, 403: false, 407: false, 429: false, 500: false, 503: false} {
		err := relayedError(up, &upstream.Error{Upstream: "fs", Op: "resources/read", Status: status, RPC: rpc, Err: errors.New("HTTP")})
		var got *jsonrpc.Error
		if ok := errors.As(err, &got); ok != answered || ok && string(got.Data) != `{"uri":"fs+file:///b"}` {
			t.Errorf("HTTP %d: %v, want answered %v", status, err, answered)
		}
	}
	other := errors.New("dial tcp: refused")
	if relayedError(up, other) != other {
		t.Error("a failure became an answer")
	}
}

// TestStatelessStatus: the HTTP status of a 2026-07-28 error answer follows
// its code.
func TestStatelessStatus(t *testing.T) {
	for code, want := range map[int64]int{
		-32601: http.StatusNotFound,
		-32602: http.StatusBadRequest,
		-32020: http.StatusBadRequest,
		-32021: http.StatusBadRequest,
		-32022: http.StatusBadRequest,
		-32603: http.StatusOK,
		-32002: http.StatusOK,
		-32000: http.StatusOK,
		42:     http.StatusOK,
	} {
		if got := statelessStatus(code); got != want {
			t.Errorf("%d: %d, want %d", code, got, want)
		}
	}
}
