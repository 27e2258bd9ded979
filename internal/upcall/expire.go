package upcall

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/gateway/internal/own"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// TerminateTimeout bounds the termination of one gateway session's
// upstream sessions.
const TerminateTimeout = 5 * time.Second

// Terminate ends upstream sessions ups (by upstream name), all at once
// (one goroutine per upstream, waited for) and within TerminateTimeout,
// whatever happens to ctx. client returns an upstream's client, nil for
// one no longer configured (its session is left to expire). log, if nil,
// means no logging.
func Terminate(ctx context.Context, ups map[string]session.Upstream, client func(name string) *upstream.Client, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TerminateTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for name, us := range ups {
		c := client(name)
		if c == nil || us.SessionID == "" {
			continue
		}
		wg.Go(func() {
			if err := c.Terminate(ctx, us); err != nil && log != nil {
				log.Warn("terminating upstream session", "upstream", name, "error", err)
			}
		})
	}
	wg.Wait()
}

const (
	// ExpiryWorkers bounds the goroutines ending expired sessions'
	// upstream sessions, and with them the concurrent upstream
	// connections that work takes.
	ExpiryWorkers = 8
	// ExpiryQueue bounds the expired sessions waiting for a worker. Past
	// it an expiry is dropped: the upstream sessions then expire on the
	// upstreams' own schedule, as they do with the Redis store.
	ExpiryQueue = 4096
)

// Expiries end the upstream sessions of gateway sessions that expired in
// the store: ExpiryWorkers goroutines of an owner, at most ExpiryQueue
// sessions waiting, so that a mass expiry costs a fixed number of
// goroutines and upstream connections (ExpiryWorkers × the upstreams of a
// session) whatever its size. The owner's Close lets the termination in
// progress finish and drops the rest.
type Expiries struct {
	g   *own.Group
	q   *own.Queue[*session.Record]
	log *slog.Logger
	// warned says a full queue was logged since it last drained.
	warned atomic.Bool
}

// NewExpiries returns the Expiries run by g; end ends one record's
// upstream sessions (and should be bounded in time: see Terminate). log,
// if nil, means no logging.
func NewExpiries(g *own.Group, end func(*session.Record), log *slog.Logger) *Expiries {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	x := &Expiries{g: g, log: log}
	x.q = own.NewQueue(g, ExpiryWorkers, ExpiryQueue, end, func(n int) {
		x.warned.Store(false)
		x.log.Warn("upstream session terminations dropped", "sessions", n)
	})
	return x
}

// Add queues the end of the upstream sessions of rec, a gateway session
// that expired, and returns at once (it runs in the store's sweeper).
// Only what Terminate needs is kept: the ids, not the capabilities an
// upstream chose. A full queue, or an owner being closed, drops the work.
func (x *Expiries) Add(rec *session.Record) {
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
	if !x.q.Add(&session.Record{Principal: rec.Principal, Upstreams: ups}) && !x.g.Closed() && !x.warned.Swap(true) {
		// One line per burst: the worker that drains the queue reports
		// the total.
		x.log.Warn("expiry queue full: dropping the termination of expired sessions' upstream sessions; they expire on the upstreams' own schedule", "queue", ExpiryQueue)
	}
}
