package config

import (
	"testing"
	"time"
)

// TestBudgetDefaults: rules left with their defaults get them, at the top
// level and in a tenant's own budgets.
func TestBudgetDefaults(t *testing.T) {
	c := &Config{
		Budgets: Budgets{RateLimits: []RateLimit{{Name: "r", Requests: 7}}, Quotas: []Quota{{Name: "q", Calls: 3}}},
		Tenants: []Tenant{{ID: "t", Budgets: TenantBudgets{RateLimits: []RateLimit{{Name: "r", Requests: 2, OnStoreError: FailClosed}}}}},
		Upstreams: []Upstream{{Name: "u", URL: "http://127.0.0.1:1/mcp",
			Concurrency: &Concurrency{MaxInFlight: 4}, CircuitBreaker: &CircuitBreaker{}}},
	}
	c.ApplyDefaults()
	r := c.Budgets.RateLimits[0]
	if r.Interval.D() != time.Second || r.Burst != 7 || r.OnStoreError != FailOpen {
		t.Errorf("rate limit defaults: %+v", r)
	}
	if q := c.Budgets.Quotas[0]; q.Period != PeriodDay || q.OnStoreError != FailClosed {
		t.Errorf("quota defaults: %+v", q)
	}
	if tr := c.Tenants[0].Budgets.RateLimits[0]; tr.Burst != 2 || tr.OnStoreError != FailClosed {
		t.Errorf("tenant rate limit defaults: %+v", tr)
	}
	u := c.Upstreams[0]
	if cc := u.Concurrency; cc.Queue == nil || *cc.Queue != 4 || cc.QueuePerTenant != 2 || cc.QueueTimeout.D() != time.Second {
		t.Errorf("concurrency defaults: %+v", u.Concurrency)
	}
	if b := u.CircuitBreaker; b.Failures != 5 || b.OpenFor.D() != 30*time.Second || b.HalfOpenProbes != 1 {
		t.Errorf("breaker defaults: %+v", b)
	}
}
