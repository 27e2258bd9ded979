package budget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/glob"
)

// A Plan is the rate limits and quotas of one tenant, compiled from the
// config: the top-level rules with the tenant's own added (one of the
// tenant's replaces the top-level rule of the same name).
type Plan struct {
	// Edge are the rate limits that name no upstream or tool: they count
	// every HTTP request, before its body is read.
	Edge []*RateRule
	// Calls are the rate limits of requests routed to an upstream.
	Calls []*RateRule
	// Quotas count tools/call requests.
	Quotas []*QuotaRule
	loc    *time.Location
}

// A RateRule is one compiled rate limit.
type RateRule struct {
	Name                               string
	perPrincipal, perUpstream, perTool bool
	upstreams, tools                   []string
	limit                              Limit
	failOpen                           bool
	// Detail says what the rule is: "10 requests per 1s per principal".
	Detail string
}

// A QuotaRule is one compiled quota.
type QuotaRule struct {
	Name             string
	upstreams, tools []string
	calls            int64
	month            bool
	failOpen         bool
	Detail           string
}

// Plans are the plans of a config's tenants.
type Plans struct {
	byTenant map[string]*Plan
	def      *Plan // of a tenant with no budgets of its own
}

// Tenant returns the plan of tenant id.
func (ps *Plans) Tenant(id string) *Plan {
	if p, ok := ps.byTenant[id]; ok {
		return p
	}
	return ps.def
}

// Compile returns the plans of c's tenants. c must be valid (its time
// zone known), with its defaults applied.
func Compile(c *config.Config) *Plans {
	loc := time.UTC
	if l, err := time.LoadLocation(c.Budgets.TimeZone); err == nil {
		loc = l // "" is UTC
	}
	ps := &Plans{byTenant: make(map[string]*Plan, len(c.Tenants)), def: compile(c, &config.TenantBudgets{}, loc)}
	for i := range c.Tenants {
		if t := &c.Tenants[i]; len(t.Budgets.RateLimits)+len(t.Budgets.Quotas) > 0 {
			ps.byTenant[t.ID] = compile(c, &t.Budgets, loc)
		}
	}
	return ps
}

// compile returns the plan of a tenant whose own budgets are own.
func compile(c *config.Config, own *config.TenantBudgets, loc *time.Location) *Plan {
	p := &Plan{loc: loc}
	for _, r := range merged(c.Budgets.RateLimits, own.RateLimits, func(r config.RateLimit) string { return r.Name }) {
		rr := compileRate(r)
		if rr.edge() {
			p.Edge = append(p.Edge, rr)
		} else {
			p.Calls = append(p.Calls, rr)
		}
	}
	for _, q := range merged(c.Budgets.Quotas, own.Quotas, func(q config.Quota) string { return q.Name }) {
		p.Quotas = append(p.Quotas, compileQuota(q))
	}
	return p
}

// merged is defaults, each replaced by the rule of own of the same name,
// then the rest of own.
func merged[T any](defaults, own []T, name func(T) string) []T {
	out := make([]T, 0, len(defaults)+len(own))
	mine := make(map[string]bool, len(own))
	for _, r := range own {
		mine[name(r)] = true
	}
	for _, r := range defaults {
		if !mine[name(r)] {
			out = append(out, r)
		}
	}
	return append(out, own...)
}

func compileRate(r config.RateLimit) *RateRule {
	rr := &RateRule{
		Name:      r.Name,
		upstreams: r.Upstreams,
		tools:     r.Tools,
		limit:     Limit{Rate: r.Requests, Burst: r.Burst, Period: r.Interval.D()},
		failOpen:  r.OnStoreError != config.FailClosed,
	}
	for _, d := range r.Per {
		switch d {
		case config.PerPrincipal:
			rr.perPrincipal = true
		case config.PerUpstream:
			rr.perUpstream = true
		case config.PerTool:
			rr.perTool = true
		}
	}
	if rr.limit.Burst <= 0 {
		rr.limit.Burst = rr.limit.Rate
	}
	if rr.limit.Period <= 0 {
		rr.limit.Period = time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests per %s", r.Requests, rr.limit.Period)
	if rr.limit.Burst != rr.limit.Rate {
		fmt.Fprintf(&b, ", bursts of %d", rr.limit.Burst)
	}
	b.WriteString(" per tenant")
	for _, d := range r.Per {
		b.WriteString(" and " + d)
	}
	if len(r.Upstreams) > 0 {
		b.WriteString(", upstreams " + strings.Join(r.Upstreams, " "))
	}
	if len(r.Tools) > 0 {
		b.WriteString(", tools " + strings.Join(r.Tools, " "))
	}
	rr.Detail = b.String()
	return rr
}

func compileQuota(q config.Quota) *QuotaRule {
	qr := &QuotaRule{
		Name: q.Name, upstreams: q.Upstreams, tools: q.Tools, calls: q.Calls,
		month:    q.Period == config.PeriodMonth,
		failOpen: q.OnStoreError == config.FailOpen,
	}
	period := "day"
	if qr.month {
		period = "month"
	}
	qr.Detail = fmt.Sprintf("%d tool calls per %s per tenant", q.Calls, period)
	if len(q.Upstreams) > 0 {
		qr.Detail += ", upstreams " + strings.Join(q.Upstreams, " ")
	}
	if len(q.Tools) > 0 {
		qr.Detail += ", tools " + strings.Join(q.Tools, " ")
	}
	return qr
}

// edge reports whether the rule counts every request: it names no
// upstream and no tool.
func (r *RateRule) edge() bool {
	return len(r.upstreams) == 0 && len(r.tools) == 0 && !r.perUpstream && !r.perTool
}

// applies reports whether the rule counts a request routed to upstream;
// tool is the original name of the tool of a tools/call, "" for any other
// request.
func (r *RateRule) applies(upstream, tool string) bool {
	if tool == "" && (len(r.tools) > 0 || r.perTool) {
		return false
	}
	return matches(r.upstreams, upstream) && matches(r.tools, tool)
}

// applies reports whether the quota counts a tools/call of tool on
// upstream.
func (q *QuotaRule) applies(upstream, tool string) bool {
	return matches(q.upstreams, upstream) && matches(q.tools, tool)
}

func matches(patterns []string, name string) bool {
	if patterns == nil {
		return true
	}
	for _, p := range patterns {
		if glob.Match(p, name) {
			return true
		}
	}
	return false
}

// Who is the caller a budget is counted for.
type Who struct {
	Tenant, Issuer, Subject string
}

// key is the store key of a counter: a hash of what it is kept per, so
// that keys are short whatever the names, and no name is stored.
func key(parts ...string) string {
	var buf [512]byte
	b := buf[:0]
	for _, p := range parts {
		b = append(b, p...)
		b = append(b, 0)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func (r *RateRule) key(who Who, upstream, tool string) string {
	var issuer, subject, up, t string
	if r.perPrincipal {
		issuer, subject = who.Issuer, who.Subject
	}
	if r.perUpstream {
		up = upstream
	}
	if r.perTool {
		up, t = upstream, tool
	}
	return key("r", who.Tenant, r.Name, issuer, subject, up, t)
}

// period returns the id and the end of the quota's period that holds now.
func (q *QuotaRule) period(now time.Time, loc *time.Location) (string, time.Time) {
	t := now.In(loc)
	if q.month {
		start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
		return start.Format("2006-01"), start.AddDate(0, 1, 0)
	}
	start := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	return start.Format("2006-01-02"), start.AddDate(0, 0, 1)
}

// An Engine checks plans against a store.
type Engine struct {
	store Store
	log   *slog.Logger
	now   func() time.Time
	// OnQuota, if set, is told the count of a quota after each call it
	// counted (for the mcpgw_quota_used gauge).
	OnQuota func(tenant, quota string, used int64)
}

// NewEngine returns an engine on store. log, if nil, means no logging;
// now, if nil, is time.Now: the clock of quotas' periods.
func NewEngine(store Store, log *slog.Logger, now func() time.Time) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	return &Engine{store: store, log: log, now: now}
}

// Edge checks the rate limits of every request of who's tenant. It returns
// nil when the request may go on.
func (e *Engine) Edge(ctx context.Context, p *Plan, who Who) *Refusal {
	if p == nil || len(p.Edge) == 0 {
		return nil
	}
	var buf [4]check
	checks := buf[:0]
	for _, r := range p.Edge {
		checks = append(checks, check{rate: r})
	}
	return e.decide(ctx, p, checks, len(checks), who, "", "")
}

// Call checks the rate limits and quotas of a request routed to upstream;
// tool is the original name of a tools/call's tool, "" for other methods
// (which quotas do not count). A call that a budget refuses counts against
// no quota.
func (e *Engine) Call(ctx context.Context, p *Plan, who Who, upstream, tool string) *Refusal {
	if p == nil || len(p.Calls)+len(p.Quotas) == 0 {
		return nil
	}
	var buf [8]check
	checks, rates := p.selects(buf[:0], upstream, tool)
	return e.decide(ctx, p, checks, rates, who, upstream, tool)
}

// selects appends to buf the checks of p's rules that count a request
// routed to upstream (tool as in [Engine.Call]): its rate limits, then its
// quotas. rates is how many are rate limits.
func (p *Plan) selects(buf []check, upstream, tool string) (checks []check, rates int) {
	checks = buf
	for _, r := range p.Calls {
		if r.applies(upstream, tool) {
			checks = append(checks, check{rate: r})
		}
	}
	rates = len(checks)
	if tool != "" {
		for _, q := range p.Quotas {
			if q.applies(upstream, tool) {
				checks = append(checks, check{quota: q})
			}
		}
	}
	return checks, rates
}

// decide runs checks, whose first rates are rate limits and the rest
// quotas, and returns the refusal, if any: of the rate limits that refused,
// the one whose retry is furthest, else the first quota that did.
//
// With a store where each check is a round trip (Redis), every check runs
// at once, so that the request waits for one round trip however many
// apply, and a quota that counted a refused call gives it back. Otherwise
// the rate limits run first, and quotas only once they let the call
// through.
func (e *Engine) decide(ctx context.Context, p *Plan, checks []check, rates int, who Who, upstream, tool string) *Refusal {
	switch {
	case len(checks) == 0:
		return nil
	case len(checks) > 1 && e.store.remote():
		e.runAll(ctx, p, checks, who, upstream, tool)
	default:
		for i := range checks {
			if i == rates && refused(checks[:rates]) != nil {
				break // no quota counts a call a rate limit refused
			}
			e.run(ctx, p, &checks[i], who, upstream, tool)
			if i >= rates && checks[i].ref != nil {
				break
			}
		}
	}
	ref := refused(checks[:rates])
	if ref == nil {
		ref = refused(checks[rates:])
	}
	if ref != nil {
		for _, c := range checks[rates:] {
			if c.counted != "" {
				if err := e.store.Uncount(ctx, c.counted); err != nil {
					e.storeError(c.quota.Name, err)
				}
			}
		}
	}
	return ref
}

// runAll runs checks at once. They are copied, so that the caller's stay
// on its stack when the store is not remote.
func (e *Engine) runAll(ctx context.Context, p *Plan, checks []check, who Who, upstream, tool string) {
	cs := slices.Clone(checks)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() { e.run(ctx, p, &cs[i], who, upstream, tool) })
	}
	wg.Wait()
	copy(checks, cs)
}

// A check is one rule checked for one call, and how it went.
type check struct {
	rate    *RateRule
	quota   *QuotaRule
	ref     *Refusal
	counted string // the key of the quota counter that counted the call
}

func (e *Engine) run(ctx context.Context, p *Plan, c *check, who Who, upstream, tool string) {
	if c.rate != nil {
		c.ref = e.rate(ctx, c.rate, who, upstream, tool)
	} else {
		c.ref, c.counted = e.quota(ctx, p, c.quota, who)
	}
}

// refused returns the refusal of checks whose retry is furthest, or nil.
func refused(checks []check) *Refusal {
	var worst *Refusal
	for _, c := range checks {
		worst = tighter(worst, c.ref)
	}
	return worst
}

func tighter(a, b *Refusal) *Refusal {
	if a == nil || (b != nil && b.RetryAfter > a.RetryAfter) {
		return b
	}
	return a
}

func (e *Engine) rate(ctx context.Context, r *RateRule, who Who, upstream, tool string) *Refusal {
	ok, retry, err := e.store.Allow(ctx, r.key(who, upstream, tool), r.limit)
	if err != nil {
		e.storeError(r.Name, err)
		if r.failOpen {
			return nil
		}
		return &Refusal{Kind: KindRateLimit, Name: r.Name, Detail: r.Detail, RetryAfter: time.Second, StoreError: true}
	}
	if ok {
		return nil
	}
	return &Refusal{Kind: KindRateLimit, Name: r.Name, Detail: r.Detail, RetryAfter: retry}
}

// quota counts a call against q. It returns the refusal, or the key of
// the counter that counted the call.
func (e *Engine) quota(ctx context.Context, p *Plan, q *QuotaRule, who Who) (*Refusal, string) {
	now := e.now()
	id, end := q.period(now, p.loc)
	k := key("q", who.Tenant, q.Name) + ":" + id
	used, ok, err := e.store.Count(ctx, k, q.calls, end)
	if err != nil {
		e.storeError(q.Name, err)
		if q.failOpen {
			return nil, ""
		}
		return &Refusal{Kind: KindQuota, Name: q.Name, Detail: q.Detail, RetryAfter: time.Second, StoreError: true}, ""
	}
	if e.OnQuota != nil {
		e.OnQuota(who.Tenant, q.Name, used)
	}
	if ok {
		return nil, k
	}
	return &Refusal{Kind: KindQuota, Name: q.Name, Detail: q.Detail + ", resets " + end.Format(time.RFC3339), RetryAfter: end.Sub(now)}, ""
}

// storeError logs a store's failure. The gateway's log limiter keeps a
// failing store to a line per budget every few seconds.
func (e *Engine) storeError(name string, err error) {
	if errors.Is(err, ErrFull) {
		e.log.Warn("budget store full", "name", name)
		return
	}
	e.log.Warn("budget store unavailable", "name", name, "error", err)
}

// For returns the names of the plan's rate limits and quotas that count a
// request routed to upstream (tool as in [Engine.Call]), for explain.
func (p *Plan) For(upstream, tool string) []string {
	if p == nil {
		return nil
	}
	checks, _ := p.selects(nil, upstream, tool)
	names := make([]string, len(checks))
	for i, c := range checks {
		if c.rate != nil {
			names[i] = "rate limit " + c.rate.Name
		} else {
			names[i] = "quota " + c.quota.Name
		}
	}
	return names
}
