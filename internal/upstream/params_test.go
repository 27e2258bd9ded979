package upstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
)

// TestCallParamsObject: a call whose params are an object sends, on a
// 2025-11-25 session and on a 2026-07-28 one (whose _meta the client fills
// in unless the params speak for themselves), the body and the mirrored
// headers that the same call with their encoding as raw params sends,
// byte for byte; the object is not changed.
func TestCallParamsObject(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	var headers []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.Decode(b)
		if err != nil || msg.Kind != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		mu.Lock()
		bodies, headers = append(bodies, b), append(headers, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)))
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{ClientInfo: json.RawMessage(`{"name":"gw","version":"1"}`)})
	sessions := []session.Upstream{{SessionID: "s1", ProtocolVersion: "2025-11-25"}, {ProtocolVersion: modernVersion.String()}}
	for _, in := range []string{
		`{ "name" : "na me" , "arguments" : { "q" : "\u00e9" } }`,
		`{"name":"t","_meta":{ "progressToken" : 1 }}`,
		`{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
	} {
		for _, us := range sessions {
			o, err := jsonx.ParseObject([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			before := string(o.Bytes())
			extra := http.Header{"Mcp-Param-Region": {"eu"}}
			for _, params := range []jsonrpc.Params{jsonrpc.RawParams(o.Bytes()), jsonrpc.ObjectParams(o)} {
				r, err := c.CallParams(context.Background(), us, jsonrpc.StringID("c.1"), "tools/call", params, extra)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := r.Next(); err != nil {
					t.Fatal(err)
				}
				r.Close()
			}
			if string(o.Bytes()) != before {
				t.Errorf("%s: the object changed to %s", in, o.Bytes())
			}
			mu.Lock()
			raw, obj := bodies[len(bodies)-2], bodies[len(bodies)-1]
			rawH, objH := headers[len(headers)-2], headers[len(headers)-1]
			mu.Unlock()
			if string(raw) != string(obj) {
				t.Errorf("%s on %s: object params sent\n%s\nraw ones\n%s", in, us.ProtocolVersion, obj, raw)
			}
			for _, k := range []string{protocol.HeaderMethod, protocol.HeaderName, "Mcp-Param-Region", protocol.HeaderProtocolVersion} {
				if rawH.Get(k) != objH.Get(k) {
					t.Errorf("%s on %s: header %s %q, raw params' %q", in, us.ProtocolVersion, k, objH.Get(k), rawH.Get(k))
				}
			}
		}
	}
}

// TestWithModernMetaObject: the object form's copy encodes as
// WithModernMeta returns the object's encoding, and the object given is
// not changed.
func TestWithModernMetaObject(t *testing.T) {
	info, caps := json.RawMessage(`{"name":"gw","version":"1"}`), json.RawMessage(`{"roots":{}}`)
	for _, in := range []string{`{}`, `{"name":"t"}`, `{"_meta":{ "a" : 1 ,"io.modelcontextprotocol/protocolVersion":"old"},"x":[1, 2]}`, `{"_meta":null}`} {
		o, err := jsonx.ParseObject([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		want := WithModernMeta(o.Bytes(), info, caps)
		if got := WithModernMetaObject(o, info, caps).Bytes(); string(got) != string(want) {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
		if got := WithModernMetaObject(o, nil, nil).Bytes(); string(got) != string(WithModernMeta(o.Bytes(), nil, nil)) {
			t.Errorf("%s, no info or caps: %s", in, got)
		}
		if string(o.Bytes()) != string(mustObject(t, in).Bytes()) {
			t.Errorf("%s: the object changed to %s", in, o.Bytes())
		}
	}
}

func mustObject(t *testing.T, s string) *jsonx.Object {
	t.Helper()
	o, err := jsonx.ParseObject([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return o
}
