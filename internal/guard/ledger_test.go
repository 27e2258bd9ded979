package guard

import (
	"strconv"
	"testing"
)

// TestLedger: verdicts are remembered per exact definition text, at most
// MaxRemembered of them; quarantine notes are kept once each, at most
// MaxQuarantined, and name what was found, never the text.
func TestLedger(t *testing.T) {
	var e Engine
	k := KeyOf("t", "u", "tool", "x", []byte(`{"name":"x"}`))
	if _, ok := e.Blocked(k); ok {
		t.Fatal("a verdict before any")
	}
	e.Remember(k, true)
	if b, ok := e.Blocked(k); !ok || !b {
		t.Fatalf("Blocked = %v, %v", b, ok)
	}
	changed := KeyOf("t", "u", "tool", "x", []byte(`{"name":"x","description":"new"}`))
	if _, ok := e.Blocked(changed); ok {
		t.Error("a changed definition kept the old verdict")
	}
	// One tenant floods the verdicts: it keeps half of them, and the
	// others still have room, up to the bound.
	for i := range MaxRemembered + 10 {
		e.Remember(KeyOf("t", "u", "tool", strconv.Itoa(i), nil), false)
	}
	if _, ok := e.Blocked(KeyOf("t", "u", "tool", strconv.Itoa(MaxRemembered/2+5), nil)); ok {
		t.Error("one tenant kept more than half of the verdicts")
	}
	for i := range MaxRemembered {
		e.Remember(KeyOf("o"+strconv.Itoa(i%4), "u", "tool", strconv.Itoa(i), nil), false)
	}
	if _, ok := e.Blocked(KeyOf("o0", "u", "tool", "0", nil)); !ok {
		t.Error("another tenant found no room")
	}
	if _, ok := e.Blocked(KeyOf("o3", "u", "tool", strconv.Itoa(MaxRemembered-1), nil)); ok {
		t.Error("more than MaxRemembered verdicts kept")
	}
	v := Verdict{Action: Block, Findings: []Finding{{Kind: "hidden-text", Action: Block}, {Kind: "email", Action: Redact}, {Kind: "hidden-text", Action: Block}}}
	for range 3 {
		e.Quarantine(k, v)
	}
	q := e.Quarantined()
	if len(q) != 1 || q[0].Found != "hidden-text" || q[0].Original != "x" || q[0].Kind != "tool" {
		t.Fatalf("Quarantined = %+v", q)
	}
	for i := range MaxQuarantined + 10 {
		e.Quarantine(KeyOf("t", "u", "tool", strconv.Itoa(i), nil), v)
	}
	if n := len(e.Quarantined()); n != MaxQuarantined/2 {
		t.Errorf("one tenant has %d notes, want half of %d", n, MaxQuarantined)
	}
	for i := range MaxQuarantined {
		e.Quarantine(KeyOf("o"+strconv.Itoa(i%2), "u", "tool", strconv.Itoa(i), nil), v)
	}
	if n := len(e.Quarantined()); n != MaxQuarantined {
		t.Errorf("%d notes kept", n)
	}
	var none *Engine
	if none.Quarantined() != nil {
		t.Error("a nil engine has notes")
	}
}
