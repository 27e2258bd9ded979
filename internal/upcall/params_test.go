package upcall

import (
	"encoding/json"
	"strings"
	"testing"

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
