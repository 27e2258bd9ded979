package dispatch

import (
	"context"
	"encoding/json"

	"github.com/mcpgw/gateway/internal/bridge"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/listen"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/subscribe"
)

// Resource subscriptions are internal/subscribe's; here is what it needs
// of a request (subscriber), and the methods that reach it.

// uriCall serves resources/subscribe and resources/unsubscribe (see
// subscribe.Keeper.Serve).
func uriCall(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
	p, uri, err := routedParams(c.params, "uri")
	if err != nil {
		return nil, err
	}
	return rq.h.subs.Serve(ctx, subscriber{rq, c, p}, uri, c.method == protocol.MethodResourcesSubscribe)
}

// SubscribeResources subscribes, for the 2026-07-28 request rq, to the
// resources uris name (exposed URIs), and returns the ones agreed, the
// channel their updates come on, as notifications/resources/updated with
// the exposed URI, and stop, which ends the upstream subscriptions and
// waits. ctx is the listen stream's. A URI the tenant (or the principal's
// policy rules) may not see, or whose upstream offers no subscriptions,
// is not agreed (see subscribe.Targets).
func (h *Server) SubscribeResources(ctx context.Context, rq *Request, uris []string) (agreed []string, msgs <-chan []byte, stop func()) {
	ctx = rq.withCaller(ctx)
	c := &call{method: protocol.MethodSubscriptionsListen, m: &Method{}}
	return h.listen.Subscribe(ctx, listenSubscriber{rq}, listen.Client{
		Who:    &bridge.Caller{Principal: PrincipalKey(rq), Tenant: rq.principal.Tenant},
		Limits: &rq.st.Cfg.Limits,
	}, subscribe.Targets(ctx, subscriber{rq: rq, c: c}, uris))
}

// holds reports whether an update of uri (up's own) belongs to one of the
// session's subscriptions with up, by the record rq holds.
func (rq *Request) holds(up *upstreamRef, uri string) bool {
	us, _ := rq.held.Entry(rq.Session, up.Cfg.Name)
	return subscribe.Covers(us.Subscribed, uri)
}

// subscriber is request rq's call c, to internal/subscribe: p are the
// params of a resources/subscribe or resources/unsubscribe (nil for a
// subscriptions/listen).
type subscriber struct {
	rq *Request
	c  *call
	p  *jsonx.Object
}

func (s subscriber) Resolve(ctx context.Context, uri string) (subscribe.Upstream, string, error) {
	up, orig, err := s.rq.resolveURI(ctx, catalog.Resources, uri)
	if err == nil {
		err = s.rq.decidePolicy(ctx, s.c, policy.PhaseList, catalog.Resources, up, uri, orig, nil, false)
	}
	if err != nil {
		return subscribe.Upstream{}, "", err
	}
	return listenUpstream(up), orig, nil
}

func (s subscriber) Open(ctx context.Context, up subscribe.Upstream) error {
	_, err := s.rq.hop(up.Ref.(*upstreamRef)).Session(ctx)
	return err
}

func (s subscriber) Known(up subscribe.Upstream) subscribe.Known {
	ref := up.Ref.(*upstreamRef)
	return subscribe.Known{Caps: s.rq.caps(ref), Modern: s.rq.modern(ref), PerSession: ref.Client.PerSession()}
}

func (s subscriber) SessionID() string {
	if s.rq.adm.Stateless || s.rq.Session == nil {
		return ""
	}
	return s.rq.Session.ID
}

func (s subscriber) Entry(name string) (session.Upstream, bool) {
	return s.rq.held.Entry(s.rq.Session, name)
}

func (s subscriber) SetEntry(name string, us session.Upstream) { s.rq.held.Set(s.rq.Session, name, us) }

func (s subscriber) Relay(ctx context.Context, up subscribe.Upstream, uri string) (json.RawMessage, error) {
	s.p.SetString("uri", uri)
	return s.rq.relay(ctx, s.c, up.Ref.(*upstreamRef), jsonrpc.RawParams(s.p.Bytes()), nil)
}

// listenSubscriber is a 2026-07-28 listen request rq, to internal/listen.
type listenSubscriber struct{ rq *Request }

func (s listenSubscriber) Open(ctx context.Context, up listen.Upstream) (session.Upstream, error) {
	res, err := up.Client.OpenAs(ctx, s.rq.announced().Caps())
	if err != nil {
		return session.Upstream{}, err
	}
	return res.Session, nil
}

func (s listenSubscriber) Session(ctx context.Context, up listen.Upstream) (session.Upstream, error) {
	return s.rq.hop(up.Ref.(*upstreamRef)).Session(ctx)
}
