package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// The GET streams of 2026-07-28 callers' upstream sessions.
//
// A 2026-07-28 caller's calls to a 2025-11-25 upstream go on an upstream
// session its principal's requests share (see stateless.go). Such an
// upstream may send a request on the session's GET stream, unrelated to
// any call (2025-11-25 basic/transports, "Listening for Messages from the
// Server"): server-everything's get-roots-list asks for roots there while
// the call waits for the answer. With no GET stream open the upstream drops
// it, and the call waits for the upstream's timeout.
//
// So while calls that may need the client are in flight on such an
// upstream session, this replica holds its GET stream, opened before the
// first of them is forwarded; it closes sharedLinger after the last one
// ended (so a run of calls opens it once). The session is the principal's,
// but nothing on that stream names the call it belongs to, and the
// 2026-07-28 client can only be asked within a call (mrtr): a request
// arriving there is refused to the upstream at once (JSON-RPC error), which
// ends its wait, and the call goes on. Notifications there belong to no
// call either and are dropped; ping is answered. Each stream takes one of
// limits.upstream_streams, within the principal's and the tenant's share;
// without a slot the call goes on as before, unheld. A stream the upstream
// refuses (405) is not tried again for noStreamFor.

// sharedLinger is how long a shared upstream session's GET stream stays
// open after the last call that held it.
const sharedLinger = 30 * time.Second

// sharedStream is the GET stream of one shared upstream session.
type sharedStream struct {
	holders int           // calls holding it; under Server.sharedMu
	ready   chan struct{} // closed once the upstream answered the GET
	cancel  context.CancelFunc
	linger  *time.Timer // closes the stream once unheld; nil while held
}

// holdShared holds the GET stream of upstream session us with up (opening
// it if need be) for a call of the 2026-07-28 request rq, and waits until
// the upstream answered its request (at most openWait) or ctx ends. It
// returns release, which the call calls once it is over.
func (rq *Request) holdShared(ctx context.Context, up *upstreamRef, us session.Upstream) (release func()) {
	h := rq.h
	if us.SessionID == "" || upstream.IsModern(us) || !up.client.PerSession() {
		return func() {}
	}
	if t, ok := h.noStream.Load(up.cfg.Name); ok && time.Since(t.(time.Time)) < noStreamFor {
		return func() {}
	}
	key := up.cfg.Name + "\x00" + us.SessionID
	h.sharedMu.Lock()
	s := h.shared[key]
	if s == nil {
		principal, tenant := PrincipalKey(rq), rq.principal.Tenant
		if !h.listenSlots.take(h, principal, tenant, &rq.st.cfg.Limits) {
			h.sharedMu.Unlock()
			return func() {}
		}
		sctx, cancel := context.WithCancel(context.WithoutCancel(rq.withCaller(ctx)))
		s = &sharedStream{ready: make(chan struct{}), cancel: cancel}
		started := h.own.Go(func(owned context.Context) {
			defer h.listenSlots.give(principal, tenant)
			defer context.AfterFunc(owned, cancel)()
			h.metrics.UpstreamStream(1)
			defer h.metrics.UpstreamStream(-1)
			h.serveShared(sctx, up, us, s)
			h.sharedMu.Lock()
			if h.shared[key] == s {
				delete(h.shared, key)
			}
			h.sharedMu.Unlock()
		})
		if !started { // the Server is closing
			cancel()
			h.listenSlots.give(principal, tenant)
			h.sharedMu.Unlock()
			return func() {}
		}
		if h.shared == nil {
			h.shared = make(map[string]*sharedStream)
		}
		h.shared[key] = s
	}
	s.holders++
	if s.linger != nil {
		s.linger.Stop()
		s.linger = nil
	}
	h.sharedMu.Unlock()
	awaitOpen(ctx, s.ready)
	return func() {
		h.sharedMu.Lock()
		defer h.sharedMu.Unlock()
		if s.holders--; s.holders == 0 {
			s.linger = time.AfterFunc(sharedLinger, func() {
				h.sharedMu.Lock()
				defer h.sharedMu.Unlock()
				if s.holders == 0 {
					s.cancel()
					if h.shared[key] == s {
						delete(h.shared, key)
					}
				}
			})
		}
	}
}

// serveShared opens the GET stream of shared upstream session us, closes
// s.ready once the upstream answered, and serves what arrives (see above)
// until ctx ends or the stream does.
func (h *Server) serveShared(ctx context.Context, up *upstreamRef, us session.Upstream, s *sharedStream) {
	st, err := up.client.Watch(ctx, us)
	close(s.ready)
	if err != nil {
		if errors.Is(err, upstream.ErrNoStream) {
			h.noStream.Store(up.cfg.Name, time.Now())
		}
		return
	}
	defer st.Close()
	defer context.AfterFunc(ctx, func() { st.Close() })()
	for {
		msg, _, err := st.Next()
		if err != nil {
			return
		}
		if msg.Kind != jsonrpc.KindRequest {
			continue
		}
		var result []byte
		var e *jsonrpc.Error
		if msg.Method == "ping" {
			result = []byte(`{}`)
		} else {
			e = jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s outside a call cannot reach a 2026-07-28 client: ask within the call", msg.Method)
		}
		if err := up.client.Reply(context.WithoutCancel(ctx), us, msg.ID, result, e); err != nil {
			h.log.Debug("answering a request on a shared upstream stream", "upstream", up.cfg.Name, "error", err)
		}
	}
}
