package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseInitialize(t *testing.T) {
	for _, tc := range []struct {
		params, version, tooBig, err string
	}{
		{params: `{"protocolVersion":"2025-06-18","clientInfo":{"name":"c"},"capabilities":{}}`, version: "2025-06-18"},
		{params: `{"protocolVersion":"1999-01-01"}`, version: LatestSession.String()},
		{params: `{"protocolVersion":"2026-07-28"}`, version: LatestSession.String()}, // not a session revision
		{params: `[]`, err: "must be an object"},
		{params: `{}`, err: "protocolVersion is required"},
		{params: `{"protocolVersion":"2025-11-25","clientInfo":{"name":"a long name"}}`, tooBig: "clientInfo", err: "limits.client_info_bytes (16 bytes)"},
		{params: `{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}}}`, tooBig: "capabilities", err: "limits.client_capabilities_bytes (16 bytes)"},
	} {
		in, tooBig, err := ParseInitialize(json.RawMessage(tc.params), 16, 16)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || tooBig != tc.tooBig {
				t.Errorf("%s: %q, %v; want %q, %q", tc.params, tooBig, err, tc.tooBig, tc.err)
			}
			continue
		}
		if err != nil || in.Version != tc.version {
			t.Errorf("%s: %+v, %v; want version %s", tc.params, in, err, tc.version)
		}
	}
	res := InitializeResult("2025-11-25", map[string]json.RawMessage{"tools": json.RawMessage(`{}`)}, "gw", "1", "")
	if string(res) != `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"gw","version":"1"}}` {
		t.Errorf("result %s", res)
	}
}
