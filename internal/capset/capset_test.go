package capset

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestCacheIsBounded: distinct client capability values, as many as a
// client cares to send, leave the table within its bounds, and a large
// value is answered without being kept.
func TestCacheIsBounded(t *testing.T) {
	var c Cache
	big := json.RawMessage(`{"elicitation":{},"x":"` + strings.Repeat("y", MaxBytes) + `"}`)
	if !c.Names(big)["elicitation"] {
		t.Fatal("a large value is not parsed")
	}
	if _, ok := c.m.Load(string(big)); ok {
		t.Error("a value over MaxBytes was kept")
	}
	for i := range 20 * MaxEntries {
		caps := json.RawMessage(fmt.Sprintf(`{"sampling":{},"experimental":{"n%d":%q}}`, i, strings.Repeat("z", 1000)))
		if !c.Names(caps)["sampling"] {
			t.Fatal("Names lost a name")
		}
	}
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	if n > MaxEntries {
		t.Errorf("the cache holds %d entries, bound %d", n, MaxEntries)
	}
	// A value seen again is served from the table.
	small := json.RawMessage(`{"roots":{}}`)
	first := c.Names(small)
	if second := c.Names(small); fmt.Sprintf("%p", first) != fmt.Sprintf("%p", second) {
		t.Error("a small value was not cached")
	}
}

// TestNames: a null capability is not offered; what is not an object
// offers nothing.
func TestNames(t *testing.T) {
	var c Cache
	got := c.Names(json.RawMessage(`{"tools":{"listChanged":true},"logging":null,"prompts":{}}`))
	if !got["tools"] || !got["prompts"] || got["logging"] || len(got) != 2 {
		t.Errorf("Names = %v", got)
	}
	if got := c.Names(json.RawMessage(`[1]`)); len(got) != 0 {
		t.Errorf("Names of an array = %v", got)
	}
}

func TestSeen(t *testing.T) {
	var s Seen
	if _, ok := s.Last("a"); ok {
		t.Fatal("an upstream never seen has capabilities")
	}
	s.Remember("a", json.RawMessage(`{"tools":{}}`))
	s.Remember("a", json.RawMessage(`{"prompts":{}}`))
	if caps, ok := s.Last("a"); !ok || string(caps) != `{"prompts":{}}` {
		t.Errorf("Last = %s, %v", caps, ok)
	}
}
