package dispatch

import (
	"context"
	"sync"

	"github.com/mcpgw/gateway/internal/session"
)

// Goroutines that outlive a request.
//
// A request's goroutines end with it. A few do not: the pump of a parked
// call (internal/bridge), the Close of a replaced upstream's client (reload.go),
// and the termination of the upstream sessions of a session that expired
// in the store (Expire). Each is started through the Server's owner,
// which bounds it and which Close waits for: pumps are bounded by their
// upstream's timeout and cancelled by Close; expiries go through a queue
// of expiryQueue sessions served by at most expiryWorkers goroutines, so a
// mass expiry costs a fixed number of goroutines and upstream connections
// (expiryWorkers × the upstreams of a session) whatever its size.
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

// owner starts and waits for the goroutines a Server starts beyond a
// request's life. Its zero value is ready to use.
type owner struct {
	mu     sync.Mutex
	closed bool
	ctx    context.Context // ended by close; made on first use
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Expired sessions' upstream sessions, waiting for a worker.
	expiries []*session.Record // only the principal and upstream session ids
	workers  int               // running expiry workers
	dropped  int               // expiries dropped since the last report
}

// contextLocked returns the context close ends. o.mu must be held.
func (o *owner) contextLocked() context.Context {
	if o.ctx == nil {
		o.ctx, o.cancel = context.WithCancel(context.Background())
	}
	return o.ctx
}

// goLocked runs f in a goroutine close waits for, with the context close
// ends. o.mu must be held and o.closed false.
func (o *owner) goLocked(f func(ctx context.Context)) {
	ctx := o.contextLocked()
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		f(ctx)
	}()
}

// Go runs f in a goroutine close waits for, with a context close
// ends. It returns false, and runs nothing, once close has begun.
func (o *owner) Go(f func(ctx context.Context)) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.goLocked(f)
	return true
}

// close ends the owned goroutines' context, drops the expiries not begun,
// and waits for every owned goroutine to return. Nothing starts after it.
func (o *owner) close() {
	o.mu.Lock()
	o.closed = true
	if o.cancel != nil {
		o.cancel()
	}
	o.dropped += len(o.expiries)
	o.expiries = nil
	o.mu.Unlock()
	o.wg.Wait()
}

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
	o := &h.own
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || len(o.expiries) >= expiryQueue {
		if o.dropped++; o.dropped == 1 && !o.closed {
			// One line per burst: the worker that drains the queue
			// reports the total.
			h.log.Warn("expiry queue full: dropping the termination of expired sessions' upstream sessions; they expire on the upstreams' own schedule", "queue", expiryQueue)
		}
		return
	}
	o.expiries = append(o.expiries, &session.Record{Principal: rec.Principal, Upstreams: ups})
	if o.workers < expiryWorkers {
		o.workers++
		o.goLocked(h.expiryWorker)
	}
}

// expiryWorker ends queued upstream sessions until the queue is empty.
// Each termination is bounded in time (terminateUpstreams); Close lets the
// one in progress finish and drops the rest.
func (h *Server) expiryWorker(context.Context) {
	o := &h.own
	for {
		o.mu.Lock()
		if len(o.expiries) == 0 || o.closed {
			o.workers--
			dropped := 0
			if o.workers == 0 {
				dropped, o.dropped = o.dropped, 0
				o.expiries = nil // release the drained queue's array
			}
			o.mu.Unlock()
			if dropped > 0 {
				h.log.Warn("upstream session terminations dropped", "sessions", dropped)
			}
			return
		}
		rec := o.expiries[0]
		o.expiries[0] = nil
		o.expiries = o.expiries[1:]
		o.mu.Unlock()
		h.terminateUpstreams(context.Background(), h.state.Load(), rec)
	}
}
