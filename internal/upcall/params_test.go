package upcall

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/session"
)

// TestParams: a 2025-11-25 upstream hears none of a 2026-07-28 client's
// protocol _meta keys (every other byte stays), and a session client's
// params as they are; a 2026-07-28 upstream hears a 2026-07-28 client's
// own, and a session client's filled in from its session.
func TestParams(t *testing.T) {
	legacy := session.Upstream{ProtocolVersion: "2025-11-25"}
	modern := session.Upstream{ProtocolVersion: "2026-07-28"}
	withMeta := json.RawMessage(`{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7}}`)
	onlyMeta := json.RawMessage(`{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`)
	for _, tc := range []struct {
		name      string
		us        session.Upstream
		in        json.RawMessage
		stateless bool
		want      string
	}{
		{"legacy, stateless: stripped", legacy, withMeta, true, `{"name":"t","_meta":{"progressToken":7}}`},
		{"legacy, stateless: _meta gone", legacy, onlyMeta, true, `{"name":"t"}`},
		{"legacy, session: as is", legacy, withMeta, false, string(withMeta)},
		{"modern, stateless: as is", modern, withMeta, true, string(withMeta)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Params(tc.us, tc.in, tc.stateless, nil, nil); string(got) != tc.want {
				t.Errorf("Params = %s, want %s", got, tc.want)
			}
		})
	}
	got := Params(modern, json.RawMessage(`{"name":"t"}`), false, json.RawMessage(`{"name":"c","version":"1"}`), json.RawMessage(`{"roots":{}}`))
	for _, want := range []string{`"io.modelcontextprotocol/protocolVersion"`, `"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}`, `"io.modelcontextprotocol/clientCapabilities":{"roots":{}}`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("modern, session: %s lacks %s", got, want)
		}
	}
}

// TestShapeParams: params given as an object are shaped byte for byte as
// Params shapes their encoding, and stay an object, not encoded, but when
// a 2025-11-25 upstream is not to hear the protocol's _meta keys and they
// may have some; the object given is not changed; raw params are Params'.
func TestShapeParams(t *testing.T) {
	legacy := session.Upstream{ProtocolVersion: "2025-11-25"}
	modern := session.Upstream{ProtocolVersion: "2026-07-28"}
	info, caps := json.RawMessage(`{"name":"c","version":"1"}`), json.RawMessage(`{"roots":{}}`)
	for _, in := range []string{
		`{"name":"t","arguments":{"q":"x"}}`,
		`{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7}}`,
		`{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		`{"name":"t","arguments":{"q":"io.modelcontextprotocol/x"},"_meta":{ "progressToken" : 7 }}`,
		`{"io.modelcontextprotocol/odd":1,"_meta":{ "a" : 1 }}`,
	} {
		for _, us := range []session.Upstream{legacy, modern} {
			for _, stateless := range []bool{false, true} {
				o, err := jsonx.ParseObject([]byte(in))
				if err != nil {
					t.Fatal(err)
				}
				want := Params(us, o.Bytes(), stateless, info, caps)
				got := ShapeParams(us, jsonrpc.ObjectParams(o), stateless, info, caps)
				if string(got.Bytes()) != string(want) {
					t.Errorf("%s, %s, stateless %v: %s, want %s", in, us.ProtocolVersion, stateless, got.Bytes(), want)
				}
				_, isObject := got.Object()
				isModern := us.ProtocolVersion == modern.ProtocolVersion
				stays := isModern || !stateless || !strings.Contains(in, "io.modelcontextprotocol/")
				if isObject != stays {
					t.Errorf("%s, %s, stateless %v: still an object %v, want %v", in, us.ProtocolVersion, stateless, isObject, stays)
				}
				if string(o.Bytes()) != string(mustParse(t, in).Bytes()) {
					t.Errorf("%s, %s, stateless %v: the object changed to %s", in, us.ProtocolVersion, stateless, o.Bytes())
				}
				raw := ShapeParams(us, jsonrpc.RawParams(o.Bytes()), stateless, info, caps)
				if _, ok := raw.Object(); ok || string(raw.Bytes()) != string(want) {
					t.Errorf("%s, %s, stateless %v: raw params shaped as %s, want %s", in, us.ProtocolVersion, stateless, raw.Bytes(), want)
				}
			}
		}
	}
}

func mustParse(t *testing.T, s string) *jsonx.Object {
	t.Helper()
	o, err := jsonx.ParseObject([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return o
}
