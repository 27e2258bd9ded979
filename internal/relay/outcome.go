package relay

import (
	"context"
	"errors"
	"strconv"

	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/upstream"
)

// BreakerOutcome classifies how a request to an upstream ended for its
// circuit breaker: an answer (a JSON-RPC error included) is a success; a
// transport error, an HTTP 5xx or the upstream's timeout a failure.
func BreakerOutcome(err error) budget.Outcome {
	var ue *upstream.Error
	var je *jsonrpc.Error
	switch {
	case err == nil, errors.As(err, &je):
		// A JSON-RPC error is an answer.
		return budget.Succeeded
	case errors.As(err, &ue):
		if ue.Status == 0 || ue.Status >= 500 {
			return budget.Failed
		}
		return budget.Succeeded
	case errors.Is(err, context.DeadlineExceeded):
		return budget.Failed
	}
	return budget.Unknown
}

// FailureReason classifies a failed request for the audit log with a
// short fixed string: never an error text, which may quote the request or
// an upstream.
func FailureReason(err error) string {
	var re *catalog.ResolveError
	var ue *upstream.Error
	var je *jsonrpc.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &re):
		if len(re.Conflict) > 0 {
			return "name conflict"
		}
		return "unknown name"
	case errors.As(err, &ue):
		return "upstream unreachable or failing"
	case errors.As(err, &je):
		return "error " + strconv.FormatInt(je.Code, 10)
	}
	return "internal error"
}
