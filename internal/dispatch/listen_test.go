package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/session"
)

// TestListenSlots: limits.upstream_streams is a hard bound on the
// streams taken at once, and the limit is logged again only after the
// count fell below it.
func TestListenSlots(t *testing.T) {
	var s listenSlots
	for i := range 3 {
		if !s.take(3) {
			t.Fatalf("slot %d refused under the bound", i)
		}
	}
	if s.take(3) {
		t.Fatal("a fourth slot of 3")
	}
	if s.logged.Swap(true) {
		t.Fatal("logged before")
	}
	s.give()
	if s.logged.Load() {
		t.Error("still marked logged once a slot was free")
	}
	if !s.take(3) || s.take(3) {
		t.Error("the freed slot, and only it, is taken again")
	}
}

// TestNotifySession: the gateway's messages reach the session's
// subscriber and nobody else's; what is not a JSON-RPC object is refused.
func TestNotifySession(t *testing.T) {
	bus := session.NewMemoryBus(session.BusOptions{})
	h := &Server{bus: bus}
	mine, other := make(chan []byte, 1), make(chan []byte, 1)
	defer bus.Subscribe("s1", mine)()
	defer bus.Subscribe("s2", other)()
	ctx := context.Background()
	if err := h.NotifySession(ctx, "s1", listenWake); err == nil {
		t.Error("a wake-up passed for a gateway message")
	}
	msg := `{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"x"}}`
	if err := h.NotifySession(ctx, "s1", []byte(msg)); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-mine:
		if string(got) != msg {
			t.Errorf("got %s", got)
		}
	case <-time.After(time.Second):
		t.Fatal("nothing arrived")
	}
	select {
	case got := <-other:
		t.Errorf("another session got %s", got)
	default:
	}
}
