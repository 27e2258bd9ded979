package relay

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/upstream"
)

// TestError: an upstream's JSON-RPC error, from its answer or from a 4xx
// body about the request, reaches the client with data.uri in the
// gateway's namespace and everything else as it came; a status about the
// gateway (401, 403, 407, 429), a 5xx, and any other error stay what they
// were.
func TestError(t *testing.T) {
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
		if !errors.As(Error("fs", e), &got) || got.Code != e.Code || got.Message != e.Message || string(got.Data) != tc.want {
			t.Errorf("%s: %+v, want data %s", tc.data, got, tc.want)
		}
	}
	rpc := &jsonrpc.Error{Code: -32602, Message: "no", Data: json.RawMessage(`{"uri":"file:///b"}`)}
	for status, answered := range map[int]bool{400: true, 404: true, 422: true, 401: false, 403: false, 407: false, 429: false, 500: false, 503: false} {
		err := Error("fs", &upstream.Error{Upstream: "fs", Op: "resources/read", Status: status, RPC: rpc, Err: errors.New("HTTP")})
		var got *jsonrpc.Error
		if ok := errors.As(err, &got); ok != answered || ok && string(got.Data) != `{"uri":"fs+file:///b"}` {
			t.Errorf("HTTP %d: %v, want answered %v", status, err, answered)
		}
	}
	if got := Error("", rpc); got != rpc {
		t.Errorf("an upstream without a prefix: %v, want its error as it is", got)
	}
	other := errors.New("dial tcp: refused")
	if Error("fs", other) != other {
		t.Error("a failure became an answer")
	}
}

// TestWantsLog: a request hears the log messages at or above the level it
// asked for, and none of a level that is not one.
func TestWantsLog(t *testing.T) {
	for _, tc := range []struct {
		level, params string
		want          bool
	}{
		{"info", `{"level":"info","data":"x"}`, true},
		{"info", `{"level":"error","data":"x"}`, true},
		{"info", `{"level":"debug","data":"x"}`, false},
		{"debug", `{"level":"debug"}`, true},
		{"debug", `{"level":"loud"}`, false},
		{"debug", `{}`, false},
		{"debug", `[]`, false},
		{"", `{"level":"emergency"}`, true},
	} {
		msg := &jsonrpc.Message{Params: json.RawMessage(tc.params)}
		if got := WantsLog(tc.level, msg); got != tc.want {
			t.Errorf("%q, %s: %v, want %v", tc.level, tc.params, got, tc.want)
		}
	}
}
