// Package policy decides, inside a tenant, who may see and call what:
// ordered rules on the caller's claims, groups, scopes and client id and
// on a call's arguments (with CEL for everything else), and an external
// decision point spoken to over OpenID AuthZEN 1.0. docs/policy.md
// describes the model for admins.
//
// Rules narrow what the tenant's own rules (package tenant) allow; they
// never widen it. The request pipeline asks [Engine.Decide] only for items
// the tenant may use, and lists filter with [Engine.DecideBatch].
//
// # Phases
//
// A list-phase rule decides what a principal is shown, and since a hidden
// item is unknown at call time too, it is consulted for calls as well: a
// call is decided first by the list-phase rules, then, if they allow it,
// by the call-phase rules, which may read the arguments. In each phase
// the first rule that applies decides; when none does, the item is
// allowed (the default).
//
// An [Engine] is compiled once per config generation and is immutable
// and safe for concurrent use.
package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/tenant"
)

// Phase is when a rule decides: when items are listed, or on each call.
type Phase uint8

const (
	// PhaseList decides what a principal is shown.
	PhaseList Phase = iota
	// PhaseCall decides each call (tools/call, prompts/get,
	// resources/read); the list phase's rules decide it first.
	PhaseCall
)

func (p Phase) String() string {
	if p == PhaseCall {
		return config.PhaseCall
	}
	return config.PhaseList
}

// A Principal is the caller, as the token the gateway verified says.
// The engine never changes it; one Principal may be shared by the inputs
// of a whole list.
type Principal struct {
	Subject string
	Tenant  string
	// ClientID is the client the token was issued to. Empty: the engine
	// takes the claim azp, else client_id.
	ClientID string
	// Scopes are the scopes the token grants.
	Scopes []string
	// Claims are all the token's claims, as JSON decodes them.
	Claims map[string]any
}

// Input is one decision to make.
type Input struct {
	Principal *Principal
	Phase     Phase
	// Method is the MCP method: "tools/list", "tools/call", ...
	Method string
	// Kind is the kind of item: a tool, a prompt or a resource.
	Kind tenant.Kind
	// Upstream is the upstream's name.
	Upstream string
	// Name is the item as the tenant sees it (its exposed name or alias,
	// or exposed URI).
	Name string
	// Original is the upstream's own name or URI for the item, which rule
	// patterns match.
	Original string
	// Arguments are the call's arguments (after fixed arguments are
	// set), a JSON object; decoded only when a rule reads them.
	Arguments json.RawMessage
	// ListDecided says the caller asked the list phase about this item
	// already, and it allowed: an input of phase call then runs the call
	// rules only.
	ListDecided bool
}

// Source is what made a decision.
type Source uint8

const (
	// ByDefault: no rule applied.
	ByDefault Source = iota
	// ByRule: a rule's effect allow or deny, or a rule that failed
	// closed on an error of its own (see Decision.Err).
	ByRule
	// ByPDP: the external decision point, asked by a rule with effect
	// pdp (or that rule's on_pdp_error when it could not be asked).
	ByPDP
)

func (s Source) String() string {
	return [...]string{"default", "rule", "pdp"}[s]
}

// A Decision is the outcome of [Engine.Decide].
type Decision struct {
	Allow bool
	By    Source
	// Phase is the phase whose rules decided.
	Phase Phase
	// Index is the rule's position in the item's rules (the tenant's,
	// then the upstream's), from 0; -1 for the default.
	Index int
	// Path is the rule's config path, "tenants[0].policy[2]"; Name its
	// name, if it has one. Both empty for the default.
	Path, Name string
	// Unknown says that the list phase refused it: a call answers as for
	// an item that does not exist.
	Unknown bool
	// AsResult says that a refused call is answered with a result with
	// isError (Message is its text), not a JSON-RPC error.
	AsResult bool
	// Message says why a call was refused, for the model: which
	// argument, what is allowed. It never quotes argument values.
	Message string
	// Err is what went wrong when a rule could not be evaluated (a CEL
	// error or its cost limit, arguments that cannot be read, the PDP
	// not answering). The decision then is the rule's failure mode. It
	// holds no secrets and no argument values.
	Err error
}

// Rule names what decided, for admins, the audit log and explain:
// `tenants[0].policy[2] "deploy-sre-only"`, `default: no rule applies`.
func (d *Decision) Rule() string {
	if d.By == ByDefault {
		return "default: no " + d.Phase.String() + "-phase rule applies"
	}
	s := d.Path
	if d.Name != "" {
		s += " " + strconv.Quote(d.Name)
	}
	if d.By == ByPDP {
		s += " (pdp)"
	}
	return s
}

// Options are what a compiled Engine needs besides the config.
type Options struct {
	// HTTPClient, if set, is the PDP's client (tests); nil: a client of
	// its own with policy.pdp.tls, following no redirect.
	HTTPClient *http.Client
	// Token, if set, authenticates the gateway to the PDP
	// (policy.pdp.auth): its token goes on every request, and a 401
	// makes it fetch a new one for the next.
	Token TokenSource
	// OnPDP, if set, is called after each request to the PDP (not for
	// answers from the cache), for metrics.
	OnPDP func(PDPEvent)
	// OnCacheHit, if set, is called for each decision the PDP's cache
	// answered, for metrics.
	OnCacheHit func()
}

// Counters are the engine's running totals, for metrics.
type Counters struct {
	// Allowed and Denied count decisions.
	Allowed, Denied uint64
	// Errors counts decisions made on an error (Decision.Err).
	Errors uint64
	// PDPRequests counts HTTP requests to the PDP (a batch is one);
	// PDPErrors those that failed; PDPCacheHits the decisions answered
	// from the cache; PDPCacheEvictions those dropped to make room.
	PDPRequests, PDPErrors, PDPCacheHits, PDPCacheEvictions uint64
}

type counters struct {
	allowed, denied, errors                     atomic.Uint64
	pdpRequests, pdpErrors, pdpHits, pdpEvicted atomic.Uint64
}

// An Engine holds the compiled rules of every tenant.
type Engine struct {
	tenants     map[string]*tenantRules
	groupsClaim string
	pdp         *pdpClient
	counters    *counters
}

type tenantRules struct {
	own        ruleSet             // the tenant's rules, for an upstream without its own
	byUpstream map[string]*ruleSet // the tenant's then the upstream's
}

// A ruleSet is the rules that apply to one upstream of a tenant, by phase.
type ruleSet struct {
	list, call []*rule
}

// Counters returns the running totals.
func (e *Engine) Counters() Counters {
	c := e.counters
	return Counters{
		Allowed: c.allowed.Load(), Denied: c.denied.Load(), Errors: c.errors.Load(),
		PDPRequests: c.pdpRequests.Load(), PDPErrors: c.pdpErrors.Load(),
		PDPCacheHits: c.pdpHits.Load(), PDPCacheEvictions: c.pdpEvicted.Load(),
	}
}

// Compile compiles the policy rules of cfg, which must have passed
// validation. The result is immutable; compile again for a new config.
func Compile(cfg *config.Config, o Options) (*Engine, error) {
	e := &Engine{
		tenants:     make(map[string]*tenantRules, len(cfg.Tenants)),
		groupsClaim: cfg.Policy.GroupsClaim,
		counters:    new(counters),
	}
	if e.groupsClaim == "" {
		e.groupsClaim = config.DefaultGroupsClaim
	}
	limit := uint64(config.DefaultCELCostLimit)
	if cfg.Policy.CELCostLimit > 0 {
		limit = uint64(cfg.Policy.CELCostLimit)
	}
	if p := cfg.Policy.PDP; p != nil {
		var err error
		if e.pdp, err = newPDPClient(p, o, e.counters); err != nil {
			return nil, fmt.Errorf("policy.pdp.tls: %w", err)
		}
	}
	for i := range cfg.Tenants {
		t := &cfg.Tenants[i]
		tr := &tenantRules{byUpstream: make(map[string]*ruleSet)}
		var own []*rule
		for j := range t.Policy {
			r, err := compileRule(&t.Policy[j], fmt.Sprintf("tenants[%d].policy[%d]", i, j), len(own), limit, e.pdp != nil)
			if err != nil {
				return nil, err
			}
			own = append(own, r)
		}
		tr.own = split(own)
		for k := range t.Upstreams {
			tu := &t.Upstreams[k]
			if len(tu.Policy) == 0 {
				continue
			}
			all := append([]*rule(nil), own...)
			for j := range tu.Policy {
				r, err := compileRule(&tu.Policy[j], fmt.Sprintf("tenants[%d].upstreams[%d].policy[%d]", i, k, j), len(all), limit, e.pdp != nil)
				if err != nil {
					return nil, err
				}
				all = append(all, r)
			}
			rs := split(all)
			tr.byUpstream[tu.Name] = &rs
		}
		e.tenants[t.ID] = tr
	}
	return e, nil
}

func split(rules []*rule) ruleSet {
	var rs ruleSet
	for _, r := range rules {
		if r.phase == PhaseCall {
			rs.call = append(rs.call, r)
		} else {
			rs.list = append(rs.list, r)
		}
	}
	return rs
}

// rules returns the rules for an upstream of a tenant; nil when the
// tenant has none.
func (e *Engine) rules(tenantID, upstream string) *ruleSet {
	tr := e.tenants[tenantID]
	if tr == nil {
		return nil
	}
	if rs := tr.byUpstream[upstream]; rs != nil {
		return rs
	}
	return &tr.own
}

// HasRules reports whether any rule applies to a tenant's upstream: when
// none does, every decision is the default and the caller may skip
// asking.
func (e *Engine) HasRules(tenantID, upstream string) bool {
	rs := e.rules(tenantID, upstream)
	return rs != nil && len(rs.list)+len(rs.call) > 0
}

// Decide decides one input: in the list phase by the list-phase rules;
// in the call phase by them, then by the call-phase rules.
func (e *Engine) Decide(ctx context.Context, in *Input) Decision {
	st := newState(e, in)
	d := e.decide(ctx, st)
	e.count(&d)
	return d
}

func (e *Engine) count(d *Decision) {
	if d.Allow {
		e.counters.allowed.Add(1)
	} else {
		e.counters.denied.Add(1)
	}
	if d.Err != nil {
		e.counters.errors.Add(1)
	}
}

func (e *Engine) decide(ctx context.Context, st *state) Decision {
	rs := e.rules(st.in.Principal.Tenant, st.in.Upstream)
	if rs == nil {
		return Decision{Allow: true, Index: -1, Phase: st.in.Phase}
	}
	if !st.in.ListDecided || st.in.Phase == PhaseList {
		d, pending := e.phase(st, rs.list, PhaseList)
		if pending != nil {
			d = e.askPDP(ctx, st, pending, PhaseList)
		}
		if !d.Allow {
			d.Unknown = true
			d.AsResult = false
			return d
		}
		if st.in.Phase == PhaseList {
			return d
		}
	}
	d, pending := e.phase(st, rs.call, PhaseCall)
	if pending != nil {
		d = e.askPDP(ctx, st, pending, PhaseCall)
	}
	return d
}

// phase runs the rules of one phase on st: the decision of the first
// rule that applies, or the default; or, when that rule's effect is pdp,
// the rule, for the caller to ask the PDP.
func (e *Engine) phase(st *state, rules []*rule, ph Phase) (Decision, *rule) {
	for _, r := range rules {
		applies, d := r.applies(st)
		if d != nil {
			d.Phase = ph
			return *d, nil
		}
		if !applies {
			continue
		}
		if r.effect == effectPDP {
			return Decision{}, r
		}
		return r.decision(st, r.effect == effectAllow, ph, ByRule), nil
	}
	return Decision{Allow: true, Index: -1, Phase: ph}, nil
}

// DecideBatch decides the inputs of one list (phase list; an input of
// phase call is decided as by Decide), asking the PDP once for all those
// a pdp rule leaves to it. The decisions are in the inputs' order.
func (e *Engine) DecideBatch(ctx context.Context, ins []Input) []Decision {
	out := make([]Decision, len(ins))
	var waiting []int
	var pending []*rule
	var states []*state
	for i := range ins {
		in := &ins[i]
		st := newState(e, in)
		if in.Phase != PhaseList {
			out[i] = e.decide(ctx, st)
			continue
		}
		rs := e.rules(in.Principal.Tenant, in.Upstream)
		if rs == nil {
			out[i] = Decision{Allow: true, Index: -1}
			continue
		}
		d, r := e.phase(st, rs.list, PhaseList)
		if r != nil {
			waiting = append(waiting, i)
			pending = append(pending, r)
			states = append(states, st)
			continue
		}
		if !d.Allow {
			d.Unknown, d.AsResult = true, false
		}
		out[i] = d
	}
	if len(waiting) > 0 {
		for j, d := range e.askPDPBatch(ctx, states, pending) {
			if !d.Allow {
				d.Unknown, d.AsResult = true, false
			}
			out[waiting[j]] = d
		}
	}
	for i := range out {
		e.count(&out[i])
	}
	return out
}
