package dispatch

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
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
// A URI is agreed (named in the acknowledgment) when the tenant may see it
// and its upstream, speaking a session-based revision and offering
// resources.subscribe, accepted the subscription; the rest are left out, as
// the revision says of what a server does not support. Updates reach the
// stream with the URI in the gateway's namespace. 2026-07-28 upstreams are
// not subscribed to this way (their own subscriptions/listen would be),
// and their URIs are not agreed.

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
	out := make(chan []byte, listenQueue)
	// Each upstream's URIs, by their upstream's own URI.
	byUp := map[*upstreamRef]map[string]string{}
	seen := map[string]bool{}
	for _, uri := range uris {
		if seen[uri] || len(seen) >= maxListenResources {
			continue
		}
		seen[uri] = true
		up, orig, err := rq.resolveURI(ctx, catalog.Resources, uri)
		if err != nil || !rq.offersSubscribe(up) || !up.client.PerSession() {
			continue // hidden, unknown, or not to be subscribed to
		}
		if byUp[up] == nil {
			byUp[up] = map[string]string{}
		}
		byUp[up][orig] = uri
	}
	var mu sync.Mutex
	var wg, running sync.WaitGroup
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
				h.listenSlots.give(PrincipalKey(rq), rq.principal.Tenant)
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
	if !h.listenSlots.take(h, PrincipalKey(rq), rq.principal.Tenant, &rq.st.cfg.Limits) {
		return session.Upstream{}, false
	}
	res, err := up.client.OpenAs(ctx, rq.announced().upstreamCaps())
	if err != nil || upstream.IsModern(res.Session) {
		h.listenSlots.give(PrincipalKey(rq), rq.principal.Tenant)
		if err == nil {
			h.endSubscription(ctx, rq, up, res.Session)
		}
		return session.Upstream{}, false
	}
	n := 0
	for orig := range set {
		n++
		params, _ := json.Marshal(map[string]string{"uri": orig})
		resp, err := up.client.Call(ctx, res.Session, jsonrpc.StringID("sub."+strconv.Itoa(n)), "resources/subscribe", params)
		if err == nil {
			_, err = resultOf(resp.Next, nil)
			resp.Close()
		}
		if err != nil {
			h.log.Debug("subscribing for a 2026-07-28 listen", "upstream", up.cfg.Name, "error", err)
			h.listenSlots.give(PrincipalKey(rq), rq.principal.Tenant)
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
	defer h.listenSlots.give(PrincipalKey(rq), rq.principal.Tenant)
	defer h.endSubscription(ctx, rq, up, us)
	h.metrics.UpstreamStream(1)
	defer h.metrics.UpstreamStream(-1)
	var b backoff
	for ctx.Err() == nil {
		start := time.Now()
		h.updatesOnce(ctx, rq, up, us, set, out)
		if !b.wait(ctx, start) {
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
		if msg.Kind != jsonrpc.KindNotification || msg.Method != "notifications/resources/updated" {
			continue // log messages, requests: this session asked for none
		}
		p, err := jsonx.ParseValidObject(msg.Params)
		if err != nil {
			continue
		}
		orig, _ := p.GetString("uri")
		exposed, ok := set[orig]
		if !ok {
			continue
		}
		params, _ := json.Marshal(map[string]string{"uri": exposed})
		select {
		case out <- jsonrpc.AppendRequest(nil, jsonrpc.ID{}, msg.Method, params):
		default: // the client is not reading: an update queued already says as much
			h.metrics.LimitRejection(telemetry.LimitStreamQueue, rq.principal.Tenant)
		}
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

// ListenTasksError is the error of a subscriptions/listen that asks for
// task notifications (taskIds) without declaring the Tasks extension, which
// defines them (-32021, as for any of the extension's requests); nil when
// it declared it.
func (rq *Request) ListenTasksError() *CapabilityError {
	if rq.declaresTasks() {
		return nil
	}
	return &CapabilityError{Capability: "extensions", Sub: taskExtension}
}
