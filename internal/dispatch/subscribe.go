package dispatch

import (
	"context"

	"github.com/mcpgw/gateway/internal/bridge"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/listen"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
)

// Resource subscriptions of 2026-07-28 callers are kept by
// internal/listen (Hub.Subscribe); here they are resolved in the tenant's
// namespace, under its rules.

// maxListenResources bounds the resources one subscriptions/listen may
// subscribe to; the rest are not agreed. With limits.streams_per_principal
// it bounds the upstream subscriptions one principal holds on a replica.
const maxListenResources = 64

// SubscribeResources subscribes, for the 2026-07-28 request rq, to the
// resources uris name (exposed URIs), and returns the ones agreed, the
// channel their updates come on, as notifications/resources/updated with
// the exposed URI, and stop, which ends the upstream subscriptions and
// waits. ctx is the listen stream's. A URI the tenant (or the principal's
// policy rules) may not see, or whose upstream offers no subscriptions,
// is not agreed.
func (h *Server) SubscribeResources(ctx context.Context, rq *Request, uris []string) (agreed []string, msgs <-chan []byte, stop func()) {
	ctx = rq.withCaller(ctx)
	byUp := map[*upstreamRef]*listen.Target{}
	var targets []*listen.Target
	seen, opened := map[string]bool{}, map[*upstreamRef]bool{}
	c := &call{method: protocol.MethodSubscriptionsListen, m: &Method{}}
	for _, uri := range uris {
		if seen[uri] || len(seen) >= maxListenResources {
			continue
		}
		seen[uri] = true
		up, orig, err := rq.resolveURI(ctx, catalog.Resources, uri)
		if err == nil {
			err = rq.decidePolicy(ctx, c, policy.PhaseList, catalog.Resources, up, uri, orig, nil, false)
		}
		if err == nil && !opened[up] {
			// The upstream's revision and capabilities, known once the
			// principal's session with it is.
			opened[up] = true
			_, err = rq.upstreamSession(ctx, up)
		}
		var modern bool
		switch {
		case err != nil:
			continue // hidden, unknown or unreachable
		case rq.modern(up) && rq.subscribable(up):
			modern = true
		case rq.offersSubscribe(up) && up.client.PerSession():
		default:
			continue // not to be subscribed to
		}
		t := byUp[up]
		if t == nil {
			t = &listen.Target{Up: listenUpstream(up), Modern: modern, URIs: map[string]string{}}
			byUp[up] = t
			targets = append(targets, t)
		}
		t.URIs[orig] = uri
	}
	ts := make([]listen.Target, len(targets))
	for i, t := range targets {
		ts[i] = *t
	}
	return h.listen.Subscribe(ctx, listenSubscriber{rq}, listen.Client{
		Who:    &bridge.Caller{Principal: PrincipalKey(rq), Tenant: rq.principal.Tenant},
		Limits: &rq.st.cfg.Limits,
	}, ts)
}

// listenSubscriber is a 2026-07-28 listen request rq, to internal/listen.
type listenSubscriber struct{ rq *Request }

func (s listenSubscriber) Open(ctx context.Context, up listen.Upstream) (session.Upstream, error) {
	res, err := up.Client.OpenAs(ctx, s.rq.announced().upstreamCaps())
	if err != nil {
		return session.Upstream{}, err
	}
	return res.Session, nil
}

func (s listenSubscriber) Session(ctx context.Context, up listen.Upstream) (session.Upstream, error) {
	return s.rq.upstreamSession(ctx, up.Ref.(*upstreamRef))
}
