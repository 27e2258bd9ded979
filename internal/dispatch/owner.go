package dispatch

import (
	"github.com/mcpgw/gateway/internal/session"
)

// Expire is the session store's expiry hook: it queues the end of the
// upstream sessions of a gateway session that expired (upcall.Expiries),
// and returns at once (the hook runs in the store's sweeper).
func (h *Server) Expire(rec *session.Record) {
	h.catalog.EndSession(rec.ID)
	h.expiries.Add(rec)
}
