package transport

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

// TestDeferredHeaders checks that a stream's deferred headers reach the
// client without an event when none follows them soon, and that the last
// event arrives whole.
func TestDeferredHeaders(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := newResponder(w)
		out.deferHeaders()
		defer out.finish()
		out.startSSE()
		<-release // a slow tool
		out.Result(jsonrpc.IntID(1), json.RawMessage(`{"ok":true}`))
	}))
	defer srv.Close()
	defer close(release)

	start := time.Now()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if d := time.Since(start); d < sseHeaderDelay/2 {
		t.Errorf("headers after %v, before the delay of %v", d, sseHeaderDelay)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	release <- struct{}{}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"ok\":true}}\n\n"; string(body) != want {
		t.Errorf("body %q, want %q", body, want)
	}
}
