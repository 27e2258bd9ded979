package dispatch

import (
	"context"

	"github.com/mcpgw/gateway/internal/own"
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
// own.Queue of expiryQueue sessions served by at most expiryWorkers
// goroutines, so a mass expiry costs a fixed number of goroutines and
// upstream connections (expiryWorkers × the upstreams of a session)
// whatever its size.
//
// Two kinds have owners of their own, with the same contract: a list walk
// belongs to the catalog (one per upstream and list, bounded by the
// upstream's timeout, ended and waited for by catalog.close), and a watch
// to internal/watch (one per upstream, ended by its Close). Server.Close
// closes all three.

const (
	// expiryWorkers bounds the goroutines ending expired sessions'
	// upstream sessions, and with them the concurrent upstream
	// connections that work takes.
	expiryWorkers = 8
	// expiryQueue bounds the expired sessions waiting for a worker. Past
	// it an expiry is dropped: the upstream sessions then expire on the
	// upstreams' own schedule, as they do with the Redis store.
	expiryQueue = 4096
)

// Expire is the session store's expiry hook: it queues the end of the
// upstream sessions of a gateway session that expired, and returns at
// once (the hook runs in the store's sweeper). A full queue, or a Server
// being closed, drops the work: the upstream sessions then expire on the
// upstreams' own schedule.
func (h *Server) Expire(rec *session.Record) {
	h.catalog.EndSession(rec.ID)
	// Only what Terminate needs is kept: the ids, not the capabilities
	// an upstream chose.
	var ups map[string]session.Upstream
	for name, us := range rec.Upstreams {
		if us.SessionID == "" {
			continue
		}
		if ups == nil {
			ups = make(map[string]session.Upstream, len(rec.Upstreams))
		}
		ups[name] = session.Upstream{SessionID: us.SessionID, ProtocolVersion: us.ProtocolVersion}
	}
	if ups == nil {
		return
	}
	if !h.expiries.Add(&session.Record{Principal: rec.Principal, Upstreams: ups}) && !h.own.Closed() && !h.expiryWarned.Swap(true) {
		// One line per burst: the worker that drains the queue reports
		// the total.
		h.log.Warn("expiry queue full: dropping the termination of expired sessions' upstream sessions; they expire on the upstreams' own schedule", "queue", expiryQueue)
	}
}

// newExpiries is the queue of expired sessions whose upstream sessions
// are to be ended: expiryWorkers goroutines of the Server's owner, at most
// expiryQueue sessions waiting. Each termination is bounded in time
// (terminateUpstreams); Close lets the one in progress finish and drops
// the rest.
func (h *Server) newExpiries() *own.Queue[*session.Record] {
	return own.NewQueue(&h.own, expiryWorkers, expiryQueue, func(rec *session.Record) {
		h.terminateUpstreams(context.Background(), h.state.Load(), rec)
	}, func(n int) {
		h.expiryWarned.Store(false)
		h.log.Warn("upstream session terminations dropped", "sessions", n)
	})
}
