package dispatch

import (
	"context"
	"slices"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Resource subscriptions of session clients (2025-11-25 and older).
//
// A client subscribes with resources/subscribe on its own upstream
// session, and the upstream sends the updates on that session's GET
// stream, which may be open on another replica than the one that served
// the subscription. The session record keeps, per upstream session, the
// URIs the client subscribed to (session.Upstream.Subscribed), so that
// whichever replica hears an update checks it against them: an update of
// a resource the client did not subscribe to (nor a sub-resource of one)
// is not the session's, whatever the upstream says, and is dropped. The
// list is bounded (maxSubscribed URIs, maxSubscribedBytes bytes of them
// per upstream session); a subscription past it is refused before it
// reaches the upstream.

const (
	maxSubscribed      = 128
	maxSubscribedBytes = 8 << 10
)

// errTooManySubscriptions refuses a subscription past the bounds above.
var errTooManySubscriptions = jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
	"a session subscribes to at most %d resources of one upstream (%d bytes of URIs): unsubscribe from one first", maxSubscribed, maxSubscribedBytes)

// roomFor reports whether the session may subscribe to uri (up's own) of
// up: it holds it already, or there is room for it.
func (rq *Request) roomFor(up *upstreamRef, uri string) bool {
	us, _ := rq.upstreamEntry(up.cfg.Name)
	return fits(us.Subscribed, uri)
}

// fits reports whether subs holds uri or has room for it.
func fits(subs []string, uri string) bool {
	if slices.Contains(subs, uri) {
		return true
	}
	n := len(uri)
	for _, s := range subs {
		n += len(s)
	}
	return len(subs) < maxSubscribed && n <= maxSubscribedBytes
}

// holds reports whether an update of uri (up's own) belongs to one of the
// session's subscriptions with up, by the record rq holds.
func (rq *Request) holds(up *upstreamRef, uri string) bool {
	us, _ := rq.upstreamEntry(up.cfg.Name)
	return covered(us.Subscribed, uri)
}

// covered reports whether an update of uri belongs to one of subs.
func covered(subs []string, uri string) bool {
	for _, s := range subs {
		if protocol.UpdateCovers(s, uri) {
			return true
		}
	}
	return false
}

// noteSubscription records in the session record that the client
// subscribed to (on) or unsubscribed from (!on) uri, up's own, on its
// upstream session with up, once the upstream accepted it; a subscription
// also marks the upstream session as having something to say (Listen). The
// replica holding the client's GET stream is woken to read the record
// again. Requests of one session may change the list concurrently, and
// the store compares only the upstream session id: the list is read
// fresh, and the change checked and made again if another overwrote it.
// A failure is logged: the client then hears nothing of uri.
func (rq *Request) noteSubscription(ctx context.Context, up *upstreamRef, uri string, on bool) {
	if rq.adm.Stateless || rq.Session == nil {
		return
	}
	h, name := rq.h, up.cfg.Name
	cur, _ := rq.upstreamEntry(name)
	used := cur.SessionID // the session the upstream answered on
	ctx = context.WithoutCancel(ctx)
	for range 3 {
		rec, err := h.store.Get(ctx, rq.Session.ID)
		if err != nil {
			h.log.Debug("subscriptions: reading the session record", "error", err)
			return
		}
		us, ok := rec.Upstreams[name]
		// A 2026-07-28 upstream has no session: the entry holds the
		// session's subscriptions of it.
		if !ok || !upstream.IsModern(us) && (us.SessionID == "" || us.SessionID != used) {
			return // replaced meanwhile: the new upstream session holds no subscription
		}
		if slices.Contains(us.Subscribed, uri) == on && (us.Listen || !on) {
			rq.setUpstream(name, us)
			return
		}
		next := us
		if on {
			if !fits(us.Subscribed, uri) {
				h.log.Debug("subscriptions: a concurrent subscription took the room", "upstream", name)
				return
			}
			next.Listen = true
			next.Subscribed = append(slices.Clip(us.Subscribed), uri)
		} else {
			next.Subscribed = slices.DeleteFunc(slices.Clone(us.Subscribed), func(s string) bool { return s == uri })
		}
		cur, err := h.store.SetUpstream(ctx, rq.Session.ID, name, us.SessionID, next)
		if err != nil {
			h.log.Debug("subscriptions: recording", "upstream", name, "error", err)
			return
		}
		rq.setUpstream(name, cur)
		if err := h.listen.Wake(ctx, rq.Session.ID); err != nil {
			h.log.Debug("subscriptions: waking the session's stream", "error", err)
		}
		// Another request of the session may have written its own list
		// over this one since it was read: check.
		if rec, err := h.store.Get(ctx, rq.Session.ID); err != nil || slices.Contains(rec.Upstreams[name].Subscribed, uri) == on {
			return
		}
	}
}
