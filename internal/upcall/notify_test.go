package upcall

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
)

// fakeNotifier records the notifications it is sent; one on the session
// hang waits for its context to end.
type fakeNotifier struct {
	hang string
	mu   sync.Mutex
	got  []string // session ids, method and params
	errs []error  // each notification's context's error when it came
}

func (n *fakeNotifier) Notify(ctx context.Context, us session.Upstream, method string, params json.RawMessage) error {
	n.mu.Lock()
	n.got = append(n.got, us.SessionID+" "+method+" "+string(params))
	n.errs = append(n.errs, ctx.Err())
	n.mu.Unlock()
	if us.SessionID == n.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func TestNotifyAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &fakeNotifier{hang: "u-b"}
		sessions := map[string]session.Upstream{
			"a": {SessionID: "u-a"},
			"b": {SessionID: "u-b"}, // hangs
			"c": {SessionID: "u-c"},
			"d": {SessionID: "u-d"}, // not to be told
		}
		to := func(name string, us session.Upstream) (Notifier, bool) {
			if name == "d" || us.SessionID != sessions[name].SessionID {
				return nil, false
			}
			return n, true
		}
		// The caller's context is over already: the notifications are
		// sent all the same, bounded by NotifyTimeout.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		NotifyAll(ctx, sessions, to, "notifications/x", json.RawMessage(`{"k":1}`))
		if took := time.Since(start); took != NotifyTimeout {
			t.Errorf("NotifyAll returned after %v, want %v (one upstream hangs)", took, NotifyTimeout)
		}
		slices.Sort(n.got)
		want := []string{`u-a notifications/x {"k":1}`, `u-b notifications/x {"k":1}`, `u-c notifications/x {"k":1}`}
		if !slices.Equal(n.got, want) {
			t.Errorf("notified %q, want %q", n.got, want)
		}
		for _, err := range n.errs {
			if err != nil {
				t.Errorf("a notification's context was over when sent: %v", err)
			}
		}
	})
}

// TestNotifyAllQuick: when every upstream answers, NotifyAll returns at
// once, having waited for each.
func TestNotifyAllQuick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &fakeNotifier{}
		sessions := map[string]session.Upstream{"a": {SessionID: "u-a"}, "b": {SessionID: "u-b"}}
		start := time.Now()
		NotifyAll(t.Context(), sessions, func(string, session.Upstream) (Notifier, bool) { return n, true }, "notifications/y", nil)
		if took := time.Since(start); took != 0 {
			t.Errorf("NotifyAll took %v", took)
		}
		if len(n.got) != 2 {
			t.Errorf("notified %q, want both sessions", n.got)
		}
		NotifyAll(t.Context(), nil, nil, "notifications/y", nil) // no session: nothing to do
	})
}

func TestCancelledParams(t *testing.T) {
	for _, tc := range []struct {
		id   jsonrpc.ID
		want string
	}{
		{jsonrpc.IntID(3), `{"reason":"cancelled by the client","requestId":"c.3"}`},
		{jsonrpc.StringID("x"), `{"reason":"cancelled by the client","requestId":"c.\"x\""}`},
	} {
		if got := string(CancelledParams(tc.id)); got != tc.want {
			t.Errorf("CancelledParams(%s) = %s, want %s", tc.id, got, tc.want)
		}
	}
}
