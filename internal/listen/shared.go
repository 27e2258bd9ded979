package listen

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// The GET streams of 2026-07-28 callers' upstream sessions.
//
// A 2026-07-28 caller's calls to a 2025-11-25 upstream go on an upstream
// session its principal's requests share (see internal/dispatch). Such an
// upstream may send a request on the session's GET stream, unrelated to
// any call (2025-11-25 basic/transports, "Listening for Messages from the
// Server"): server-everything's get-roots-list asks for roots there while
// the call waits for the answer. With no GET stream open the upstream drops
// it, and the call waits for the upstream's timeout.
//
// So while calls that may need the client are in flight on such an
// upstream session, this replica holds its GET stream, opened before the
// first of them is forwarded; it closes sharedLinger after the last one
// ended (so a run of calls opens it once). Nothing on that stream names
// the call a request belongs to, and the 2026-07-28 client can only be
// asked within a call (mrtr). The session is the principal's, and the
// owner can be told only when one call holds the stream: a request
// arriving there then joins that call's own stream (Hold.Inbox), as
// if the upstream had sent it there, and is bridged to the client like any
// request of the call (asked in its input_required result, or refused
// with -32021 when the caller lacks the capability). With several calls,
// or none (a call parked for its retry still holds the stream, until its
// upstream call ends), the request is refused to the upstream at once
// (JSON-RPC error), which ends its wait, and the calls go on.
// Notifications there belong to no call and are dropped; ping is
// answered. Each stream takes one of limits.upstream_streams, within the
// principal's and the tenant's share; without a slot the call goes on as
// before, unheld. A stream the upstream refuses (405) is not tried again
// for a while (Hub.NoStream).

// sharedLinger is how long a shared upstream session's GET stream stays
// open after the last call that held it.
const sharedLinger = 30 * time.Second

// replyTimeout bounds the refusals sent for requests nobody read.
const replyTimeout = 5 * time.Second

// sharedStream is the GET stream of one shared upstream session.
type sharedStream struct {
	holders int                // calls holding it; under Hub.sharedMu
	calls   map[*Hold]struct{} // those holders; under Hub.sharedMu
	ready   chan struct{}      // closed once the upstream answered the GET
	cancel  context.CancelFunc
	linger  *time.Timer // closes the stream once unheld; nil while held
}

// A Hold is one call's hold on a shared upstream session's GET stream:
// requests of the stream's that belong to the call come on Inbox. The
// zero hold (no stream held, NoHold) has none.
type Hold struct {
	Inbox chan []byte
	// Release gives the hold back; it may be called more than once.
	Release func()
}

// sharedInbox bounds the stream's requests handed to one call and not yet
// read; past it, one more is refused to the upstream.
const sharedInbox = 4

// NoHold is the hold of a call that holds no stream.
var NoHold = &Hold{Release: func() {}}

// HoldShared holds the GET stream of upstream session us with up (opening
// it if need be) for a call of a 2026-07-28 caller (principal, tenant),
// and waits until the upstream answered its request (at most OpenWait) or
// ctx ends; ctx carries the caller, for the upstream's credentials. The
// call gives the hold back (Release) once it is over.
func (hb *Hub) HoldShared(ctx context.Context, up Upstream, us session.Upstream, principal, tenant string, limits *config.Limits) *Hold {
	if us.SessionID == "" || upstream.IsModern(us) || !up.Client.PerSession() {
		return NoHold
	}
	if hb.NoStream(up.Name) {
		return NoHold
	}
	key := up.Name + "\x00" + us.SessionID
	hb.sharedMu.Lock()
	s := hb.shared[key]
	if s == nil {
		if !hb.Take(principal, tenant, limits) {
			hb.sharedMu.Unlock()
			return NoHold
		}
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s = &sharedStream{ready: make(chan struct{}), cancel: cancel, calls: map[*Hold]struct{}{}}
		started := hb.goOwned(func(owned context.Context) {
			defer hb.Give(principal, tenant)
			defer context.AfterFunc(owned, cancel)()
			hb.metrics.UpstreamStream(1)
			defer hb.metrics.UpstreamStream(-1)
			hb.serveShared(sctx, up, us, s)
			hb.sharedMu.Lock()
			if hb.shared[key] == s {
				delete(hb.shared, key)
			}
			hb.sharedMu.Unlock()
		})
		if !started { // the owner is closing
			cancel()
			hb.Give(principal, tenant)
			hb.sharedMu.Unlock()
			return NoHold
		}
		if hb.shared == nil {
			hb.shared = make(map[string]*sharedStream)
		}
		hb.shared[key] = s
	}
	s.holders++
	if s.linger != nil {
		s.linger.Stop()
		s.linger = nil
	}
	hold := &Hold{Inbox: make(chan []byte, sharedInbox)}
	s.calls[hold] = struct{}{}
	hold.Release = sync.OnceFunc(func() {
		hb.sharedMu.Lock()
		defer hb.sharedMu.Unlock()
		delete(s.calls, hold)
		// What was handed to the call and not read, nobody will answer:
		// the upstream hears so at once.
		hb.refuseUnread(ctx, up, us, hold.Inbox)
		if s.holders--; s.holders == 0 {
			s.linger = time.AfterFunc(sharedLinger, func() {
				hb.sharedMu.Lock()
				defer hb.sharedMu.Unlock()
				if s.holders == 0 {
					s.cancel()
					if hb.shared[key] == s {
						delete(hb.shared, key)
					}
				}
			})
		}
	})
	hb.sharedMu.Unlock()
	AwaitOpen(ctx, s.ready)
	return hold
}

// refuseUnread refuses to the upstream the requests left in inbox. The
// replies are posted in the background, bounded in time, so that the
// caller (who holds Hub.sharedMu) does not wait for the upstream.
func (hb *Hub) refuseUnread(ctx context.Context, up Upstream, us session.Upstream, inbox chan []byte) {
	var ids []jsonrpc.ID
	for {
		select {
		case raw := <-inbox:
			if msg, err := jsonrpc.Decode(raw); err == nil && msg.Kind == jsonrpc.KindRequest {
				ids = append(ids, msg.ID)
			}
			continue
		default:
		}
		break
	}
	if len(ids) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	hb.goOwned(func(owned context.Context) {
		ctx, cancel := context.WithTimeout(ctx, replyTimeout)
		defer cancel()
		defer context.AfterFunc(owned, cancel)()
		for _, id := range ids {
			_ = up.Client.Reply(ctx, us, id, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the call this request belonged to has ended"))
		}
	})
}

// handOff gives a request of s's stream to the one call holding s, and
// reports whether it did: not when several calls hold it, or none, or the
// call's inbox is full.
func (hb *Hub) handOff(s *sharedStream, raw []byte) bool {
	hb.sharedMu.Lock()
	defer hb.sharedMu.Unlock()
	if len(s.calls) != 1 {
		return false
	}
	for c := range s.calls {
		select {
		case c.Inbox <- bytes.Clone(raw):
			return true
		default:
		}
	}
	return false
}

// serveShared opens the GET stream of shared upstream session us, closes
// s.ready once the upstream answered, and serves what arrives (see above)
// until ctx ends or the stream does.
func (hb *Hub) serveShared(ctx context.Context, up Upstream, us session.Upstream, s *sharedStream) {
	st, err := up.Client.Watch(ctx, us)
	close(s.ready)
	if err != nil {
		if errors.Is(err, upstream.ErrNoStream) {
			hb.MarkNoStream(up.Name)
		}
		return
	}
	defer st.Close()
	defer context.AfterFunc(ctx, func() { st.Close() })()
	for {
		msg, raw, err := st.Next()
		if err != nil {
			return
		}
		if msg.Kind != jsonrpc.KindRequest {
			continue
		}
		var result []byte
		var e *jsonrpc.Error
		switch {
		case msg.Method == protocol.MethodPing:
			result = []byte(`{}`)
		case hb.handOff(s, raw):
			continue
		default:
			e = jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s outside a call cannot reach a 2026-07-28 client: the gateway cannot tell which call it belongs to; ask within the call", msg.Method)
		}
		if err := up.Client.Reply(context.WithoutCancel(ctx), us, msg.ID, result, e); err != nil {
			hb.log.Debug("answering a request on a shared upstream stream", "upstream", up.Name, "error", err)
		}
	}
}
