package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpgw/gateway/internal/announce"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/rpcerr"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// CreateError is a session store's refusal to create a session record:
// at a cap (a *session.LimitError, session.ErrFull) or unavailable.
type CreateError struct{ Err error }

func (e *CreateError) Error() string { return "creating session: " + e.Err.Error() }
func (e *CreateError) Unwrap() error { return e.Err }

// ErrStoreUnavailable is a session store that failed mid-way.
var ErrStoreUnavailable = errors.New("session store unavailable")

// Initialize serves initialize: it negotiates the version, stores the
// session, then opens the upstream sessions; the new record is rq.Session.
// A bad request is a *jsonrpc.Error, a store that refused to create the
// record a *CreateError, one that failed to complete it
// ErrStoreUnavailable.
//
// The record is created before any upstream is contacted: the store is
// where the per-principal, per-tenant and global caps on sessions are
// enforced, and a refused initialize must cost the upstreams nothing.
func (h *Server) Initialize(ctx context.Context, rq *Request, msg *jsonrpc.Message) (json.RawMessage, error) {
	ctx = rq.withCaller(ctx)
	lim := rq.st.Cfg.Limits
	in, tooBig, err := protocol.ParseInitialize(msg.Params, lim.ClientInfoBytes, lim.ClientCapabilitiesBytes)
	switch tooBig {
	case "clientInfo":
		h.LimitHit(ctx, rq, telemetry.LimitClientInfo, msg.Method)
	case "capabilities":
		h.LimitHit(ctx, rq, telemetry.LimitClientCapabilities, msg.Method)
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, rq.st.Cfg.Server.RequestTimeout.D())
	defer cancel()
	now := time.Now()
	rec := &session.Record{
		ID:                 session.NewID(),
		ProtocolVersion:    in.Version,
		ClientInfo:         in.ClientInfo,
		ClientCapabilities: in.Capabilities,
		Principal: session.Principal{
			Issuer: rq.principal.Issuer, Subject: rq.principal.Subject, Tenant: rq.principal.Tenant,
		},
		Created:  now,
		LastSeen: now,
	}
	if err := h.store.Create(ctx, rec); err != nil {
		return nil, &CreateError{Err: err}
	}
	ups := rq.upstreams()
	if err := h.opener.Complete(ctx, rec, h.initClients(ups), rq.h.announced.Of(in.Capabilities).Caps(), h.noteInit); err != nil {
		if rpcerr.ClientGone(ctx, err) {
			h.log.Debug("creating session: client gone", "error", err)
		} else {
			h.log.Error("creating session", "error", err)
		}
		h.catalog.EndSession(rec.ID)
		h.terminateUpstreams(ctx, rq.st, rec)
		return nil, ErrStoreUnavailable
	}
	rq.Session = rec
	result := protocol.InitializeResult(in.Version, rq.capabilities(ups), "mcp-gateway", h.version, rq.instructions(ups))
	h.log.Info("session started", "session_id", rec.ID, "tenant", rec.Principal.Tenant,
		"protocol_version", in.Version, "upstreams", len(rec.Upstreams))
	return result, nil
}

// EndSession ends what the gateway holds for a session its client deleted
// (the record is gone from the store already): its cached listings and its
// upstream sessions, bounded in time whatever happens to ctx.
func (h *Server) EndSession(ctx context.Context, rq *Request) {
	h.catalog.EndSession(rq.Session.ID)
	h.terminateUpstreams(ctx, rq.st, rq.Session)
}

// announced is what the gateway announces to upstreams for rq's client
// (see internal/announce): its session's capabilities, or a stateless
// request's.
func (rq *Request) announced() *announce.Set {
	switch {
	case rq.adm.Stateless:
		return rq.h.announced.Of(rq.adm.MetaCaps)
	case rq.Session != nil:
		return rq.h.announced.Of(rq.Session.ClientCapabilities)
	}
	return announce.None
}
