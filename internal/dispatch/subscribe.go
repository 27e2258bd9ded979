package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/listen"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Resource subscriptions of 2026-07-28 callers.
//
// A 2026-07-28 client subscribes to resources in its subscriptions/listen
// request (resourceSubscriptions, basic/patterns/subscriptions): the
// stream it opens is the subscription, and closing it ends it. Upstreams
// of the session-based revisions keep subscriptions per upstream session
// (resources/subscribe) and send the updates on that session's GET stream,
// so each listen stream gets upstream sessions of its own, one per
// upstream its URIs belong to, opened with the caller's identity and
// capabilities, subscribed to those URIs, and listened to until the
// client's stream closes; then they are ended. Another stream's, or
// another principal's, subscriptions never share them.
//
// A 2026-07-28 upstream is subscribed to its own way: a
// subscriptions/listen of its own per listen stream, opened as the caller,
// with the stream's URIs of that upstream in its resourceSubscriptions,
// and its acknowledgment says which it agreed to.
//
// A URI is agreed (named in the acknowledgment) when the tenant may see it
// and its upstream, offering resources.subscribe, accepted the
// subscription; the rest are left out, as the revision says of what a
// server does not support. Updates reach the stream with the URI in the
// gateway's namespace, and only for URIs agreed.

// maxListenResources bounds the resources one subscriptions/listen may
// subscribe to; the rest are not agreed. With limits.streams_per_principal
// it bounds the upstream subscriptions one principal holds on a replica.
const maxListenResources = 64

// SubscribeResources subscribes, for the 2026-07-28 request rq, to the
// resources uris name (exposed URIs), and returns the ones agreed, the
// channel their updates come on, as notifications/resources/updated with
// the exposed URI, and stop, which ends the upstream subscriptions and
// waits. ctx is the listen stream's.
func (h *Server) SubscribeResources(ctx context.Context, rq *Request, uris []string) (agreed []string, msgs <-chan []byte, stop func()) {
	ctx, cancel := context.WithCancel(rq.withCaller(ctx))
	out := make(chan []byte, listen.Queue)
	// Each upstream's URIs, by their upstream's own URI.
	byUp := map[*upstreamRef]map[string]string{}
	byModern := map[*upstreamRef]map[string]string{}
	seen, opened := map[string]bool{}, map[*upstreamRef]bool{}
	for _, uri := range uris {
		if seen[uri] || len(seen) >= maxListenResources {
			continue
		}
		seen[uri] = true
		up, orig, err := rq.resolveURI(ctx, catalog.Resources, uri)
		if err == nil && !opened[up] {
			// The upstream's revision and capabilities, known once the
			// principal's session with it is.
			opened[up] = true
			_, err = rq.upstreamSession(ctx, up)
		}
		var to map[*upstreamRef]map[string]string
		switch {
		case err != nil:
			continue // hidden, unknown or unreachable
		case rq.modern(up) && rq.subscribable(up):
			to = byModern
		case rq.offersSubscribe(up) && up.client.PerSession():
			to = byUp
		default:
			continue // not to be subscribed to
		}
		if to[up] == nil {
			to[up] = map[string]string{}
		}
		to[up][orig] = uri
	}
	var mu sync.Mutex
	var wg, running sync.WaitGroup
	for up, set := range byModern {
		wg.Go(func() {
			st, set, ok := h.listenOn(ctx, rq, up, set)
			if !ok {
				return
			}
			mu.Lock()
			for _, uri := range set {
				agreed = append(agreed, uri)
			}
			mu.Unlock()
			running.Add(1)
			if !h.own.Go(func(owned context.Context) {
				defer running.Done()
				defer context.AfterFunc(owned, cancel)()
				h.relayModernUpdates(ctx, rq, up, st, set, out)
			}) {
				running.Done()
				st.Close()
				h.listen.Give(PrincipalKey(rq), rq.principal.Tenant)
			}
		})
	}
	for up, set := range byUp {
		wg.Go(func() {
			us, ok := h.subscribeOn(ctx, rq, up, set)
			if !ok {
				return
			}
			mu.Lock()
			for _, uri := range set {
				agreed = append(agreed, uri)
			}
			mu.Unlock()
			running.Add(1)
			if !h.own.Go(func(owned context.Context) {
				defer running.Done()
				defer context.AfterFunc(owned, cancel)()
				h.relayUpdates(ctx, rq, up, us, set, out)
			}) {
				running.Done()
				h.listen.Give(PrincipalKey(rq), rq.principal.Tenant)
				h.endSubscription(ctx, rq, up, us)
			}
		})
	}
	wg.Wait()
	return agreed, out, func() {
		cancel()
		running.Wait()
	}
}

// subscribeOn opens an upstream session of the caller's with up and
// subscribes it to the URIs of set (the upstream's own). It reports false,
// having ended the session, if the upstream refused any, or could not be
// reached, or the replica holds as many upstream streams as it may.
func (h *Server) subscribeOn(ctx context.Context, rq *Request, up *upstreamRef, set map[string]string) (session.Upstream, bool) {
	if !h.listen.Take(PrincipalKey(rq), rq.principal.Tenant, &rq.st.cfg.Limits) {
		return session.Upstream{}, false
	}
	res, err := up.client.OpenAs(ctx, rq.announced().upstreamCaps())
	if err != nil || upstream.IsModern(res.Session) {
		h.listen.Give(PrincipalKey(rq), rq.principal.Tenant)
		if err == nil {
			h.endSubscription(ctx, rq, up, res.Session)
		}
		return session.Upstream{}, false
	}
	n := 0
	for orig := range set {
		n++
		params, _ := json.Marshal(map[string]string{"uri": orig})
		resp, err := up.client.Call(ctx, res.Session, jsonrpc.StringID("sub."+strconv.Itoa(n)), protocol.MethodResourcesSubscribe, params)
		if err == nil {
			_, err = resultOf(resp.Next, nil)
			resp.Close()
		}
		if err != nil {
			h.log.Debug("subscribing for a 2026-07-28 listen", "upstream", up.cfg.Name, "error", err)
			h.listen.Give(PrincipalKey(rq), rq.principal.Tenant)
			h.endSubscription(ctx, rq, up, res.Session)
			return session.Upstream{}, false
		}
	}
	return res.Session, true
}

// relayUpdates relays the resources/updated notifications of upstream
// session us for the URIs of set to out, until ctx ends, then ends us.
// The stream is opened again, with backoff, if it breaks (updatesOnce).
func (h *Server) relayUpdates(ctx context.Context, rq *Request, up *upstreamRef, us session.Upstream, set map[string]string, out chan<- []byte) {
	defer h.listen.Give(PrincipalKey(rq), rq.principal.Tenant)
	defer h.endSubscription(ctx, rq, up, us)
	h.metrics.UpstreamStream(1)
	defer h.metrics.UpstreamStream(-1)
	var b upstream.Backoff
	for ctx.Err() == nil {
		start := time.Now()
		h.updatesOnce(ctx, rq, up, us, set, out)
		if !b.Wait(ctx, start) {
			return
		}
	}
}

// updatesOnce opens the stream of upstream session us and relays the
// resources/updated notifications of the URIs of set (the upstream's own
// URI to the exposed one) to out, until the stream ends.
func (h *Server) updatesOnce(ctx context.Context, rq *Request, up *upstreamRef, us session.Upstream, set map[string]string, out chan<- []byte) {
	st, err := up.client.Watch(ctx, us)
	if err != nil {
		return
	}
	defer st.Close()
	defer context.AfterFunc(ctx, func() { st.Close() })()
	for {
		msg, _, err := st.Next()
		if err != nil {
			return
		}
		if msg.Kind != jsonrpc.KindNotification || msg.Method != protocol.NotifyResourceUpdated {
			continue // log messages, requests: this session asked for none
		}
		h.forwardUpdate(rq, msg, set, out)
	}
}

// listenOn opens, for the 2026-07-28 request rq, a subscriptions/listen of
// 2026-07-28 upstream up with the URIs of set (the upstream's own to the
// exposed ones) and waits for its acknowledgment, at most listen.OpenWait. It
// returns the stream and the URIs the upstream agreed to, or false, having
// closed the stream, if it agreed to none, could not be reached, or the
// replica holds as many upstream streams as it may. The stream holds one
// of them until relayModernUpdates ends.
func (h *Server) listenOn(ctx context.Context, rq *Request, up *upstreamRef, set map[string]string) (*upstream.Stream, map[string]string, bool) {
	if !h.listen.Take(PrincipalKey(rq), rq.principal.Tenant, &rq.st.cfg.Limits) {
		return nil, nil, false
	}
	st, agreed, err := h.listenOnce(ctx, rq, up, set)
	if err != nil {
		h.log.Debug("subscribing a 2026-07-28 upstream for a listen", "upstream", up.cfg.Name, "error", err)
		h.listen.Give(PrincipalKey(rq), rq.principal.Tenant)
		return nil, nil, false
	}
	return st, agreed, true
}

// listenOnce opens up's subscriptions/listen for the URIs of set and
// reads its acknowledgment: the subset of set it agreed to.
func (h *Server) listenOnce(ctx context.Context, rq *Request, up *upstreamRef, set map[string]string) (*upstream.Stream, map[string]string, error) {
	us, err := rq.upstreamSession(ctx, up)
	if err != nil {
		return nil, nil, err
	}
	origs := slices.Sorted(maps.Keys(set))
	filter, _ := json.Marshal(map[string][]string{"resourceSubscriptions": origs})
	st, err := up.client.Listen(ctx, us, filter)
	if err != nil {
		return nil, nil, err
	}
	// The acknowledgment is the stream's first message: a stream that
	// sends none within listen.OpenWait is given up.
	wait, cancel := context.WithTimeout(ctx, listen.OpenWait)
	defer cancel()
	stop := context.AfterFunc(wait, func() { st.Close() })
	msg, _, err := st.Next()
	if !stop() {
		err = errors.Join(err, errors.New("no acknowledgment in time"))
	}
	if err == nil && (msg.Kind != jsonrpc.KindNotification || msg.Method != protocol.NotifySubscriptionsAcknowledged) {
		err = fmt.Errorf("the stream began with %s, not its acknowledgment", msg.Method)
	}
	var agreed map[string]string
	if err == nil {
		var p struct {
			Notifications struct {
				ResourceSubscriptions []string `json:"resourceSubscriptions"`
			} `json:"notifications"`
		}
		if json.Unmarshal(msg.Params, &p) != nil {
			err = errors.New("a malformed acknowledgment")
		}
		for _, orig := range p.Notifications.ResourceSubscriptions {
			if exposed, ok := set[orig]; ok {
				if agreed == nil {
					agreed = map[string]string{}
				}
				agreed[orig] = exposed
			}
		}
		if err == nil && len(agreed) == 0 {
			err = errors.New("no resource agreed")
		}
	}
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, agreed, nil
}

// relayModernUpdates relays the resources/updated notifications of
// 2026-07-28 upstream up's listen stream st for the URIs of set to out,
// until ctx ends; the stream is opened again, with backoff, if it breaks,
// for the same URIs, of which the upstream may then agree to fewer.
func (h *Server) relayModernUpdates(ctx context.Context, rq *Request, up *upstreamRef, st *upstream.Stream, set map[string]string, out chan<- []byte) {
	defer h.listen.Give(PrincipalKey(rq), rq.principal.Tenant)
	h.metrics.UpstreamStream(1)
	defer h.metrics.UpstreamStream(-1)
	agreed := set
	var b upstream.Backoff
	for {
		start := time.Now()
		if st != nil {
			h.modernUpdatesOnce(ctx, rq, st, agreed, out)
			st.Close()
			st = nil
		}
		if !b.Wait(ctx, start) {
			return
		}
		var err error
		if st, agreed, err = h.listenOnce(ctx, rq, up, set); err != nil {
			h.log.Debug("re-subscribing a 2026-07-28 upstream for a listen", "upstream", up.cfg.Name, "error", err)
		}
	}
}

// modernUpdatesOnce relays the updates of st for the URIs of set (the
// upstream's own URI to the exposed one) to out, until the stream or ctx
// ends.
func (h *Server) modernUpdatesOnce(ctx context.Context, rq *Request, st *upstream.Stream, set map[string]string, out chan<- []byte) {
	defer context.AfterFunc(ctx, func() { st.Close() })()
	for {
		msg, _, err := st.Next()
		if err != nil {
			return
		}
		if msg.Kind != jsonrpc.KindNotification || msg.Method != protocol.NotifyResourceUpdated {
			continue // nothing else was asked for
		}
		h.forwardUpdate(rq, msg, set, out)
	}
}

// forwardUpdate queues an update of a subscribed resource for a listen
// stream: its URI (the upstream's own) exposed by set, dropped if set has
// none for it, or if the client is not reading.
func (h *Server) forwardUpdate(rq *Request, msg *jsonrpc.Message, set map[string]string, out chan<- []byte) {
	p, err := jsonx.ParseValidObject(msg.Params)
	if err != nil {
		return
	}
	orig, _ := p.GetString("uri")
	exposed, ok := set[orig]
	if !ok {
		return
	}
	params, _ := json.Marshal(map[string]string{"uri": exposed})
	select {
	case out <- jsonrpc.AppendRequest(nil, jsonrpc.ID{}, msg.Method, params):
	default: // the client is not reading: an update queued already says as much
		h.metrics.LimitRejection(telemetry.LimitStreamQueue, rq.principal.Tenant)
	}
}

// endSubscription ends upstream session us, bounded in time whatever
// happened to ctx.
func (h *Server) endSubscription(ctx context.Context, rq *Request, up *upstreamRef, us session.Upstream) {
	if us.SessionID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rq.withCaller(ctx)), terminateTimeout)
	defer cancel()
	_ = up.client.Terminate(ctx, us)
}
