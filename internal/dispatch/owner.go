package dispatch

import (
	"github.com/mcpgw/gateway/internal/session"
)

// Goroutines that outlive a request.
//
// A request's goroutines end with it. A few do not: the pump of a parked
// call (internal/bridge), the Close of a replaced upstream's client (reload.go),
// the listeners and shared streams of internal/listen, and the termination
// of the upstream sessions of a session that expired in the store
// (Expire). Each is started through the Server's owner (an own.Group),
// which bounds it and which Close waits for: pumps are bounded by their
// upstream's timeout and cancelled by Close; expiries go through an
// own.Queue of upcall.ExpiryQueue sessions served by at most
// upcall.ExpiryWorkers goroutines, so a mass expiry costs a fixed number
// of goroutines and upstream connections whatever its size.
//
// Two kinds have owners of their own, with the same contract: a list walk
// belongs to the catalog (one per upstream and list, bounded by the
// upstream's timeout, ended and waited for by catalog.close), and a watch
// to internal/watch (one per upstream, ended by its Close). Server.Close
// closes all three.

// Expire is the session store's expiry hook: it queues the end of the
// upstream sessions of a gateway session that expired (upcall.Expiries),
// and returns at once (the hook runs in the store's sweeper).
func (h *Server) Expire(rec *session.Record) {
	h.catalog.EndSession(rec.ID)
	h.expiries.Add(rec)
}
