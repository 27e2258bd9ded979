package budget

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgw/gateway/internal/config"
)

// waitResult is how one Acquire ended.
type waitResult struct {
	tenant  string
	release func()
	err     error
	after   time.Duration
}

// gateRig runs Acquires in goroutines of a synctest bubble and collects
// how they end, in the order they end.
type gateRig struct {
	t    *testing.T
	gate *Gate
	mu   sync.Mutex
	done []waitResult
	wg   sync.WaitGroup
	n    int // principals named so far
}

// who returns the tenant and principal of a request of who: "tenant/name"
// is principal name of tenant; a bare tenant is a principal of its own,
// new each time, so that only the tenant's share applies.
func (r *gateRig) who(who string) (tenant, principal string) {
	if t, p, ok := strings.Cut(who, "/"); ok {
		return t, p
	}
	r.mu.Lock()
	r.n++
	n := r.n
	r.mu.Unlock()
	return who, fmt.Sprintf("%s#%d", who, n)
}

func newGateRig(t *testing.T, c config.Concurrency) *gateRig {
	g := NewGuards()
	g.Configure([]config.Upstream{{Name: "u", Concurrency: &c}})
	return &gateRig{t: t, gate: g.Gate("u")}
}

// hold takes a slot at once, for tenant.
func (r *gateRig) hold(tenant string) func() {
	r.t.Helper()
	t, p := r.who(tenant)
	rel, err := r.gate.Acquire(context.Background(), t, p)
	if err != nil {
		r.t.Fatalf("%s: no free slot: %v", tenant, err)
	}
	return rel
}

// start calls Acquire for tenant in a goroutine and waits until it is
// either queued or done.
func (r *gateRig) start(ctx context.Context, tenant string) {
	r.wg.Go(func() {
		start := time.Now()
		t, p := r.who(tenant)
		rel, err := r.gate.Acquire(ctx, t, p)
		r.mu.Lock()
		r.done = append(r.done, waitResult{tenant, rel, err, time.Since(start)})
		r.mu.Unlock()
	})
	synctest.Wait()
}

// take returns the results so far and forgets them.
func (r *gateRig) take() []waitResult {
	synctest.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.done
	r.done = nil
	return d
}

func (r *gateRig) waiting(tenant string) int {
	_, n := r.gate.Waiting(tenant)
	return n
}

func isConcurrency(err error, detail string) bool {
	var ref *Refusal
	return errors.As(err, &ref) && ref.Kind == KindConcurrency && strings.Contains(ref.Detail, detail)
}

// TestGateQueueShare: a tenant waits in at most its share of the queue
// (half of it by default); its next request is refused at once, while
// another tenant's still waits and is served in turn.
func TestGateQueueShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(t, config.Concurrency{MaxInFlight: 1, Queue: new(4), QueueTimeout: config.Duration(time.Second)})
		if r.gate.cfg.tenantQueue != 2 {
			t.Fatalf("default share %d, want 2 (half of 4)", r.gate.cfg.tenantQueue)
		}
		rel := r.hold("x")
		ctx := context.Background()
		r.start(ctx, "a")
		r.start(ctx, "a")
		r.start(ctx, "a")
		d := r.take()
		if len(d) != 1 || d[0].after != 0 || !isConcurrency(d[0].err, "2 of this tenant's requests waiting") {
			t.Fatalf("a's third waiter: %+v", d)
		}
		if d[0].err.(*Refusal).RetryAfter != time.Second {
			t.Errorf("retry after %v", d[0].err.(*Refusal).RetryAfter)
		}
		r.start(ctx, "b")
		if n := r.waiting("b"); n != 1 || len(r.take()) != 0 {
			t.Fatalf("b is not waiting (%d)", n)
		}
		// Slots go to the waiters in the order they came: a, a, b.
		for i, want := range []string{"a", "a", "b"} {
			rel()
			d := r.take()
			if len(d) != 1 || d[0].tenant != want || d[0].err != nil {
				t.Fatalf("release %d: %+v, want %s served", i, d, want)
			}
			rel = d[0].release
		}
		rel()
		r.wg.Wait()
		if all, _ := r.gate.Waiting(""); all != 0 || r.gate.InFlight() != 0 || len(r.gate.tenants) != 0 {
			t.Errorf("left: %d waiting, %d in flight, tallies %v", all, r.gate.InFlight(), r.gate.tenants)
		}
	})
}

// TestGateEvictsHeaviest: a full queue gives a lighter tenant's request
// the place of the heaviest tenant's newest waiter, until no tenant holds
// two more than the newcomer's; the survivors are served in the order
// they came.
func TestGateEvictsHeaviest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(t, config.Concurrency{MaxInFlight: 1, Queue: new(4), QueuePerTenant: 4, QueueTimeout: config.Duration(time.Minute)})
		rel := r.hold("x")
		ctx := context.Background()
		for range 4 {
			r.start(ctx, "a")
		}
		if n := r.waiting("a"); n != 4 {
			t.Fatalf("a waits %d, want the whole queue (its share is 4)", n)
		}
		// b, c and d each take the place of a's newest waiter: a keeps
		// its oldest.
		for _, tenant := range []string{"b", "c", "d"} {
			r.start(ctx, tenant)
			d := r.take()
			if len(d) != 1 || d[0].tenant != "a" || d[0].after != 0 || !isConcurrency(d[0].err, "1 requests in flight, queue full") {
				t.Fatalf("%s came: %+v, want a's newest refused at once", tenant, d)
			}
			if r.waiting(tenant) != 1 {
				t.Fatalf("%s is not waiting", tenant)
			}
		}
		// Now every tenant holds one: e is refused, nobody is evicted.
		r.start(ctx, "e")
		if d := r.take(); len(d) != 1 || d[0].tenant != "e" || !isConcurrency(d[0].err, "queue full") {
			t.Fatalf("e came to an even queue: %+v", d)
		}
		// Nor does b's second request, which would only swap places: no
		// tenant holds two waiters more than b.
		r.start(ctx, "b")
		if d := r.take(); len(d) != 1 || d[0].tenant != "b" || !isConcurrency(d[0].err, "queue full") {
			t.Fatalf("b's second: %+v", d)
		}
		for i, want := range []string{"a", "b", "c", "d"} {
			rel()
			d := r.take()
			if len(d) != 1 || d[0].tenant != want || d[0].err != nil {
				t.Fatalf("release %d: %+v, want %s served", i, d, want)
			}
			rel = d[0].release
		}
		rel()
		r.wg.Wait()
	})
}

// TestGateQueueZero: with queue 0 none waits: a request that finds no
// slot is refused at once, also when its tenant's per_tenant share is
// what holds it back.
func TestGateQueueZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(t, config.Concurrency{MaxInFlight: 2, PerTenant: 1, Queue: new(0), QueueTimeout: config.Duration(time.Second)})
		rel := r.hold("a")
		ctx := context.Background()
		r.start(ctx, "a")
		if d := r.take(); len(d) != 1 || d[0].after != 0 || !isConcurrency(d[0].err, "1 requests of this tenant in flight, none may wait") {
			t.Fatalf("a over its share: %+v", d)
		}
		relB := r.hold("b")
		r.start(ctx, "c")
		if d := r.take(); len(d) != 1 || d[0].after != 0 || !isConcurrency(d[0].err, "2 requests in flight, none may wait") {
			t.Fatalf("c with every slot taken: %+v", d)
		}
		rel()
		relB()
		r.wg.Wait()
	})
}

// TestGateWaitEnds: a waiter is refused after exactly the queue timeout,
// or returns its context's cause at once when its request ends; either way
// it leaves the queue.
func TestGateWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(t, config.Concurrency{MaxInFlight: 1, QueueTimeout: config.Duration(300 * time.Millisecond)})
		rel := r.hold("a")
		r.start(context.Background(), "a")
		time.Sleep(time.Second) // fake time: the waiter's timer fires
		d := r.take()
		if len(d) != 1 || d[0].after != 300*time.Millisecond || !isConcurrency(d[0].err, "1 requests in flight, waited 300ms") {
			t.Fatalf("timed out waiter: %+v", d)
		}
		gone := errors.New("client gone")
		ctx, cancel := context.WithCancelCause(context.Background())
		r.start(ctx, "b")
		cancel(gone)
		if d := r.take(); len(d) != 1 || d[0].after != 0 || !errors.Is(d[0].err, gone) {
			t.Fatalf("cancelled waiter: %+v", d)
		}
		if all, _ := r.gate.Waiting(""); all != 0 {
			t.Errorf("%d still waiting", all)
		}
		rel()
		r.wg.Wait()
	})
}

// TestGateSkipsHeldTenant: a waiter held back by its tenant's per_tenant
// share does not hold back another tenant's request, which takes the free
// slot; the waiter gets the next slot its tenant may have.
func TestGateSkipsHeldTenant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(t, config.Concurrency{MaxInFlight: 2, PerTenant: 1, QueueTimeout: config.Duration(time.Second)})
		relA := r.hold("a")
		r.start(context.Background(), "a")
		relB := r.hold("b") // the free slot, past a's waiter
		relA()
		d := r.take()
		if len(d) != 1 || d[0].tenant != "a" || d[0].err != nil {
			t.Fatalf("a's waiter after a's slot freed: %+v", d)
		}
		d[0].release()
		relB()
		r.wg.Wait()
		if r.gate.InFlight() != 0 || len(r.gate.tenants) != 0 {
			t.Errorf("left %d in flight, tallies %v", r.gate.InFlight(), r.gate.tenants)
		}
	})
}

// TestGateReload: a reload with the same settings keeps the gate (and
// what it holds), whether queue is written or defaulted the same;
// another queue makes a new gate.
func TestGateReload(t *testing.T) {
	g := NewGuards()
	g.Configure([]config.Upstream{{Name: "u", Concurrency: &config.Concurrency{MaxInFlight: 2, QueueTimeout: config.Duration(time.Second)}}})
	gate := g.Gate("u")
	g.Configure([]config.Upstream{{Name: "u", Concurrency: &config.Concurrency{MaxInFlight: 2, Queue: new(2), QueueTimeout: config.Duration(time.Second)}}})
	if g.Gate("u") != gate {
		t.Error("gate replaced by the same settings")
	}
	g.Configure([]config.Upstream{{Name: "u", Concurrency: &config.Concurrency{MaxInFlight: 2, Queue: new(0), QueueTimeout: config.Duration(time.Second)}}})
	if g.Gate("u") == gate {
		t.Error("gate kept with queue 0")
	}
}

// TestGateQueuePrincipalShare: a principal waits in at most its share of
// its tenant's share (half of it by default); its next request is refused
// at once while another principal of the same tenant still waits; and when
// the queue is full, the heaviest tenant's heaviest principal loses its
// newest waiter to a lighter tenant.
func TestGateQueuePrincipalShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(t, config.Concurrency{MaxInFlight: 1, Queue: new(8), QueueTimeout: config.Duration(time.Second)})
		if r.gate.cfg.tenantQueue != 4 || r.gate.cfg.principalQueue != 2 {
			t.Fatalf("default shares %d and %d, want 4 (half of 8) and 2 (half of 4)", r.gate.cfg.tenantQueue, r.gate.cfg.principalQueue)
		}
		rel := r.hold("x")
		ctx := context.Background()
		r.start(ctx, "a/alice")
		r.start(ctx, "a/alice")
		r.start(ctx, "a/alice")
		d := r.take()
		if len(d) != 1 || d[0].after != 0 || !isConcurrency(d[0].err, "2 of this principal's requests waiting") {
			t.Fatalf("alice's third waiter: %+v", d)
		}
		r.start(ctx, "a/bob")
		if n := r.waiting("a"); n != 3 || len(r.take()) != 0 {
			t.Fatalf("bob is not waiting (a has %d waiting)", n)
		}
		// Fill the queue: b holds 4, a 3, c 1.
		r.start(ctx, "a/carol")
		for range 2 {
			r.start(ctx, "b/dan")
			r.start(ctx, "b/erin")
		}
		if all, _ := r.gate.Waiting(""); all != 8 || len(r.take()) != 0 {
			t.Fatalf("%d waiting, want a full queue", all)
		}
		// c's newcomer takes the place of the newest waiter of b's
		// heaviest principal (dan and erin hold 2 each: erin came last).
		r.start(ctx, "c/frank")
		d = r.take()
		if len(d) != 1 || !isConcurrency(d[0].err, "queue full") || d[0].tenant != "b/erin" {
			t.Fatalf("full queue: %+v, want erin's newest refused", d)
		}
		for {
			rel()
			d := r.take()
			if len(d) == 0 {
				break
			}
			rel = d[0].release
		}
		r.wg.Wait()
		if all, _ := r.gate.Waiting(""); all != 0 || r.gate.InFlight() != 0 || len(r.gate.tenants) != 0 || len(r.gate.principals) != 0 {
			t.Errorf("left: %d waiting, %d in flight, tallies %v %v", all, r.gate.InFlight(), r.gate.tenants, r.gate.principals)
		}
	})
}
