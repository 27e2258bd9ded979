package dispatch

import (
	"context"

	"github.com/mcpgw/gateway/internal/bridge"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/listen"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Messages outside a request are relayed by internal/listen; here is what
// it needs of a session (listenSession), and the POST side that gives a
// session something to hear (markListen).

// NotifySession sends msg, a JSON-RPC message the gateway originates, to
// session sessionID's GET stream, on whichever replica holds it (see
// listen.Hub.Notify).
func (h *Server) NotifySession(ctx context.Context, sessionID string, msg []byte) error {
	return h.listen.Notify(ctx, sessionID, msg)
}

// Listen starts relaying to a session's GET stream what reaches it
// outside any request (see listen.Hub.Listen); ctx is the GET request's,
// and rq.Session must be set.
func (h *Server) Listen(ctx context.Context, rq *Request) (msgs <-chan []byte, shape func([]byte) []byte, stop func()) {
	return h.listen.Listen(rq.withCaller(ctx), listenSession{rq}, listen.Client{
		SessionID: rq.Session.ID,
		Who:       rq.caller(),
		Roots:     h.capNames.Names(rq.Session.ClientCapabilities)["roots"],
		Limits:    &rq.st.Cfg.Limits,
	})
}

func listenUpstream(up *upstreamRef) listen.Upstream {
	return listen.Upstream{Name: up.Cfg.Name, Client: up.Client, Stdio: up.Cfg.IsStdio(), Watched: up.Watched(), Ref: up}
}

// listenSession is the session of a GET stream's request rq, to
// internal/listen.
type listenSession struct{ rq *Request }

func (s listenSession) Upstreams() []listen.Upstream {
	refs := s.rq.upstreams()
	ups := make([]listen.Upstream, len(refs))
	for i, up := range refs {
		ups[i] = listenUpstream(up)
	}
	return ups
}

func (s listenSession) Current(name string) (listen.Upstream, bool) {
	st := s.rq.h.Current()
	v, err := st.Tenants().Get(s.rq.principal.Tenant)
	if err != nil || !v.Allows(name) || st.ByName[name] == nil {
		return listen.Upstream{}, false
	}
	return listenUpstream(st.ByName[name]), true
}

func (s listenSession) Version() any { return s.rq.h.Current() }

func (s listenSession) Entry(name string) (session.Upstream, bool) {
	return s.rq.held.Entry(s.rq.Session, name)
}

func (s listenSession) Reload(ctx context.Context) {
	rec, err := s.rq.h.store.Get(ctx, s.rq.Session.ID)
	if err != nil {
		if ctx.Err() == nil {
			s.rq.h.log.Debug("listen: reading the session record", "error", err)
		}
		return
	}
	s.rq.held.Replace(s.rq.Session, rec.Upstreams)
}

func (s listenSession) Reopen(ctx context.Context, up listen.Upstream, expired string) error {
	_, err := s.rq.hop(up.Ref.(*upstreamRef)).Open(ctx, expired)
	return err
}

func (s listenSession) Holds(up listen.Upstream, uri string) bool {
	return s.rq.holds(up.Ref.(*upstreamRef), uri)
}

func (s listenSession) Updated(ctx context.Context, up listen.Upstream, msg *jsonrpc.Message, held func(string) bool) []byte {
	// Checked against the tenant's rules in force.
	v, err := s.rq.h.Current().Tenants().Get(s.rq.principal.Tenant)
	if err != nil {
		return nil
	}
	return s.rq.exposeUpdated(ctx, v, up.Ref.(*upstreamRef), msg, held)
}

func (s listenSession) Note(ctx context.Context, up listen.Upstream, us session.Upstream, msg *jsonrpc.Message, raw []byte) []byte {
	return s.rq.h.tasks.Note(ctx, s.rq.taskCaller(), up.Name, us, msg, raw)
}

func (s listenSession) Request(ctx context.Context, up listen.Upstream, us session.Upstream, msg *jsonrpc.Message, out bridge.Out) {
	rq := s.rq
	rq.h.tasks.UpstreamRequest(ctx, rq.taskCaller(), up.Name, us, msg)
	rq.h.bridge.UpstreamRequest(ctx, rq.caller(), out, up.Client, us, msg)
}

func (s listenSession) Stale(up listen.Upstream, k catalog.Kind) { s.rq.h.catalog.Stale(up.Name, k) }

// markListen records that the session has something to hear from its
// upstream session with up (it subscribed to a resource, or set a log
// level there), and wakes the replica holding its GET stream, the first
// time. A failure is logged: the client then hears nothing, as before.
func (rq *Request) markListen(ctx context.Context, up *upstreamRef) {
	if rq.adm.Stateless || rq.Session == nil {
		return
	}
	us, ok := rq.held.Entry(rq.Session, up.Cfg.Name)
	if !ok || us.Listen || us.SessionID == "" || upstream.IsModern(us) {
		return
	}
	h := rq.h
	us.Listen = true
	cur, err := h.store.SetUpstream(context.WithoutCancel(ctx), rq.Session.ID, up.Cfg.Name, us.SessionID, us)
	if err != nil {
		// A conflict: the upstream session was replaced meanwhile, and the
		// new one has not heard this subscription.
		h.log.Debug("listen: marking the upstream session", "upstream", up.Cfg.Name, "error", err)
		return
	}
	rq.held.Set(rq.Session, up.Cfg.Name, cur)
	if err := h.listen.Wake(context.WithoutCancel(ctx), rq.Session.ID); err != nil {
		h.log.Debug("listen: waking the session's stream", "error", err)
	}
}
