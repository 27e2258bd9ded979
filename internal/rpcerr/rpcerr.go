// Package rpcerr is where a method's error becomes the client's: the one
// place internal errors get their JSON-RPC code ([Map]), the HTTP status a
// 2026-07-28 error answer has ([Status]), the errors that say the client
// went away or lacks a scope, and the tool failure a tools/call is
// answered with as a result with isError: true ([ToolFailure]).
package rpcerr

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/guard"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/relay"
	"github.com/mcpgw/gateway/internal/upstream"
)

// ErrCancelledByClient is the cause of a request's context when its client
// cancelled it (notifications/cancelled).
var ErrCancelledByClient = errors.New("request cancelled by the client")

// ErrClientGone is what a write to a client that went away fails with
// (wrapped, with the write's own error): see [ClientGone].
var ErrClientGone = errors.New("the client is gone")

// ClientGone reports whether a request failed because its client went
// away: the request's context was cancelled (net/http does so when the
// connection closes), or writing to the client failed (ErrClientGone).
// That is no failure of the gateway's, and is not logged as one. A
// connection of the gateway's own that broke (to Redis, to an upstream) is
// none of these.
func ClientGone(ctx context.Context, err error) bool {
	return errors.Is(context.Cause(ctx), context.Canceled) || errors.Is(err, ErrClientGone)
}

// ScopeError says the token lacks scopes a tool requires. Its answer is a
// step-up challenge, where the transport can still give one.
type ScopeError struct{ Scopes []string }

func (e *ScopeError) Error() string {
	return "Insufficient scope: this tool requires " + strings.Join(e.Scopes, " ")
}

// Map maps the error of a request for method to the error object sent to
// the client. An error that is no known kind is logged to log, at debug
// level when the client went away; a nil log means no logging.
func Map(ctx context.Context, log *slog.Logger, method string, err error) *jsonrpc.Error {
	var je *jsonrpc.Error
	var re *catalog.ResolveError
	var ue *upstream.Error
	var ref *budget.Refusal
	var ce *protocol.CapabilityError
	var pr *policy.Refusal
	var gb *guard.BlockError
	switch {
	case errors.As(err, &ce):
		return ce.RPCError()
	case errors.As(err, &pr) && pr.Unknown == nil:
		return pr.RPCError()
	case errors.As(err, &gb):
		return gb.RPCError()
	case errors.As(err, new(*ScopeError)):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
	case errors.As(err, &ref):
		return &jsonrpc.Error{Code: protocol.CodeBudgetExceeded, Message: ref.Error(), Data: ref.Data()}
	case errors.As(err, &re):
		code := int64(jsonrpc.CodeInvalidParams)
		if (re.Kind == catalog.Resources || re.Kind == catalog.Templates) && len(re.Conflict) == 0 {
			code = protocol.CodeResourceNotFound
		}
		return &jsonrpc.Error{Code: code, Message: re.Error()}
	case errors.As(err, &je):
		// Includes error responses relayed from an upstream, verbatim.
		return je
	case errors.As(err, &ue):
		if e := relay.Answered(ue); e != nil {
			return e // the upstream's own answer (see relay.Error)
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: ue.Error()}
	case errors.Is(context.Cause(ctx), ErrCancelledByClient):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Request cancelled"}
	case errors.Is(err, context.DeadlineExceeded):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Request timed out"}
	case ClientGone(ctx, err):
		if log != nil {
			log.Debug("client gone", "rpc_method", method, "error", err)
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Request cancelled"}
	default:
		if log != nil {
			log.Error("request failed", "rpc_method", method, "error", err)
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error"}
	}
}

// An Answer is a JSON-RPC error a 2026-07-28 request is answered with, and
// the HTTP status that revision gives it (see [Status]): the transport
// writes both while nothing of the answer was sent.
type Answer struct {
	Err    *jsonrpc.Error
	Status int
}

func (e *Answer) Error() string { return e.Err.Error() }

// Status is the HTTP status of a 2026-07-28 error answer with code,
// whether the error is the gateway's or an upstream's (relayed whatever
// status the upstream used, and whichever revision it speaks):
// basic/transports/streamable-http, "Protocol Version Header": a method not
// implemented (-32601) is 404, -32022 and -32020 are 400; basic/index,
// "Per-request protocol fields": -32021 and a malformed request's -32602
// are 400. Every -32602 is 400 (as the reference SDK answers them), so
// that a name is refused alike whether the gateway hid it or the upstream
// does not know it. Any other error is 200, as a session's are.
func Status(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, protocol.CodeHeaderMismatch, protocol.CodeMissingClientCapability, protocol.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
