package credentials

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
)

// The answer a client gets to a call that needs its user's consent (a
// [ConsentRequired]), in the form it can act on.

// CodeURLElicitationRequired is URLElicitationRequiredError (2025-11-25
// client/elicitation, "URL Elicitation Required Error").
const CodeURLElicitationRequired = -32042

// CallerMustAct reports whether err is the caller's to fix (a consent
// the user has yet to give), not the upstream's failure: it is neither
// warned of nor counted against the upstream's readiness.
func CallerMustAct(err error) bool {
	var ce interface{ CallerMustAct() bool }
	return err != nil && errors.As(err, &ce) && ce.CallerMustAct()
}

// ConsentNeeded returns the consent err says the caller must give, or nil
// when err is no such demand.
func ConsentNeeded(err error) *ConsentRequired {
	var cr *ConsentRequired
	if err == nil || !errors.As(err, &cr) {
		return nil
	}
	return cr
}

// A ConsentClient is what the answer to a consent demand depends on of the
// client whose call made it.
type ConsentClient struct {
	// Caps are the client capabilities it declared.
	Caps json.RawMessage
	// Stateless is set for a client of the 2026-07-28 revision.
	Stateless bool
	// Session is its gateway session ("" for none): the one told when the
	// link is used, for a session client that can be.
	Session string
	// Input says the method may answer input_required (2026-07-28
	// basic/patterns/mrtr, "Supported Requests").
	Input bool
	// Tool says the call is a tools/call.
	Tool bool
}

// A ConsentAnswer is the answer to a call that needs consent: a result
// (Result), an error (Err), or, for a tools/call, a result with isError
// whose text is ToolError (for the caller to build: it is how the
// caller's tool failures read). Exactly one is set.
type ConsentAnswer struct {
	Result    json.RawMessage
	Err       error
	ToolError string
}

// Answer turns the need of the user's consent into the answer client c
// can act on, making the consent link:
//   - a 2025-11-25 client that declared URL-mode elicitation gets
//     URLElicitationRequiredError, -32042, with the link in
//     data.elicitations (2025-11-25 client/elicitation, "URL Elicitation
//     Required Error"), and notifications/elicitation/complete on its GET
//     stream once the link is used (see [ElicitationComplete]);
//   - a 2026-07-28 client that declared it gets an input_required result
//     with a URL-mode elicitation/create on the methods that may have one
//     (2026-07-28 basic/patterns/mrtr, "Supported Requests"); its retry,
//     after the consent, succeeds;
//   - any other client gets, for tools/call, a result with isError whose
//     text gives the link and says to retry (a model can act on it), and
//     for other methods a JSON-RPC error naming the link.
//
// A link that cannot be made is an internal error.
func (e *ConsentRequired) Answer(ctx context.Context, c ConsentClient) ConsentAnswer {
	urlMode := declaresURLElicitation(c.Caps)
	session := ""
	if urlMode && !c.Stateless {
		session = c.Session
	}
	link, err := e.Link(ctx, session)
	if err != nil {
		return ConsentAnswer{Err: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Authorization required at upstream " + e.Upstream + ", but " + err.Error()}}
	}
	msg := "Authorization is required at upstream " + e.Upstream + ": open " + link.URL + " to link your account, then retry."
	switch {
	case urlMode && c.Stateless && c.Input:
		el := map[string]any{"method": protocol.MethodElicit, "params": map[string]string{"mode": "url", "url": link.URL, "message": msg}}
		res, _ := json.Marshal(map[string]any{"resultType": "input_required", "inputRequests": map[string]any{"consent-" + e.Upstream: el}})
		return ConsentAnswer{Result: res}
	case urlMode && !c.Stateless:
		data, _ := json.Marshal(map[string]any{"elicitations": []map[string]string{{
			"mode": "url", "elicitationId": link.ID, "url": link.URL, "message": msg,
		}}})
		return ConsentAnswer{Err: &jsonrpc.Error{Code: CodeURLElicitationRequired, Message: "This request requires authorization at upstream " + e.Upstream + ".", Data: data}}
	case c.Tool:
		return ConsentAnswer{ToolError: msg}
	}
	return ConsentAnswer{Err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: msg}}
}

// declaresURLElicitation reports whether client capabilities caps declare
// URL-mode elicitation: an elicitation capability with a url member that
// is not null (2025-11-25 client/elicitation, "Capabilities").
func declaresURLElicitation(caps json.RawMessage) bool {
	o, err := jsonx.ParseValidObject(caps)
	if err != nil {
		return false
	}
	el, ok := o.Object("elicitation")
	if !ok {
		return false
	}
	u := el.Get("url")
	return len(u) > 0 && string(u) != "null"
}

// ElicitationComplete returns notifications/elicitation/complete for the
// URL-mode elicitation elicitationID, whose link was used (2025-11-25
// client/elicitation, "Completion Notifications for URL Mode
// Elicitation": only to the client that got the elicitation, the session
// a link was made for).
func ElicitationComplete(elicitationID string) []byte {
	params, _ := json.Marshal(map[string]string{"elicitationId": elicitationID})
	return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, protocol.NotifyElicitationComplete, params)
}
