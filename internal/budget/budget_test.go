package budget

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgw/gateway/internal/config"
)

func planFor(t *testing.T, c *config.Config, tenant string) *Plan {
	t.Helper()
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return Compile(c).Tenant(tenant)
}

func baseConfig() *config.Config {
	return &config.Config{
		Auth:      config.Auth{Anonymous: true},
		Upstreams: []config.Upstream{{Name: "gh", URL: "http://127.0.0.1:1/mcp"}, {Name: "search", URL: "http://127.0.0.1:2/mcp"}},
		Tenants:   []config.Tenant{{ID: "default"}, {ID: "acme"}},
	}
}

// TestPlanRules: which rules count which request, and a tenant's rule
// replaces the default of the same name.
func TestPlanRules(t *testing.T) {
	c := baseConfig()
	c.Budgets.RateLimits = []config.RateLimit{
		{Name: "all", Per: []string{"principal"}, Requests: 10},
		{Name: "gh", Upstreams: []string{"gh"}, Requests: 5},
		{Name: "writes", Tools: []string{"create_*"}, Requests: 1},
		{Name: "each-tool", Per: []string{"tool"}, Requests: 2},
	}
	c.Budgets.Quotas = []config.Quota{{Name: "daily", Calls: 100}, {Name: "search", Upstreams: []string{"search"}, Calls: 3, Period: "month"}}
	c.Tenants[1].Budgets.RateLimits = []config.RateLimit{{Name: "all", Requests: 1000}}
	p := planFor(t, c, "default")
	if len(p.Edge) != 1 || p.Edge[0].Name != "all" {
		t.Fatalf("edge rules: %v", p.Edge)
	}
	for _, tc := range []struct {
		upstream, tool string
		want           string
	}{
		{"gh", "", "rate limit gh"},
		{"gh", "create_issue", "rate limit gh, rate limit writes, rate limit each-tool, quota daily"},
		{"gh", "list", "rate limit gh, rate limit each-tool, quota daily"},
		{"search", "find", "rate limit each-tool, quota daily, quota search"},
		{"search", "", ""},
	} {
		if got := strings.Join(p.For(tc.upstream, tc.tool), ", "); got != tc.want {
			t.Errorf("For(%q, %q) = %q, want %q", tc.upstream, tc.tool, got, tc.want)
		}
	}
	acme := planFor(t, c, "acme")
	if len(acme.Edge) != 1 || acme.Edge[0].limit.Rate != 1000 {
		t.Errorf("acme's own rule did not replace the default: %+v", acme.Edge)
	}
	if !strings.Contains(p.Calls[2].Detail, "per tenant and tool") {
		t.Errorf("detail %q", p.Calls[2].Detail)
	}
}

// TestMemoryRate: a burst, then one request per emission interval, with a
// retry-after that says when.
func TestMemoryRate(t *testing.T) {
	m := NewMemory(0)
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	l := Limit{Rate: 2, Burst: 3, Period: time.Second}
	for i := range 3 {
		if ok, _, _ := m.Allow(context.Background(), "k", l); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, retry, _ := m.Allow(context.Background(), "k", l)
	if ok || retry <= 0 || retry > 500*time.Millisecond {
		t.Fatalf("over the burst: ok %v retry %v", ok, retry)
	}
	now = now.Add(500 * time.Millisecond)
	if ok, _, _ := m.Allow(context.Background(), "k", l); !ok {
		t.Fatal("refused after one emission interval")
	}
	if ok, _, _ := m.Allow(context.Background(), "other", l); !ok {
		t.Fatal("another key shares the bucket")
	}
}

// TestMemoryBounded: however many keys a caller makes, the table stays
// within its bound.
func TestMemoryBounded(t *testing.T) {
	m := NewMemory(100)
	l := Limit{Rate: 1, Burst: 1, Period: time.Hour}
	for i := range 10_000 {
		m.Allow(context.Background(), key("k", string(rune(i))), l)
	}
	if n := len(m.buckets); n > 100 {
		t.Fatalf("%d buckets, bound 100", n)
	}
	end := time.Now().Add(time.Hour)
	full := 0
	for i := range 200 {
		if _, _, err := m.Count(context.Background(), key("q", string(rune(i))), 10, end); err == ErrFull {
			full++
		}
	}
	if len(m.counters) > 100 || full != 100 {
		t.Fatalf("%d counters, %d refused as full", len(m.counters), full)
	}
}

// TestQuotaPeriods: a quota is exhausted, refused calls do not count, and
// the next day (in the configured zone) starts afresh.
func TestQuotaPeriods(t *testing.T) {
	c := baseConfig()
	c.Budgets.TimeZone = "America/New_York"
	c.Budgets.Quotas = []config.Quota{{Name: "daily", Calls: 2}}
	p := planFor(t, c, "default")
	// 23:30 in New York.
	now := time.Date(2026, 12, 3, 4, 30, 0, 0, time.UTC)
	e := NewEngine(NewMemory(0), nil, func() time.Time { return now })
	var used []int64
	e.OnQuota = func(_, _ string, n int64) { used = append(used, n) }
	who := Who{Tenant: "default"}
	for i := range 2 {
		if ref := e.Call(context.Background(), p, who, "gh", "t"); ref != nil {
			t.Fatalf("call %d: %v", i, ref)
		}
	}
	ref := e.Call(context.Background(), p, who, "gh", "t")
	if ref == nil || ref.Kind != KindQuota || ref.RetryAfter != 30*time.Minute {
		t.Fatalf("third call: %+v", ref)
	}
	if !strings.Contains(ref.Error(), `Quota "daily" exhausted`) || !strings.Contains(ref.Error(), "Retry after 1800s") {
		t.Errorf("text: %s", ref.Error())
	}
	if e.Call(context.Background(), p, who, "gh", "") != nil {
		t.Error("a request that is not a tools/call counted against a quota")
	}
	now = now.Add(31 * time.Minute) // 00:01 the next day there
	if ref := e.Call(context.Background(), p, who, "gh", "t"); ref != nil {
		t.Fatalf("after midnight: %v", ref)
	}
	if want := []int64{1, 2, 2, 1}; !equal(used, want) {
		t.Errorf("counts seen %v, want %v", used, want)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type failingStore struct{}

func (failingStore) Allow(context.Context, string, Limit) (bool, time.Duration, error) {
	return false, 0, context.DeadlineExceeded
}
func (failingStore) Count(context.Context, string, int64, time.Time) (int64, bool, error) {
	return 0, false, context.DeadlineExceeded
}
func (failingStore) Uncount(context.Context, string) error { return context.DeadlineExceeded }
func (failingStore) remote() bool                          { return true }

// remoteMemory is a memory store that calls itself remote, so that the
// engine runs its checks at once, as with Redis.
type remoteMemory struct{ *Memory }

func (remoteMemory) remote() bool { return true }

// TestRefusedCallsDoNotCount: checked at once (as with Redis) or one after
// the other, a call that a rate limit or another quota refuses counts
// against no quota.
func TestRefusedCallsDoNotCount(t *testing.T) {
	c := baseConfig()
	c.Budgets.RateLimits = []config.RateLimit{{Name: "r", Tools: []string{"slow"}, Requests: 1, Interval: config.Duration(time.Hour)}}
	c.Budgets.Quotas = []config.Quota{{Name: "all", Calls: 100}, {Name: "few", Tools: []string{"few"}, Calls: 1}}
	p := planFor(t, c, "default")
	for _, remote := range []bool{false, true} {
		m := NewMemory(0)
		var store Store = m
		if remote {
			store = remoteMemory{m}
		}
		e := NewEngine(store, nil, nil)
		who := Who{Tenant: "default"}
		for i, tc := range []struct {
			tool string
			want Kind
		}{{"slow", ""}, {"slow", KindRateLimit}, {"few", ""}, {"few", KindQuota}, {"other", ""}} {
			ref := e.Call(context.Background(), p, who, "gh", tc.tool)
			if (ref == nil) != (tc.want == "") || (ref != nil && ref.Kind != tc.want) {
				t.Fatalf("remote %v, call %d (%s): %+v", remote, i, tc.tool, ref)
			}
		}
		var counts []int64
		for _, c := range m.counters {
			counts = append(counts, c.n)
		}
		// "all" counted the three calls let through; "few" its one.
		if len(counts) != 2 || counts[0]+counts[1] != 4 {
			t.Errorf("remote %v: counters %v, want 3 and 1", remote, counts)
		}
	}
}

// TestStoreErrors: by default a rate limit fails open and a quota closed;
// each can be turned around.
func TestStoreErrors(t *testing.T) {
	c := baseConfig()
	c.Budgets.RateLimits = []config.RateLimit{{Name: "r", Upstreams: []string{"*"}, Requests: 1}}
	c.Budgets.Quotas = []config.Quota{{Name: "q", Calls: 1}}
	p := planFor(t, c, "default")
	e := NewEngine(failingStore{}, nil, nil)
	ref := e.Call(context.Background(), p, Who{Tenant: "default"}, "gh", "t")
	if ref == nil || ref.Kind != KindQuota || !ref.StoreError {
		t.Fatalf("defaults: %+v", ref)
	}
	c = baseConfig()
	c.Budgets.RateLimits = []config.RateLimit{{Name: "r", Upstreams: []string{"*"}, Requests: 1, OnStoreError: "closed"}}
	c.Budgets.Quotas = []config.Quota{{Name: "q", Calls: 1, OnStoreError: "open"}}
	p = planFor(t, c, "default")
	ref = e.Call(context.Background(), p, Who{Tenant: "default"}, "gh", "t")
	if ref == nil || ref.Kind != KindRateLimit || !ref.StoreError {
		t.Fatalf("turned around: %+v", ref)
	}
	c.Budgets.RateLimits[0].OnStoreError = "open"
	p = planFor(t, c, "default")
	if ref := e.Call(context.Background(), p, Who{Tenant: "default"}, "gh", "t"); ref != nil {
		t.Fatalf("all open: %+v", ref)
	}
}

// TestBreaker: open after N failures, refuse until due, one probe at a
// time, closed by a success, open again by a failure.
func TestBreaker(t *testing.T) {
	g := NewGuards()
	now := time.Unix(0, 0)
	g.now = func() time.Time { return now }
	var changes []bool
	g.Notify = func(_ string, open bool) { changes = append(changes, open) }
	g.Configure([]config.Upstream{{Name: "u", CircuitBreaker: &config.CircuitBreaker{Failures: 2, OpenFor: config.Duration(10 * time.Second), HalfOpenProbes: 1}}})
	b := g.Breaker("u")
	for range 2 {
		done, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(Failed)
	}
	if _, err := b.Allow(); err == nil || !b.Open() {
		t.Fatal("not open after 2 failures")
	} else if ref := err.(*Refusal); ref.RetryAfterSeconds() != 10 {
		t.Errorf("retry after %v", ref.RetryAfter)
	}
	now = now.Add(10 * time.Second)
	probe, err := b.Allow()
	if err != nil {
		t.Fatal("no probe when due")
	}
	if _, err := b.Allow(); err == nil {
		t.Fatal("a second probe at once")
	}
	probe(Failed)
	if !b.Open() {
		t.Fatal("a failed probe did not open it again")
	}
	now = now.Add(10 * time.Second)
	probe, _ = b.Allow()
	probe(Succeeded)
	if b.State() != "closed" {
		t.Fatalf("state %s after a good probe", b.State())
	}
	if want := []bool{true, true, false}; len(changes) != 3 || changes[0] != want[0] || changes[2] != want[2] {
		t.Errorf("notified %v", changes)
	}
	// A reload that keeps the settings keeps the breaker.
	g.Configure([]config.Upstream{{Name: "u", CircuitBreaker: &config.CircuitBreaker{Failures: 2, OpenFor: config.Duration(10 * time.Second), HalfOpenProbes: 1}}})
	if g.Breaker("u") != b {
		t.Error("breaker replaced by an unchanged config")
	}
}

// TestGate: slots, a bounded queue with a bounded wait, and a per-tenant
// share. It runs in a synctest bubble: the queue timeout is on a fake
// clock, and synctest.Wait tells when a waiter is queued.
func TestGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGuards()
		g.Configure([]config.Upstream{{Name: "u", Concurrency: &config.Concurrency{MaxInFlight: 2, PerTenant: 1, Queue: new(1), QueueTimeout: config.Duration(50 * time.Millisecond)}}})
		gate := g.Gate("u")
		ctx := context.Background()
		relA, err := gate.Acquire(ctx, "a", "p-a")
		if err != nil {
			t.Fatal(err)
		}
		relB, err := gate.Acquire(ctx, "b", "p-b")
		if err != nil {
			t.Fatal(err)
		}
		// Tenant a's share is taken: it waits, then is refused.
		start := time.Now()
		if _, err := gate.Acquire(ctx, "a", "p-a"); err == nil {
			t.Fatal("tenant a over its share")
		} else if time.Since(start) != 50*time.Millisecond {
			t.Errorf("refused after %v, want the queue timeout (50ms)", time.Since(start))
		}
		// One waits for c's slot; a second finds the queue full at once.
		var wg sync.WaitGroup
		var waited error
		wg.Go(func() {
			rel, err := gate.Acquire(ctx, "c", "p-c")
			waited = err
			if rel != nil {
				rel()
			}
		})
		synctest.Wait() // c waits in the queue
		start = time.Now()
		_, err = gate.Acquire(ctx, "d", "p-d")
		if ref, ok := err.(*Refusal); !ok || !strings.Contains(ref.Detail, "queue full") || time.Since(start) != 0 {
			t.Fatalf("second waiter: %v after %v", err, time.Since(start))
		}
		relA()
		wg.Wait()
		if waited != nil {
			t.Fatalf("the waiter got no slot when one freed: %v", waited)
		}
		relB()
		if gate.InFlight() != 0 {
			t.Errorf("%d in flight after every release", gate.InFlight())
		}
	})
}

// TestRefusalReason: the audit log's reason names the budget's kind and
// name, and says when the store could not be asked.
func TestRefusalReason(t *testing.T) {
	r := &Refusal{Kind: KindQuota, Name: "daily"}
	if got := r.Reason(); got != "quota daily" {
		t.Errorf("Reason = %q", got)
	}
	r.StoreError = true
	if got := r.Reason(); got != "quota daily (store unavailable)" {
		t.Errorf("Reason with the store down = %q", got)
	}
}
