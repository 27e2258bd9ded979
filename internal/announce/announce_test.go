package announce

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestParse: what the gateway announces is what the client declared among
// the capabilities it relays, in a fixed order, whatever order and extras
// the client sent.
func TestParse(t *testing.T) {
	for _, tc := range []struct{ raw, key, caps string }{
		{``, "", `{}`},
		{`{}`, "", `{}`},
		{`[]`, "", `{}`},
		{`{"experimental":{"x":{}},"tasks":{"list":{}}}`, "", `{}`},
		{`{"roots":{"listChanged":true}}`, "roots,roots.listChanged", `{"roots":{"listChanged":true}}`},
		{`{"roots":{"listChanged":false}}`, "roots", `{"roots":{}}`},
		{`{"sampling":{"tools":{},"x":1},"elicitation":{}}`, "elicitation,sampling,sampling.tools", `{"elicitation":{},"sampling":{"tools":{}}}`},
		{`{"elicitation":{"url":{},"form":{}},"roots":null}`, "elicitation,elicitation.form,elicitation.url", `{"elicitation":{"form":{},"url":{}}}`},
		{`{"sampling":true}`, "", `{}`},
	} {
		s := Parse(json.RawMessage(tc.raw))
		if s.Key() != tc.key || string(s.Caps()) != tc.caps {
			t.Errorf("%s: key %q caps %s, want %q %s", tc.raw, s.Key(), s.Caps(), tc.key, tc.caps)
		}
	}
	if None.Key() != "" || string(None.Caps()) != `{}` || string((&Set{}).Caps()) != `{}` {
		t.Error("the empty set announces something")
	}
}

// TestCacheIsBounded: clients sending a new capabilities value with every
// request leave the table within its bound, and a value too large to keep
// is parsed all the same.
func TestCacheIsBounded(t *testing.T) {
	var c Cache
	for i := range 10 * MaxEntries {
		s := c.Of(json.RawMessage(fmt.Sprintf(`{"sampling":{},"experimental":{"n%d":{}}}`, i)))
		if s.Key() != "sampling" {
			t.Fatalf("key %q", s.Key())
		}
	}
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	if n > MaxEntries {
		t.Errorf("%d entries, bound %d", n, MaxEntries)
	}
	big := json.RawMessage(`{"roots":{},"experimental":{"x":"` + strings.Repeat("x", MaxCachedBytes) + `"}}`)
	if s := c.Of(big); s.Key() != "roots" {
		t.Errorf("a large value: key %q", s.Key())
	}
	if _, ok := c.m.Load(string(big)); ok {
		t.Error("a large value was kept")
	}
}

// TestCacheShares: one value parsed is one set, whoever asks, concurrently.
func TestCacheShares(t *testing.T) {
	var c Cache
	raw := json.RawMessage(`{"roots":{"listChanged":true}}`)
	want := c.Of(raw)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := c.Of(raw); got != want {
				t.Errorf("another set: %+v", got)
			}
		})
	}
	wg.Wait()
}
