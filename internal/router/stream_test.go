package router

import (
	"encoding/json"
	"testing"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// TestAppendResultEvent checks the one-buffer encoding of a streamed
// response against the two-step one it replaces.
func TestAppendResultEvent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		id     jsonrpc.ID
		result string
	}{
		{"object", jsonrpc.IntID(7), `{"content":[{"type":"text","text":"hi"}]}`},
		{"string id", jsonrpc.StringID("c.1"), `{}`},
		{"empty result", jsonrpc.IntID(1), ``},
		{"line breaks", jsonrpc.IntID(2), "{\n  \"a\": 1\r\n}"},
		{"CR only", jsonrpc.IntID(3), "{\"a\":\r1}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := appendEvent(nil, jsonrpc.AppendResult(nil, tc.id, json.RawMessage(tc.result)))
			got := appendResultEvent([]byte("garbage"), tc.id, json.RawMessage(tc.result))
			if string(got) != "garbage"+string(want) {
				t.Errorf("appendResultEvent = %q, want %q", got, "garbage"+string(want))
			}
		})
	}
}
