package upcall

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
)

// A Notifier sends a notification on one of its upstream sessions: an
// upstream's *upstream.Client.
type Notifier interface {
	Notify(ctx context.Context, us session.Upstream, method string, params json.RawMessage) error
}

// NotifyTimeout bounds NotifyAll.
const NotifyTimeout = 5 * time.Second

// NotifyAll sends notification method with params on each of sessions
// (upstream name → the client session's upstream session) for which to
// returns the upstream's Notifier (false: the session is skipped), all at
// once, and returns when every one was sent or failed. They are bounded by
// NotifyTimeout, not by ctx's cancellation: the client's notification is
// passed on even when what brought it is over. Failures are not reported:
// a notification has no answer, and the client none to wait for.
func NotifyAll(ctx context.Context, sessions map[string]session.Upstream, to func(name string, us session.Upstream) (Notifier, bool), method string, params json.RawMessage) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), NotifyTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for name, us := range sessions {
		if n, ok := to(name, us); ok {
			wg.Go(func() { _ = n.Notify(ctx, us, method, params) })
		}
	}
	wg.Wait()
}

// CancelledParams are the params of the notifications/cancelled that
// tells an upstream that the session client cancelled its request id,
// which travelled under ForwardID(id).
func CancelledParams(id jsonrpc.ID) json.RawMessage {
	params, _ := json.Marshal(map[string]any{"requestId": ForwardID(id), "reason": "cancelled by the client"})
	return params
}
