package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics of policy rules and the external decision point
// (internal/policy).

// Decision sources: what made a policy decision.
const (
	PolicyByRule    = "rule"
	PolicyByPDP     = "pdp"
	PolicyByDefault = "default"
)

type policyMetrics struct {
	decisions *prometheus.CounterVec
	pdpReqs   *prometheus.CounterVec
	pdpDur    prometheus.Histogram
	pdpHits   prometheus.Counter
}

func newPolicyMetrics(reg prometheus.Registerer) policyMetrics {
	p := policyMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_policy_decisions_total",
			Help: "Decisions of policy rules on listed items and calls, by tenant, what decided (rule, pdp, default) and the decision.",
		}, []string{"tenant", "source", "decision"}),
		pdpReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_pdp_requests_total",
			Help: "Requests to the external decision point (a batch is one), by outcome (ok, error).",
		}, []string{"outcome"}),
		pdpDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcpgw_pdp_request_duration_seconds",
			Help:    "Time the external decision point took to answer.",
			Buckets: durationBuckets,
		}),
		pdpHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgw_pdp_cache_hits_total",
			Help: "Decisions of the external decision point answered from the gateway's cache.",
		}),
	}
	reg.MustRegister(p.decisions, p.pdpReqs, p.pdpDur, p.pdpHits)
	return p
}

// PolicyDecision records a decision of policy rules:
// mcpgw_policy_decisions_total{tenant,source,decision}; source is one of
// PolicyByRule, PolicyByPDP, PolicyByDefault.
func (m *Metrics) PolicyDecision(tenant, source string, allowed bool) {
	if m == nil {
		return
	}
	decision := "deny"
	if allowed {
		decision = "allow"
	}
	m.policy.decisions.WithLabelValues(m.tenant(tenant), source, decision).Inc()
}

// PDPRequest records a request to the external decision point:
// mcpgw_pdp_requests_total and mcpgw_pdp_request_duration_seconds.
func (m *Metrics) PDPRequest(failed bool, d time.Duration) {
	if m == nil {
		return
	}
	outcome := OutcomeOK
	if failed {
		outcome = OutcomeError
	}
	m.policy.pdpReqs.WithLabelValues(outcome).Inc()
	m.policy.pdpDur.Observe(d.Seconds())
}

// PDPCacheHit records a decision of the external decision point answered
// from the cache: mcpgw_pdp_cache_hits_total.
func (m *Metrics) PDPCacheHit() {
	if m != nil {
		m.policy.pdpHits.Inc()
	}
}

// The metrics of content guards (internal/guard).

type guardMetrics struct {
	findings *prometheus.CounterVec
	hookReqs *prometheus.CounterVec
	hookDur  prometheus.Histogram
	kinds    *capped
}

func newGuardMetrics(reg prometheus.Registerer) guardMetrics {
	g := guardMetrics{
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_guard_findings_total",
			Help: "What content guards found, by tenant, upstream, phase (arguments, results, definitions), kind and the action taken; counts of matches, never their text.",
		}, []string{"tenant", "upstream", "phase", "kind", "action"}),
		hookReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_guard_webhook_requests_total",
			Help: "Requests to content guards' webhooks, by outcome (ok, error).",
		}, []string{"outcome"}),
		hookDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcpgw_guard_webhook_duration_seconds",
			Help:    "Time content guards' webhooks took to answer.",
			Buckets: durationBuckets,
		}),
		kinds: newCapped(MaxReasonLabels),
	}
	reg.MustRegister(g.findings, g.hookReqs, g.hookDur)
	return g
}

// GuardFinding records n matches of kind a guard found in phase and what
// it did (action): mcpgw_guard_findings_total.
func (m *Metrics) GuardFinding(tenant, upstream, phase, kind, action string, n int) {
	if m == nil {
		return
	}
	m.guard.findings.WithLabelValues(m.tenant(tenant), m.upstream(upstream), phase, m.guard.kinds.value(kind), action).Add(float64(n))
}

// GuardWebhook records a request to a guard's webhook:
// mcpgw_guard_webhook_requests_total and
// mcpgw_guard_webhook_duration_seconds.
func (m *Metrics) GuardWebhook(failed bool, d time.Duration) {
	if m == nil {
		return
	}
	outcome := OutcomeOK
	if failed {
		outcome = OutcomeError
	}
	m.guard.hookReqs.WithLabelValues(outcome).Inc()
	m.guard.hookDur.Observe(d.Seconds())
}
