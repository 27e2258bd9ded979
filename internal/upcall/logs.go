package upcall

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// MaxLogging bounds the upstream sessions a Logging remembers.
const MaxLogging = 4096

// Logging remembers the upstream sessions the gateway set to log (at
// debug, for the 2026-07-28 callers that share them), so that each is sent
// its level once per replica. At most MaxLogging are kept: the table is
// emptied when full, rather than evicted one by one, and a session is
// then sent its level again. The zero Logging is empty and ready to use;
// its methods may be called concurrently.
type Logging struct {
	m sync.Map // upstream and session id → struct{}
	n atomic.Int64
}

// On reports whether upstream's session sessionID was set to log.
func (l *Logging) On(upstream, sessionID string) bool {
	_, ok := l.m.Load(upstream + "\x00" + sessionID)
	return ok
}

// Set records that upstream's session sessionID was set to log.
func (l *Logging) Set(upstream, sessionID string) {
	if l.n.Add(1) > MaxLogging {
		l.m.Clear()
		l.n.Store(1)
	}
	l.m.Store(upstream+"\x00"+sessionID, struct{}{})
}

// Enable makes upstream name's session us log for the 2026-07-28 requests
// that go on it: a 2025-11-25 upstream sends log messages only once
// logging/setLevel set a level for the session, and 2026-07-28 has no
// such method but a level per request (changelog, major change 5). A
// principal's requests share that session, so its level is set to debug,
// once per session on this replica, and each request keeps the messages
// at or above its own level (see relay.WantsLog). Nothing is sent to a
// 2026-07-28 session, nor when the upstream's capabilities do not
// announce logging (announced). call sends a request on us and reads its
// answer; its failure is returned (the request goes without log
// messages), and the session is sent its level again next time.
func (l *Logging) Enable(ctx context.Context, name string, us session.Upstream, announced bool, call func(ctx context.Context, method string, params json.RawMessage) error) error {
	if upstream.IsModern(us) || !announced || l.On(name, us.SessionID) {
		return nil
	}
	if err := call(ctx, protocol.MethodSetLevel, json.RawMessage(`{"level":"debug"}`)); err != nil {
		return err
	}
	l.Set(name, us.SessionID) // bounded: a session may be sent its level again
	return nil
}
