package dispatch

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/listen"
	"github.com/mcpgw/gateway/internal/protocol"
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
// ended (so a run of calls opens it once). Nothing on that stream names
// the call a request belongs to, and the 2026-07-28 client can only be
// asked within a call (mrtr). The session is the principal's, and the
// owner can be told only when one call holds the stream: a request
// arriving there then joins that call's own stream (sharedHold.merge), as
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
// for a while (listen.Hub.NoStream).

// sharedLinger is how long a shared upstream session's GET stream stays
// open after the last call that held it.
const sharedLinger = 30 * time.Second

// sharedStream is the GET stream of one shared upstream session.
type sharedStream struct {
	holders int                      // calls holding it; under Server.sharedMu
	calls   map[*sharedHold]struct{} // those holders; under Server.sharedMu
	ready   chan struct{}            // closed once the upstream answered the GET
	cancel  context.CancelFunc
	linger  *time.Timer // closes the stream once unheld; nil while held
}

// A sharedHold is one call's hold on a shared upstream session's GET
// stream: requests of the stream's that belong to the call come on inbox.
// The zero hold (no stream held) has none.
type sharedHold struct {
	inbox   chan []byte
	release func() // gives the hold back; once
}

// sharedInbox bounds the stream's requests handed to one call and not yet
// read; past it, one more is refused to the upstream.
const sharedInbox = 4

// noHold is the hold of a call that holds no stream.
var noHold = &sharedHold{release: func() {}}

// holdShared holds the GET stream of upstream session us with up (opening
// it if need be) for a call of the 2026-07-28 request rq, and waits until
// the upstream answered its request (at most listen.OpenWait) or ctx ends. The
// call gives the hold back (release) once it is over.
func (rq *Request) holdShared(ctx context.Context, up *upstreamRef, us session.Upstream) *sharedHold {
	h := rq.h
	if us.SessionID == "" || upstream.IsModern(us) || !up.client.PerSession() {
		return noHold
	}
	if h.listen.NoStream(up.cfg.Name) {
		return noHold
	}
	key := up.cfg.Name + "\x00" + us.SessionID
	h.sharedMu.Lock()
	s := h.shared[key]
	if s == nil {
		principal, tenant := PrincipalKey(rq), rq.principal.Tenant
		if !h.listen.Take(principal, tenant, &rq.st.cfg.Limits) {
			h.sharedMu.Unlock()
			return noHold
		}
		sctx, cancel := context.WithCancel(context.WithoutCancel(rq.withCaller(ctx)))
		s = &sharedStream{ready: make(chan struct{}), cancel: cancel, calls: map[*sharedHold]struct{}{}}
		started := h.own.Go(func(owned context.Context) {
			defer h.listen.Give(principal, tenant)
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
			h.listen.Give(principal, tenant)
			h.sharedMu.Unlock()
			return noHold
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
	hold := &sharedHold{inbox: make(chan []byte, sharedInbox)}
	s.calls[hold] = struct{}{}
	hold.release = sync.OnceFunc(func() {
		h.sharedMu.Lock()
		defer h.sharedMu.Unlock()
		delete(s.calls, hold)
		// What was handed to the call and not read, nobody will answer:
		// the upstream hears so at once.
		refuseUnread(rq.withCaller(ctx), h, up, us, hold.inbox)
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
	})
	h.sharedMu.Unlock()
	listen.AwaitOpen(ctx, s.ready)
	return hold
}

// refuseUnread refuses to the upstream the requests left in inbox. The
// replies are posted in the background, bounded in time, so that the
// caller (who holds Server.sharedMu) does not wait for the upstream.
func refuseUnread(ctx context.Context, h *Server, up *upstreamRef, us session.Upstream, inbox chan []byte) {
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
	h.own.Go(func(owned context.Context) {
		ctx, cancel := context.WithTimeout(ctx, terminateTimeout)
		defer cancel()
		defer context.AfterFunc(owned, cancel)()
		for _, id := range ids {
			_ = up.client.Reply(ctx, us, id, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the call this request belonged to has ended"))
		}
	})
}

// handOff gives a request of s's stream to the one call holding s, and
// reports whether it did: not when several calls hold it, or none, or the
// call's inbox is full.
func (h *Server) handOff(s *sharedStream, raw []byte) bool {
	h.sharedMu.Lock()
	defer h.sharedMu.Unlock()
	if len(s.calls) != 1 {
		return false
	}
	for c := range s.calls {
		select {
		case c.inbox <- bytes.Clone(raw):
			return true
		default:
		}
	}
	return false
}

// merge returns the call's upstream response resp joined with the
// requests handed to the call from the GET stream: what either carries,
// in the order it comes. One goroutine reads resp; Close ends it, waits
// for it, and gives the hold back.
func (hold *sharedHold) merge(resp *tracedResponse) *mergedResponse {
	m := &mergedResponse{tracedResponse: resp, hold: hold, next: make(chan nextMessage), stop: make(chan struct{})}
	m.wg.Go(func() {
		for {
			msg, raw, err := resp.Next()
			select {
			case m.next <- nextMessage{msg, raw, err}:
			case <-m.stop:
				return
			}
			if err != nil {
				return
			}
		}
	})
	return m
}

// A mergedResponse is a call's response joined with its hold's inbox.
type mergedResponse struct {
	*tracedResponse
	hold *sharedHold
	next chan nextMessage
	stop chan struct{}
	end  *nextMessage // the response's end, once read
	wg   sync.WaitGroup
	once sync.Once
}

type nextMessage struct {
	msg *jsonrpc.Message
	raw []byte
	err error
}

// Next returns the next message of the response or of the inbox. Calls
// of Next do not overlap.
func (m *mergedResponse) Next() (*jsonrpc.Message, []byte, error) {
	for {
		if m.end != nil {
			return m.end.msg, m.end.raw, m.end.err
		}
		select {
		case n := <-m.next:
			if n.err != nil {
				m.end = &n
			}
			return n.msg, n.raw, n.err
		case raw := <-m.hold.inbox:
			if msg, err := jsonrpc.Decode(raw); err == nil {
				return msg, raw, nil
			}
		}
	}
}

// Close closes the response, waits for its reader, and gives the hold
// back.
func (m *mergedResponse) Close() error {
	var err error
	m.once.Do(func() {
		close(m.stop)
		err = m.Response.Close()
		m.wg.Wait()
		m.finish(m.tracedResponse.err)
		m.hold.release()
	})
	return err
}

// serveShared opens the GET stream of shared upstream session us, closes
// s.ready once the upstream answered, and serves what arrives (see above)
// until ctx ends or the stream does.
func (h *Server) serveShared(ctx context.Context, up *upstreamRef, us session.Upstream, s *sharedStream) {
	st, err := up.client.Watch(ctx, us)
	close(s.ready)
	if err != nil {
		if errors.Is(err, upstream.ErrNoStream) {
			h.listen.MarkNoStream(up.cfg.Name)
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
		case h.handOff(s, raw):
			continue
		default:
			e = jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s outside a call cannot reach a 2026-07-28 client: the gateway cannot tell which call it belongs to; ask within the call", msg.Method)
		}
		if err := up.client.Reply(context.WithoutCancel(ctx), us, msg.ID, result, e); err != nil {
			h.log.Debug("answering a request on a shared upstream stream", "upstream", up.cfg.Name, "error", err)
		}
	}
}
