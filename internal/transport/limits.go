package transport

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/mcpgw/gateway/internal/dispatch"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// retryAfter is the Retry-After, in seconds, of a 429 (or a 503 at the
// store's global cap). Sessions and streams are freed when their clients
// end them, which a well-behaved client does within seconds; sooner would
// invite a hot retry loop, later would keep a client that freed one waiting.
const retryAfter = 10

// tooMany answers a request over a per-principal or per-tenant cap: 429 with
// Retry-After and a JSON-RPC error naming the limit and its value.
func (h *Handler) tooMany(w http.ResponseWriter, r *http.Request, rq *dispatch.Request, id jsonrpc.ID, method, limit string, max int64) {
	h.srv.LimitHit(r.Context(), rq, limit, method)
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	writeError(w, http.StatusTooManyRequests, id, jsonrpc.CodeInvalidRequest,
		fmt.Sprintf("Too Many Requests: %s limit %s (%d) reached", kindOfLimit(limit), limit, max))
}

func kindOfLimit(limit string) string {
	switch limit {
	case telemetry.LimitStreamsPrincipal, telemetry.LimitStreamsTenant:
		return "stream"
	}
	return "session"
}

// sessionLimit maps a store's refusal to create a record to the limit it
// names (a telemetry.Limit* name) and that limit's value. ok is false for
// any other error.
func sessionLimit(err error) (limit string, max int64, ok bool) {
	var le *session.LimitError
	if !errors.As(err, &le) {
		return "", 0, false
	}
	switch le.Limit {
	case session.LimitMaxPerPrincipal:
		return telemetry.LimitSessionsPrincipal, le.Max, true
	case session.LimitMaxPerTenant:
		return telemetry.LimitSessionsTenant, le.Max, true
	}
	return le.Limit, le.Max, true
}

// refuseCreate answers a failed Create of a session record (initialize, or
// a stateless caller's first request): 429 at a per-principal or per-tenant
// cap, 503 with Retry-After at the store's global cap (max_sessions: the
// gateway is out of capacity, not the caller over its share), 503 when the
// store is unavailable.
func (h *Handler) refuseCreate(w http.ResponseWriter, r *http.Request, rq *dispatch.Request, id jsonrpc.ID, method string, err error) {
	if limit, max, ok := sessionLimit(err); ok {
		h.tooMany(w, r, rq, id, method, limit, max)
		return
	}
	if errors.Is(err, session.ErrFull) {
		h.srv.LimitHit(r.Context(), rq, telemetry.LimitSessions, method)
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		writeError(w, http.StatusServiceUnavailable, id, jsonrpc.CodeInternalError, "Service Unavailable: too many sessions")
		return
	}
	h.storeFailed(r, "creating session", err)
	writeError(w, http.StatusServiceUnavailable, id, jsonrpc.CodeInternalError, "Service Unavailable: session store unavailable")
}
