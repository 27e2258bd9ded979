package dispatch

import (
	"context"
	"encoding/json"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/observe"
	"github.com/mcpgw/gateway/internal/rpcerr"
	"github.com/mcpgw/gateway/internal/vault"
)

// Per-user upstream OAuth (auth mode user_oauth): the broker keeps the
// users' tokens; a call that needs one the vault lacks is answered with a
// consent link, in the form the client can act on (consentAnswer).

// CodeURLElicitationRequired is URLElicitationRequiredError (2025-11-25
// client/elicitation, "URL Elicitation Required Error").
const CodeURLElicitationRequired = credentials.CodeURLElicitationRequired

// newBroker returns the broker of user_oauth, keeping its tokens in vs.
func newBroker(cfg *config.Config, vs vault.Store, h *Server) (*credentials.Broker, error) {
	b, err := credentials.NewBroker(cfg, credentials.BrokerOptions{Store: vs, HTTPClient: h.authc, Logger: h.log, OnFetch: h.metrics.TokenFetch})
	if err != nil {
		return nil, err
	}
	b.OnLinked(h.linked)
	return b, nil
}

// Broker returns the broker of user_oauth: its consent pages, its vault.
func (h *Server) Broker() *credentials.Broker { return h.broker }

// linked is told of an account linked at upstream: the session that got
// the elicitation, if any, is told it is done (see
// credentials.ElicitationComplete), on whichever replica holds its GET
// stream (the bus).
func (h *Server) linked(ctx context.Context, _, sessionID, elicitationID string) {
	if sessionID == "" {
		return
	}
	if err := h.NotifySession(ctx, sessionID, credentials.ElicitationComplete(elicitationID)); err != nil {
		h.log.Debug("elicitation complete not delivered", "error", err)
	}
}

// consentAnswer turns a call's need of the user's consent (err) into the
// client's answer, and reports whether it did (see
// credentials.ConsentRequired.Answer).
func (h *Server) consentAnswer(ctx context.Context, rq *Request, c *call, err error) (json.RawMessage, error, bool) {
	cr := credentials.ConsentNeeded(err)
	if cr == nil {
		return nil, err, false
	}
	who := rq.caller()
	a := cr.Answer(ctx, credentials.ConsentClient{Caps: who.Caps, Stateless: who.Stateless, Session: who.Session, Input: c.m.input, Tool: c.m.target == observe.TargetTool})
	if a.ToolError != "" {
		return nil, rpcerr.FailTool(a.ToolError), true
	}
	return a.Result, a.Err, true
}
