package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mcpgw/gateway/internal/policy/celenv"
)

// policy checks the top-level policy settings and every tenant's policy
// rules; a cel condition is compiled and its cost estimated here, so that
// a typo in an expression is reported with its line.
func (v *validator) policy(c *Config) {
	p := &c.Policy
	nonNegative(v, "policy.cel_cost_limit", p.CELCostLimit)
	if pdp := p.PDP; pdp != nil {
		if pdp.URL == "" {
			v.addf("policy.pdp.url", "is required")
		} else {
			v.httpURL("policy.pdp.url", pdp.URL)
		}
		v.headers("policy.pdp.headers", pdp.Headers)
		v.upstreamTLS("policy.pdp.tls", pdp.URL, pdp.TLS)
		if a := pdp.Auth; a != nil {
			if a.Mode != AuthClientCredentials {
				v.addf("policy.pdp.auth.mode", "must be %s: the gateway authenticates as itself", AuthClientCredentials)
			} else {
				v.upstreamAuth("policy.pdp.auth", a)
			}
		}
		nonNegative(v, "policy.pdp.timeout", pdp.Timeout)
		nonNegative(v, "policy.pdp.cache_ttl", pdp.CacheTTL)
		nonNegative(v, "policy.pdp.cache_size", pdp.CacheSize)
	}
	limit := uint64(DefaultCELCostLimit)
	if p.CELCostLimit > 0 {
		limit = uint64(p.CELCostLimit)
	}
	for i := range c.Tenants {
		t := &c.Tenants[i]
		names := make(map[string]string) // rule name -> path of its rule
		tp := fmt.Sprintf("tenants[%d].policy", i)
		for j := range t.Policy {
			v.policyRule(fmt.Sprintf("%s[%d]", tp, j), &t.Policy[j], true, p.PDP != nil, limit, names)
		}
		for k := range t.Upstreams {
			up := fmt.Sprintf("tenants[%d].upstreams[%d].policy", i, k)
			for j := range t.Upstreams[k].Policy {
				v.policyRule(fmt.Sprintf("%s[%d]", up, j), &t.Upstreams[k].Policy[j], false, p.PDP != nil, limit, names)
			}
		}
	}
}

// policyRule checks one rule at path. tenantLevel says whether it is one
// of the tenant's own rules (which may match upstreams); names holds the
// rule names seen so far in the tenant.
func (v *validator) policyRule(path string, r *PolicyRule, tenantLevel, havePDP bool, limit uint64, names map[string]string) {
	if r.Name != "" {
		if strings.ContainsFunc(r.Name, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			v.addf(path+".name", "must not contain control characters")
		} else if other, ok := names[r.Name]; ok {
			v.addf(path+".name", "duplicate rule name %q (also %s)", r.Name, other)
		} else {
			names[r.Name] = path
		}
	}
	call := false
	switch r.Phase {
	case PhaseCall:
		call = true
	case PhaseList:
	case "":
		v.addf(path+".phase", "is required: %q (what the caller is shown) or %q (each call, with its arguments)", PhaseList, PhaseCall)
	default:
		v.addf(path+".phase", "unknown phase %q: must be %q or %q", r.Phase, PhaseList, PhaseCall)
	}
	switch r.Effect {
	case EffectAllow, EffectDeny:
	case EffectPDP:
		if !havePDP {
			v.addf(path+".effect", "is %q but policy.pdp is not configured", EffectPDP)
		}
	case "":
		v.addf(path+".effect", "is required: %q, %q or %q", EffectAllow, EffectDeny, EffectPDP)
	default:
		v.addf(path+".effect", "unknown effect %q: must be %q, %q or %q", r.Effect, EffectAllow, EffectDeny, EffectPDP)
	}
	switch r.OnPDPError {
	case "":
	case FailClosed, FailOpen:
		if r.Effect != EffectPDP {
			v.addf(path+".on_pdp_error", "applies to effect %q only", EffectPDP)
		}
	default:
		v.addf(path+".on_pdp_error", "unknown value %q: must be %q or %q", r.OnPDPError, FailClosed, FailOpen)
	}
	if r.PDPArguments {
		if r.Effect != EffectPDP {
			v.addf(path+".pdp_arguments", "applies to effect %q only", EffectPDP)
		} else if r.Phase == PhaseList {
			v.addf(path+".pdp_arguments", "a list-phase rule has no arguments to send: use phase %q", PhaseCall)
		}
	}
	switch r.Refusal {
	case "", RefusalResult, RefusalError:
	default:
		v.addf(path+".refusal", "unknown value %q: must be %q or %q", r.Refusal, RefusalResult, RefusalError)
	}

	m := &r.Match
	if m.Upstreams != nil && !tenantLevel {
		v.addf(path+".match.upstreams", "applies to a tenant's own rules only: this rule is an upstream's already")
	}
	for i, pat := range m.Upstreams {
		v.pattern(fmt.Sprintf("%s.match.upstreams[%d]", path, i), pat, false)
	}
	for i, pat := range m.Tools {
		v.pattern(fmt.Sprintf("%s.match.tools[%d]", path, i), pat, true)
	}
	for i, pat := range m.Prompts {
		v.pattern(fmt.Sprintf("%s.match.prompts[%d]", path, i), pat, false)
	}
	for i, pat := range m.Resources {
		v.pattern(fmt.Sprintf("%s.match.resources[%d]", path, i), pat, false)
	}
	v.policyCondition(path+".when", r.When, call, limit)
	v.policyCondition(path+".unless", r.Unless, call, limit)
}

// policyCondition checks a rule's when or unless at path; call says
// whether the rule is of phase call.
func (v *validator) policyCondition(path string, c *PolicyCondition, call bool, limit uint64) {
	if c == nil {
		return
	}
	for i, cm := range c.Claims {
		p := fmt.Sprintf("%s.claims[%d]", path, i)
		if cm.Claim == "" {
			v.addf(p+".claim", "is required")
		}
		if n := count(cm.Equals != "", cm.Contains != "", cm.OneOf != nil); n != 1 {
			v.addf(p, "must set exactly one of equals, contains and one_of")
		}
		v.nonEmptyItems(p+".one_of", cm.OneOf)
	}
	v.nonEmptyItems(path+".groups", c.Groups)
	v.scopes(path+".scopes", c.Scopes)
	v.nonEmptyItems(path+".client_ids", c.ClientIDs)
	for i, am := range c.Arguments {
		p := fmt.Sprintf("%s.arguments[%d]", path, i)
		if !call {
			v.addf(p, `a list-phase rule cannot read arguments (a list has none): use phase "call"`)
		}
		switch {
		case (am.Name == "") == (am.Pointer == ""):
			v.addf(p, "must set exactly one of name and pointer")
		case am.Pointer != "":
			if err := checkPointer(am.Pointer); err != nil {
				v.addf(p+".pointer", "%q is not a JSON pointer: %v", am.Pointer, err)
			}
		}
		if n := count(am.Equals != "", am.Glob != "", am.OneOf != nil); n != 1 {
			v.addf(p, "must set exactly one of equals, glob and one_of")
		}
		if am.Glob != "" {
			v.pattern(p+".glob", am.Glob, false)
		}
		v.nonEmptyItems(p+".one_of", am.OneOf)
	}
	if c.CEL != "" {
		if _, err := celenv.Check(c.CEL, call, limit); err != nil {
			if errors.Is(err, celenv.ErrReadsArguments) {
				v.addf(path+".cel", `a list-phase rule cannot read arguments (a list has none): use phase "call"`)
			} else {
				v.addf(path+".cel", "%v", err)
			}
		}
	}
}

// nonEmptyItems reports empty strings in a list.
func (v *validator) nonEmptyItems(path string, items []string) {
	for i, s := range items {
		if s == "" {
			v.addf(fmt.Sprintf("%s[%d]", path, i), "must not be empty")
		}
	}
}

// checkPointer checks an RFC 6901 JSON pointer: "" or "/"-separated
// tokens in which "~" is followed by "0" or "1". The whole document ("")
// is refused: a matcher compares one value.
func checkPointer(p string) error {
	if !strings.HasPrefix(p, "/") {
		return errors.New(`must start with "/"`)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || p[i+1] != '0' && p[i+1] != '1') {
			return errors.New(`"~" must be followed by "0" or "1"`)
		}
	}
	return nil
}

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
