package budget

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/config"
)

// A Gate bounds the requests in flight to one upstream from this replica,
// and optionally those of each tenant. A request that finds no free slot
// waits in the gate's queue, for at most the queue timeout, or is refused
// at once when there is no room for it.
//
// The queue is shared by the tenants, so each holds at most a share of it
// (queue_per_tenant), and each principal at most a share of its tenant's
// (queue_per_principal). When it is full, the tenant with the most waiters
// loses one so that a lighter tenant's request can wait: the heaviest
// holder loses first, as everywhere tenants share a pool, and within that
// tenant its principal with the most waiters. Its newest
// waiter is the one refused, not its oldest: a waiter is not idle, and the
// oldest has waited longest and is nearest to a slot, so refusing it would
// waste the most waiting and turn the tenant's own queue order around. The
// tenant's earlier requests are then served in the order they came.
//
// Slots go to waiters in the order they came, skipping those whose tenant
// holds its per_tenant share; so a request that arrives to a free slot
// never overtakes a waiter that could have had it.
type Gate struct {
	name string
	cfg  gateConfig

	mu       sync.Mutex
	inFlight int
	waiting  int
	// tenants holds the slots (with per_tenant only) and waiters of each
	// tenant that has either; bounded by max_in_flight + queue.
	tenants map[string]tally
	// principals holds the waiters of each principal that has any;
	// bounded by queue.
	principals map[string]int
	head, tail *waiter // the queue, oldest first
}

// gateConfig is a gate's settings with the defaults applied, so that a
// reload can tell an unchanged gate.
type gateConfig struct {
	maxInFlight, perTenant int
	queue, tenantQueue     int
	principalQueue         int
	timeout                time.Duration
}

// tally is what one tenant holds of a gate.
type tally struct{ inFlight, waiting int }

// A waiter is a request in a gate's queue. Its fields are guarded by the
// gate's mu; ready is closed when it leaves the queue for a slot
// (granted) or is refused to make room (evicted).
type waiter struct {
	tenant     string
	principal  string
	prev, next *waiter
	ready      chan struct{}
	granted    bool
	evicted    bool
}

func newGate(name string, c config.Concurrency) *Gate {
	return &Gate{name: name, cfg: gateConfigOf(c), tenants: map[string]tally{}, principals: map[string]int{}}
}

func gateConfigOf(c config.Concurrency) gateConfig {
	q := max(c.QueueSize(), 0)
	return gateConfig{
		maxInFlight: c.MaxInFlight,
		perTenant:   c.PerTenant,
		queue:       q,
		tenantQueue: min(max(c.TenantQueue(), 0), q),
		// A principal waits among its tenant's waiters.
		principalQueue: min(max(c.PrincipalQueue(), 0), max(c.TenantQueue(), 0), q),
		timeout:        c.QueueTimeout.D(),
	}
}

// InFlight returns the requests holding a slot.
func (g *Gate) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight
}

// Waiting returns the requests waiting for a slot, and those of tenant.
func (g *Gate) Waiting(tenant string) (all, ofTenant int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting, g.tenants[tenant].waiting
}

// Acquire takes a slot for a request of principal, of tenant, waiting as
// the gate's queue allows. It returns the release func, or the refusal.
func (g *Gate) Acquire(ctx context.Context, tenant, principal string) (func(), error) {
	g.mu.Lock()
	if g.fits(tenant) {
		g.hold(tenant)
		g.mu.Unlock()
		return func() { g.release(tenant) }, nil
	}
	w, ref := g.enqueue(tenant, principal)
	g.mu.Unlock()
	if ref != nil {
		return nil, ref
	}

	t := time.NewTimer(g.cfg.timeout)
	defer t.Stop()
	select {
	case <-w.ready:
	case <-t.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case w.granted:
		// Even if the wait ended otherwise meanwhile: the slot is
		// taken, and the caller releases it.
		return func() { g.release(tenant) }, nil
	case w.evicted:
		return nil, g.refusal(g.detail(tenant) + ", queue full")
	}
	g.unlink(w)
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	return nil, g.refusal(g.detail(tenant) + ", waited " + g.cfg.timeout.String())
}

// fits reports whether a request of tenant may take a slot now.
func (g *Gate) fits(tenant string) bool {
	return g.inFlight < g.cfg.maxInFlight && (g.cfg.perTenant == 0 || g.tenants[tenant].inFlight < g.cfg.perTenant)
}

// hold gives a slot to a request of tenant.
func (g *Gate) hold(tenant string) {
	g.inFlight++
	if g.cfg.perTenant > 0 {
		g.count(tenant, 1, 0)
	}
}

// release gives back a slot of tenant's and hands the free slots to the
// waiters that fit, oldest first.
func (g *Gate) release(tenant string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight--
	if g.cfg.perTenant > 0 {
		g.count(tenant, -1, 0)
	}
	for w := g.head; w != nil && g.inFlight < g.cfg.maxInFlight; {
		next := w.next
		if g.fits(w.tenant) {
			g.unlink(w)
			g.hold(w.tenant)
			w.granted = true
			close(w.ready)
		}
		w = next
	}
}

// count adds to tenant's tally, dropping it when it is empty.
func (g *Gate) count(tenant string, inFlight, waiting int) {
	t := g.tenants[tenant]
	t.inFlight += inFlight
	t.waiting += waiting
	if t == (tally{}) {
		delete(g.tenants, tenant)
		return
	}
	g.tenants[tenant] = t
}

// enqueue queues a request of principal, of tenant, or returns its
// refusal: when none may wait, when the principal's or the tenant's
// waiters hold their share of the queue, or when the queue is full and no
// tenant holds at least two waiters more than this one (the heaviest loses
// a newest waiter to make room, if that leaves it with no fewer than the
// newcomer's tenant then has).
func (g *Gate) enqueue(tenant, principal string) (*waiter, *Refusal) {
	switch mine := g.tenants[tenant].waiting; {
	case g.cfg.queue == 0:
		return nil, g.refusal(g.detail(tenant) + ", none may wait")
	case g.waiting >= g.cfg.queue:
		v := g.heaviest()
		if v == nil || mine >= g.cfg.tenantQueue || g.principals[principal] >= g.cfg.principalQueue || g.tenants[v.tenant].waiting < mine+2 {
			return nil, g.refusal(g.detail(tenant) + ", queue full")
		}
		g.unlink(v)
		v.evicted = true
		close(v.ready)
	case mine >= g.cfg.tenantQueue:
		return nil, g.refusal(fmt.Sprintf("%s, %d of this tenant's requests waiting", g.detail(tenant), mine))
	case g.principals[principal] >= g.cfg.principalQueue:
		return nil, g.refusal(fmt.Sprintf("%s, %d of this principal's requests waiting", g.detail(tenant), g.principals[principal]))
	}
	w := &waiter{tenant: tenant, principal: principal, prev: g.tail, ready: make(chan struct{})}
	if g.tail != nil {
		g.tail.next = w
	} else {
		g.head = w
	}
	g.tail = w
	g.waiting++
	g.count(tenant, 0, 1)
	g.principals[principal]++
	return w, nil
}

// heaviest returns the newest waiter of the principal with the most
// waiters in the tenant with the most waiters; of several such tenants,
// that whose newest waiter came last, and likewise of several such
// principals.
func (g *Gate) heaviest() *waiter {
	most := 0
	for _, t := range g.tenants {
		most = max(most, t.waiting)
	}
	var tenant string
	found := false
	for w := g.tail; w != nil; w = w.prev {
		if g.tenants[w.tenant].waiting == most {
			tenant, found = w.tenant, true
			break
		}
	}
	if !found {
		return nil
	}
	mostP := 0
	for w := g.head; w != nil; w = w.next {
		if w.tenant == tenant {
			mostP = max(mostP, g.principals[w.principal])
		}
	}
	for w := g.tail; w != nil; w = w.prev {
		if w.tenant == tenant && g.principals[w.principal] == mostP {
			return w
		}
	}
	return nil
}

// unlink takes w out of the queue.
func (g *Gate) unlink(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		g.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		g.tail = w.prev
	}
	w.prev, w.next = nil, nil
	g.waiting--
	g.count(w.tenant, 0, -1)
	if g.principals[w.principal]--; g.principals[w.principal] <= 0 {
		delete(g.principals, w.principal)
	}
}

// detail says which bound holds a request of tenant back.
func (g *Gate) detail(tenant string) string {
	if g.cfg.perTenant > 0 && g.tenants[tenant].inFlight >= g.cfg.perTenant {
		return fmt.Sprintf("%d requests of this tenant in flight", g.cfg.perTenant)
	}
	return fmt.Sprintf("%d requests in flight", g.cfg.maxInFlight)
}

func (g *Gate) refusal(detail string) *Refusal {
	return &Refusal{Kind: KindConcurrency, Name: g.name, Detail: detail, RetryAfter: g.cfg.timeout}
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
			if old := g.gates[u.Name]; old != nil && old.cfg == gateConfigOf(*c) {
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
