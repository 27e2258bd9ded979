package config

import (
	"fmt"
	"regexp"
	"time"
)

var budgetNameRE = regexp.MustCompile(`^[a-z0-9-]+$`)

// budgets checks the top-level budgets, each tenant's, and the upstreams'
// concurrency and circuit breakers.
func (v *validator) budgets(c *Config) {
	b := &c.Budgets
	if b.TimeZone != "" {
		if _, err := time.LoadLocation(b.TimeZone); err != nil {
			v.addf("budgets.time_zone", "%q is not a known IANA time zone", b.TimeZone)
		}
	}
	if b.Redis != nil {
		v.redis("budgets.redis", b.Redis)
	}
	v.rateLimits("budgets.rate_limits", b.RateLimits)
	v.quotas("budgets.quotas", b.Quotas)
	for i := range c.Tenants {
		t := &c.Tenants[i]
		p := fmt.Sprintf("tenants[%d].budgets", i)
		v.rateLimits(p+".rate_limits", t.Budgets.RateLimits)
		v.quotas(p+".quotas", t.Budgets.Quotas)
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		p := fmt.Sprintf("upstreams[%d]", i)
		if cc := u.Concurrency; cc != nil {
			if cc.MaxInFlight == 0 {
				v.addf(p+".concurrency.max_in_flight", "is required")
			}
			if cc.Queue != nil && *cc.Queue < 0 {
				v.addf(p+".concurrency.queue", "must not be negative")
			}
			nonNegative(v, p+".concurrency.queue_per_tenant", cc.QueuePerTenant)
			nonNegative(v, p+".concurrency.queue_per_principal", cc.QueuePerPrincipal)
			if t := cc.TenantQueue(); cc.QueuePerPrincipal > t && t > 0 {
				v.warnf(p+".concurrency.queue_per_principal", "%d is more than queue_per_tenant (%d): it never applies", cc.QueuePerPrincipal, t)
			}
			if q := cc.QueueSize(); cc.QueuePerTenant > q && q > 0 {
				v.warnf(p+".concurrency.queue_per_tenant", "%d is more than queue (%d): it never applies", cc.QueuePerTenant, q)
			}
			if cc.PerTenant > 0 && cc.MaxInFlight > 0 && cc.PerTenant > cc.MaxInFlight {
				v.warnf(p+".concurrency.per_tenant", "%d is more than max_in_flight (%d): it never applies", cc.PerTenant, cc.MaxInFlight)
			}
		}
	}
}

// budgetName checks the name of a rule at p; seen holds the names met so
// far among the rules of one list.
func (v *validator) budgetName(p, name string, seen map[string]int, idx int) {
	switch {
	case name == "":
		v.addf(p, "is required")
	case !budgetNameRE.MatchString(name):
		v.addf(p, "%q must contain only a-z, 0-9 and \"-\"", name)
	default:
		if j, ok := seen[name]; ok {
			v.addf(p, "duplicate name %q (also [%d])", name, j)
		} else {
			seen[name] = idx
		}
	}
}

func (v *validator) budgetFilters(p string, upstreams, tools []string) {
	for i, pat := range upstreams {
		v.pattern(fmt.Sprintf("%s.upstreams[%d]", p, i), pat, false)
	}
	for i, pat := range tools {
		v.pattern(fmt.Sprintf("%s.tools[%d]", p, i), pat, true)
	}
}

func (v *validator) onStoreError(p, s string) {
	if s != "" && s != FailOpen && s != FailClosed {
		v.addf(p, "%q must be %q or %q", s, FailOpen, FailClosed)
	}
}

// rateLimits checks a list of rate limits.
func (v *validator) rateLimits(p string, rls []RateLimit) {
	seen := map[string]int{}
	for i := range rls {
		r := &rls[i]
		rp := fmt.Sprintf("%s[%d]", p, i)
		v.budgetName(rp+".name", r.Name, seen, i)
		if r.Requests == 0 {
			v.addf(rp+".requests", "is required")
		}
		dims := map[string]bool{}
		for j, d := range r.Per {
			dp := fmt.Sprintf("%s.per[%d]", rp, j)
			switch {
			case d != PerPrincipal && d != PerUpstream && d != PerTool:
				v.addf(dp, "%q must be %q, %q or %q", d, PerPrincipal, PerUpstream, PerTool)
			case dims[d]:
				v.addf(dp, "%q is listed twice", d)
			}
			dims[d] = true
		}
		v.budgetFilters(rp, r.Upstreams, r.Tools)
		v.onStoreError(rp+".on_store_error", r.OnStoreError)
	}
}

// quotas checks a list of quotas.
func (v *validator) quotas(p string, qs []Quota) {
	seen := map[string]int{}
	for i := range qs {
		q := &qs[i]
		qp := fmt.Sprintf("%s[%d]", p, i)
		v.budgetName(qp+".name", q.Name, seen, i)
		if q.Calls == 0 {
			v.addf(qp+".calls", "is required")
		}
		if q.Period != "" && q.Period != PeriodDay && q.Period != PeriodMonth {
			v.addf(qp+".period", "%q must be %q or %q", q.Period, PeriodDay, PeriodMonth)
		}
		v.budgetFilters(qp, q.Upstreams, q.Tools)
		v.onStoreError(qp+".on_store_error", q.OnStoreError)
	}
}
