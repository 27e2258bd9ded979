package dispatch

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/observe"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/rpcerr"
	"github.com/mcpgw/gateway/internal/vault"
)

// Per-user upstream OAuth (auth mode user_oauth): the broker keeps the
// users' tokens; a call that needs one the vault lacks is answered with a
// consent link, in the form the client can act on (consentAnswer).

// CodeURLElicitationRequired is URLElicitationRequiredError (2025-11-25
// client/elicitation, "URL Elicitation Required Error").
const CodeURLElicitationRequired = -32042

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
// the elicitation is told it is done (2025-11-25 client/elicitation, "Completion Notifications for URL
// Mode Elicitation": only to the client that got the elicitation).
func (h *Server) linked(ctx context.Context, _, sessionID, elicitationID string) {
	if sessionID == "" {
		return
	}
	params, _ := json.Marshal(map[string]string{"elicitationId": elicitationID})
	msg := jsonrpc.AppendRequest(nil, jsonrpc.ID{}, protocol.NotifyElicitationComplete, params)
	// On whichever replica holds the session's GET stream (the bus).
	if err := h.NotifySession(ctx, sessionID, msg); err != nil {
		h.log.Debug("elicitation complete not delivered", "error", err)
	}
}

// callerMustAct reports whether err is the caller's to fix (a consent
// the user has yet to give), not the upstream's failure: it is neither
// warned of nor counted against the upstream's readiness.
func callerMustAct(err error) bool {
	var ce interface{ CallerMustAct() bool }
	return err != nil && errors.As(err, &ce) && ce.CallerMustAct()
}

// consentAnswer turns a call's need of the user's consent (err) into the
// client's answer, and reports whether it did:
//   - a 2025-11-25 client that declared URL-mode elicitation gets
//     URLElicitationRequiredError, -32042, with the link in
//     data.elicitations (2025-11-25 client/elicitation, "URL Elicitation
//     Required Error"), and notifications/elicitation/complete on its GET
//     stream once the link is used;
//   - a 2026-07-28 client that declared it gets an input_required result
//     with a URL-mode elicitation/create on the methods that may have one
//     (2026-07-28 basic/patterns/mrtr, "Supported Requests"); its retry,
//     after the consent, succeeds;
//   - any other client gets, for tools/call, a result with isError whose
//     text gives the link and says to retry (a model can act on it), and
//     for other methods a JSON-RPC error naming the link.
func (h *Server) consentAnswer(ctx context.Context, rq *Request, c *call, err error) (json.RawMessage, error, bool) {
	var cr *credentials.ConsentRequired
	if err == nil || !errors.As(err, &cr) {
		return nil, err, false
	}
	caps := rq.caller().Caps
	urlMode := false
	if h.capNames.Names(caps)["elicitation"] {
		var el struct {
			Elicitation struct {
				URL json.RawMessage `json:"url"`
			} `json:"elicitation"`
		}
		urlMode = json.Unmarshal(caps, &el) == nil && len(el.Elicitation.URL) > 0 && string(el.Elicitation.URL) != "null"
	}
	session := ""
	if urlMode && !rq.adm.Stateless && rq.Session != nil {
		session = rq.Session.ID
	}
	link, lerr := cr.Link(ctx, session)
	if lerr != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Authorization required at upstream " + cr.Upstream + ", but " + lerr.Error()}, true
	}
	msg := "Authorization is required at upstream " + cr.Upstream + ": open " + link.URL + " to link your account, then retry."
	switch {
	case urlMode && rq.adm.Stateless && c.m.input:
		el := map[string]any{"method": protocol.MethodElicit, "params": map[string]string{"mode": "url", "url": link.URL, "message": msg}}
		res, _ := json.Marshal(map[string]any{"resultType": "input_required", "inputRequests": map[string]any{"consent-" + cr.Upstream: el}})
		return res, nil, true
	case urlMode && !rq.adm.Stateless:
		data, _ := json.Marshal(map[string]any{"elicitations": []map[string]string{{
			"mode": "url", "elicitationId": link.ID, "url": link.URL, "message": msg,
		}}})
		return nil, &jsonrpc.Error{Code: CodeURLElicitationRequired, Message: "This request requires authorization at upstream " + cr.Upstream + ".", Data: data}, true
	case c.m.target == observe.TargetTool:
		return nil, rpcerr.FailTool(msg), true
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: msg}, true
}
