// Package budget enforces the budgets on work that a shared endpoint needs:
// rate limits and quotas per tenant (shared across replicas through the
// session store's Redis, or in process), and, per upstream and replica, a
// bound on requests in flight and a circuit breaker.
//
// A budget that refuses returns a [*Refusal], which says which budget it
// was and when to retry: the dispatch layer turns it into a tools/call
// result with isError (a model can act on it), a JSON-RPC error, or an
// HTTP 429.
package budget

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Kind is the kind of a budget: the value of the budget label of
// mcpgw_budget_refusals_total.
type Kind string

const (
	KindRateLimit   Kind = "rate_limit"
	KindQuota       Kind = "quota"
	KindConcurrency Kind = "concurrency"
	KindCircuit     Kind = "circuit_breaker"
)

// A Refusal is a request refused by a budget. It is an error.
type Refusal struct {
	Kind Kind
	// Name is the rule's name (rate limits, quotas) or the upstream's
	// (concurrency, circuit breaker).
	Name string
	// Detail says what the budget is, for people and models: "10
	// requests per 1s per principal".
	Detail string
	// RetryAfter is when a retry may succeed, from now.
	RetryAfter time.Duration
	// StoreError is set when the budget could not be asked (Redis was
	// unavailable) and it fails closed.
	StoreError bool
}

// Error says which budget refused and when to retry, in words a model can
// act on; it quotes only the config, never the request.
func (r *Refusal) Error() string {
	var what string
	switch r.Kind {
	case KindRateLimit:
		what = fmt.Sprintf("Rate limit %q exceeded (%s).", r.Name, r.Detail)
	case KindQuota:
		what = fmt.Sprintf("Quota %q exhausted (%s).", r.Name, r.Detail)
	case KindConcurrency:
		what = fmt.Sprintf("Upstream %q is busy (%s).", r.Name, r.Detail)
	case KindCircuit:
		what = fmt.Sprintf("Upstream %q is unavailable (%s).", r.Name, r.Detail)
	default:
		what = fmt.Sprintf("Budget %q exceeded.", r.Name)
	}
	if r.StoreError {
		what = fmt.Sprintf("%s %q could not be checked (the budget store is unavailable), and it refuses calls then.", kindNoun(r.Kind), r.Name)
	}
	return what + " Retry after " + strconv.Itoa(r.RetryAfterSeconds()) + "s."
}

// Reason is the refusal in the audit log: its kind and the budget's name,
// both from the config.
func (r *Refusal) Reason() string {
	if r.StoreError {
		return string(r.Kind) + " " + r.Name + " (store unavailable)"
	}
	return string(r.Kind) + " " + r.Name
}

func kindNoun(k Kind) string {
	switch k {
	case KindRateLimit:
		return "Rate limit"
	case KindQuota:
		return "Quota"
	}
	return "Budget"
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least 1:
// the value of a Retry-After header.
func (r *Refusal) RetryAfterSeconds() int {
	s := math.Ceil(r.RetryAfter.Seconds())
	if s < 1 {
		return 1
	}
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(s)
}

// Data is the data of the JSON-RPC error that carries r.
func (r *Refusal) Data() json.RawMessage {
	b, _ := json.Marshal(struct {
		Budget            Kind   `json:"budget"`
		Name              string `json:"name"`
		RetryAfterSeconds int    `json:"retryAfterSeconds"`
	}{r.Kind, r.Name, r.RetryAfterSeconds()})
	return b
}

// ToolResult is the tools/call result that carries r: an error a model can
// correct belongs in the result (2025-11-25 server/tools, "Error
// Handling").
func (r *Refusal) ToolResult() json.RawMessage {
	b, _ := json.Marshal(struct {
		Content []textContent `json:"content"`
		IsError bool          `json:"isError"`
	}{[]textContent{{"text", r.Error()}}, true})
	return b
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}
