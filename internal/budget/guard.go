package budget

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/gateway/internal/config"
)

// A Gate bounds the requests in flight to one upstream from this replica,
// and optionally those of each tenant. A request that finds no free slot
// waits, if fewer than the queue bound are waiting, for at most the queue
// timeout; otherwise it is refused at once.
type Gate struct {
	name      string
	cfg       config.Concurrency
	slots     chan struct{}
	waiting   atomic.Int64
	mu        sync.Mutex
	perTenant map[string]chan struct{} // tenant → its slots; bounded by the config's tenants
}

func newGate(name string, cfg config.Concurrency) *Gate {
	return &Gate{name: name, cfg: cfg, slots: make(chan struct{}, cfg.MaxInFlight), perTenant: map[string]chan struct{}{}}
}

// InFlight returns the requests holding a slot.
func (g *Gate) InFlight() int { return len(g.slots) }

// Acquire takes a slot for a request of tenant, waiting as the gate's
// queue allows. It returns the release func, or the refusal.
func (g *Gate) Acquire(ctx context.Context, tenant string) (func(), error) {
	var ts chan struct{}
	if g.cfg.PerTenant > 0 {
		g.mu.Lock()
		ts = g.perTenant[tenant]
		if ts == nil {
			ts = make(chan struct{}, g.cfg.PerTenant)
			g.perTenant[tenant] = ts
		}
		g.mu.Unlock()
		if err := g.take(ctx, ts, fmt.Sprintf("%d requests of this tenant in flight", g.cfg.PerTenant)); err != nil {
			return nil, err
		}
	}
	if err := g.take(ctx, g.slots, fmt.Sprintf("%d requests in flight", g.cfg.MaxInFlight)); err != nil {
		if ts != nil {
			<-ts
		}
		return nil, err
	}
	return func() {
		<-g.slots
		if ts != nil {
			<-ts
		}
	}, nil
}

func (g *Gate) take(ctx context.Context, slots chan struct{}, detail string) error {
	select {
	case slots <- struct{}{}:
		return nil
	default:
	}
	if g.waiting.Add(1) > int64(g.cfg.Queue) {
		g.waiting.Add(-1)
		return &Refusal{Kind: KindConcurrency, Name: g.name, Detail: detail + ", queue full", RetryAfter: g.cfg.QueueTimeout.D()}
	}
	defer g.waiting.Add(-1)
	t := time.NewTimer(g.cfg.QueueTimeout.D())
	defer t.Stop()
	select {
	case slots <- struct{}{}:
		return nil
	case <-t.C:
		return &Refusal{Kind: KindConcurrency, Name: g.name, Detail: detail + ", waited " + g.cfg.QueueTimeout.String(), RetryAfter: g.cfg.QueueTimeout.D()}
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Circuit states.
const (
	closed = iota
	open
	halfOpen
)

// A Breaker is one upstream's circuit breaker on this replica: it opens
// after Failures consecutive failures, fails requests at once for OpenFor,
// then lets HalfOpenProbes requests at once through; one that succeeds
// closes it, one that fails opens it again.
type Breaker struct {
	name   string
	cfg    config.CircuitBreaker
	now    func() time.Time
	notify func(name string, open bool)

	mu        sync.Mutex
	state     int
	fails     int
	openUntil time.Time
	probes    int
}

// Open reports whether the circuit refuses requests now (open, and not yet
// due for a probe).
func (b *Breaker) Open() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == open && b.now().Before(b.openUntil)
}

// State returns "closed", "open" or "half-open".
func (b *Breaker) State() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return [...]string{"closed", "open", "half-open"}[b.state]
}

// Outcome is how a request let through a breaker went.
type Outcome int

const (
	// Succeeded: the upstream answered (a JSON-RPC error is an answer).
	Succeeded Outcome = iota
	// Failed: a transport error, an HTTP 5xx, or the upstream's timeout.
	Failed
	// Unknown: the request ended before the upstream could show either
	// (the client went away). It changes nothing.
	Unknown
)

// Allow asks to send a request. It returns the func that reports how the
// request went, or the refusal.
func (b *Breaker) Allow() (func(Outcome), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	switch b.state {
	case open:
		if now.Before(b.openUntil) {
			return nil, b.refusal(b.openUntil.Sub(now))
		}
		b.state, b.probes = halfOpen, 0
		fallthrough
	case halfOpen:
		if b.probes >= b.cfg.HalfOpenProbes {
			return nil, b.refusal(time.Second)
		}
		b.probes++
		return b.probeDone, nil
	}
	return b.done, nil
}

func (b *Breaker) refusal(retry time.Duration) *Refusal {
	return &Refusal{Kind: KindCircuit, Name: b.name, RetryAfter: retry,
		Detail: fmt.Sprintf("circuit open after %d consecutive failures", b.cfg.Failures)}
}

// done reports a request let through a closed circuit.
func (b *Breaker) done(o Outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != closed || o == Unknown {
		return // a probe decides
	}
	if o == Succeeded {
		b.fails = 0
		return
	}
	b.fails++
	if b.fails >= b.cfg.Failures {
		b.trip()
	}
}

// probeDone reports a probe of a half-open circuit.
func (b *Breaker) probeDone(o Outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != halfOpen {
		return
	}
	b.probes--
	switch o {
	case Unknown:
		return
	case Failed:
		b.trip()
		return
	}
	b.state, b.fails = closed, 0
	if b.notify != nil {
		b.notify(b.name, false)
	}
}

func (b *Breaker) trip() {
	b.state, b.openUntil, b.probes = open, b.now().Add(b.cfg.OpenFor.D()), 0
	if b.notify != nil {
		b.notify(b.name, true)
	}
}

// Guards are the gates and breakers of the configured upstreams. They
// outlive a config: an upstream whose settings are unchanged by a reload
// keeps its gate (and the requests in it) and its breaker's state.
type Guards struct {
	mu       sync.Mutex
	gates    map[string]*Gate
	breakers map[string]*Breaker
	// Notify, if set, is told when a circuit opens or closes. Set it
	// before the first Configure.
	Notify func(upstream string, open bool)
	now    func() time.Time
}

// NewGuards returns an empty set of guards.
func NewGuards() *Guards {
	return &Guards{gates: map[string]*Gate{}, breakers: map[string]*Breaker{}, now: time.Now}
}

// Configure makes the guards those of ups.
func (g *Guards) Configure(ups []config.Upstream) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gates := make(map[string]*Gate)
	breakers := make(map[string]*Breaker)
	for _, u := range ups {
		if c := u.Concurrency; c != nil {
			if old := g.gates[u.Name]; old != nil && old.cfg == *c {
				gates[u.Name] = old
			} else {
				gates[u.Name] = newGate(u.Name, *c)
			}
		}
		if c := u.CircuitBreaker; c != nil {
			if old := g.breakers[u.Name]; old != nil && old.cfg == *c {
				breakers[u.Name] = old
			} else {
				breakers[u.Name] = &Breaker{name: u.Name, cfg: *c, now: g.now, notify: g.Notify}
			}
		}
	}
	g.gates, g.breakers = gates, breakers
}

// Gate returns the upstream's gate, or nil when it has none.
func (g *Guards) Gate(upstream string) *Gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gates[upstream]
}

// Breaker returns the upstream's breaker, or nil when it has none.
func (g *Guards) Breaker(upstream string) *Breaker {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.breakers[upstream]
}
