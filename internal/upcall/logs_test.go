package upcall

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
)

// TestLogging: a session set to log is remembered, per upstream, and the
// table stays within MaxLogging however many come.
func TestLogging(t *testing.T) {
	var l Logging
	l.Set("a", "s1")
	if !l.On("a", "s1") || l.On("b", "s1") || l.On("a", "s2") {
		t.Fatal("On disagrees with Set")
	}
	for i := range 3 * MaxLogging {
		l.Set("a", strconv.Itoa(i))
	}
	n := 0
	l.m.Range(func(any, any) bool { n++; return true })
	if n > MaxLogging || !l.On("a", strconv.Itoa(3*MaxLogging-1)) {
		t.Errorf("%d sessions kept, bound %d", n, MaxLogging)
	}
}

// TestLoggingEnable: a 2025-11-25 session whose upstream announces logging
// is set to debug once; a 2026-07-28 one, or one of an upstream without
// logging, never; a failed attempt is tried again.
func TestLoggingEnable(t *testing.T) {
	var l Logging
	var sent []string
	fail := error(nil)
	call := func(_ context.Context, method string, params json.RawMessage) error {
		sent = append(sent, method+" "+string(params))
		return fail
	}
	ctx := context.Background()
	legacy := session.Upstream{SessionID: "s1", ProtocolVersion: protocol.V2025_11_25.String()}
	modern := session.Upstream{SessionID: "s2", ProtocolVersion: protocol.V2026_07_28.String()}

	for range 2 {
		if err := l.Enable(ctx, "a", legacy, true, call); err != nil {
			t.Fatal(err)
		}
	}
	if want := protocol.MethodSetLevel + ` {"level":"debug"}`; len(sent) != 1 || sent[0] != want {
		t.Fatalf("sent %q, want %q once", sent, want)
	}
	// The same session id at another upstream is another session.
	sent = nil
	if err := l.Enable(ctx, "b", legacy, true, call); err != nil || len(sent) != 1 {
		t.Errorf("another upstream's session: sent %q, %v", sent, err)
	}

	sent = nil
	if err := l.Enable(ctx, "a", modern, true, call); err != nil || len(sent) != 0 {
		t.Errorf("a 2026-07-28 session: sent %q, %v", sent, err)
	}
	if err := l.Enable(ctx, "c", legacy, false, call); err != nil || len(sent) != 0 || l.On("c", "s1") {
		t.Errorf("an upstream without logging: sent %q, %v", sent, err)
	}

	fail = errors.New("boom")
	if err := l.Enable(ctx, "d", legacy, true, call); !errors.Is(err, fail) || l.On("d", "s1") {
		t.Fatalf("failed setLevel: %v, remembered %v", err, l.On("d", "s1"))
	}
	fail = nil
	if err := l.Enable(ctx, "d", legacy, true, call); err != nil || len(sent) != 2 || !l.On("d", "s1") {
		t.Errorf("after a failure: sent %q, %v", sent, err)
	}
}
