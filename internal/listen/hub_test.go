package listen

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/session"
)

// TestListenSlots: limits.upstream_streams is a hard bound on the
// streams taken at once, one principal and one tenant hold at most their
// share of it, and the pool's limit is logged again only after the count
// fell below it.
func TestListenSlots(t *testing.T) {
	s := New(Options{Logger: slog.New(slog.DiscardHandler)})
	l := &config.Limits{UpstreamStreams: 3, UpstreamStreamsPerPrincipal: 2, UpstreamStreamsPerTenant: 3}
	for i := range 2 {
		if !s.Take("alice", "t1", l) {
			t.Fatalf("alice's slot %d refused under her share", i)
		}
	}
	if s.Take("alice", "t1", l) {
		t.Fatal("alice took a third slot of her share of 2")
	}
	if !s.Take("bob", "t1", l) {
		t.Fatal("bob refused while the pool had room")
	}
	if s.Take("carol", "t2", l) {
		t.Fatal("a fourth slot of 3")
	}
	if !s.logged.Load() {
		t.Fatal("the pool's limit was not logged")
	}
	s.Give("bob", "t1")
	if s.logged.Load() {
		t.Error("still marked logged once a slot was free")
	}
	if !s.Take("carol", "t2", l) || s.Take("dave", "t2", l) {
		t.Error("the freed slot, and only it, is taken again")
	}
	l.UpstreamStreams, l.UpstreamStreamsPerTenant = 10, 3
	if !s.Take("erin", "t1", l) || s.Take("frank", "t1", l) {
		t.Error("tenant t1 took other than its share of 3")
	}
	if got := s.slots.Held(); got != 4 {
		t.Errorf("held %d, want 4", got)
	}
}

// TestNotifySession: the gateway's messages reach the session's
// subscriber and nobody else's; what is not a JSON-RPC object is refused.
func TestNotifySession(t *testing.T) {
	bus := session.NewMemoryBus(session.BusOptions{})
	h := New(Options{Bus: bus})
	mine, other := make(chan []byte, 1), make(chan []byte, 1)
	defer bus.Subscribe("s1", mine)()
	defer bus.Subscribe("s2", other)()
	ctx := context.Background()
	if err := h.Notify(ctx, "s1", wake); err == nil {
		t.Error("a wake-up passed for a gateway message")
	}
	msg := `{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"x"}}`
	if err := h.Notify(ctx, "s1", []byte(msg)); err != nil {
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
