package dispatch

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestParseAnnounced: what the gateway announces is what the client
// declared among the capabilities it relays, in a fixed order, whatever
// order and extras the client sent.
func TestParseAnnounced(t *testing.T) {
	for _, tc := range []struct{ raw, key, caps string }{
		{``, "", ``},
		{`{}`, "", ``},
		{`[]`, "", ``},
		{`{"experimental":{"x":{}},"tasks":{"list":{}}}`, "", ``},
		{`{"roots":{"listChanged":true}}`, "roots,roots.listChanged", `{"roots":{"listChanged":true}}`},
		{`{"roots":{"listChanged":false}}`, "roots", `{"roots":{}}`},
		{`{"sampling":{"tools":{},"x":1},"elicitation":{}}`, "elicitation,sampling,sampling.tools", `{"elicitation":{},"sampling":{"tools":{}}}`},
		{`{"elicitation":{"url":{},"form":{}},"roots":null}`, "elicitation,elicitation.form,elicitation.url", `{"elicitation":{"form":{},"url":{}}}`},
		{`{"sampling":true}`, "", ``},
	} {
		a := parseAnnounced(json.RawMessage(tc.raw))
		if a.key != tc.key || string(a.caps) != tc.caps {
			t.Errorf("%s: key %q caps %s, want %q %s", tc.raw, a.key, a.caps, tc.key, tc.caps)
		}
	}
}

// TestAnnounceIsBounded: clients sending a new capabilities value with
// every request leave the table within its bound.
func TestAnnounceIsBounded(t *testing.T) {
	h := &Server{}
	for i := range 10 * announcedMaxEntries {
		a := h.announce(json.RawMessage(fmt.Sprintf(`{"sampling":{},"experimental":{"n%d":{}}}`, i)))
		if a.key != "sampling" {
			t.Fatalf("key %q", a.key)
		}
	}
	n := 0
	h.announcedSets.Range(func(any, any) bool { n++; return true })
	if n > announcedMaxEntries {
		t.Errorf("%d entries, bound %d", n, announcedMaxEntries)
	}
}
