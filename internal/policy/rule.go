package policy

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"cel.dev/cel-go/common/types"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types/ref"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/glob"
	"github.com/mcpgw/gateway/internal/policy/celenv"
	"github.com/mcpgw/gateway/internal/tenant"
)

type effect uint8

const (
	effectAllow effect = iota
	effectDeny
	effectPDP
)

// A rule is one compiled policy rule.
type rule struct {
	index      int
	path, name string
	phase      Phase
	effect     effect
	failOpen   bool // on_pdp_error: open
	pdpArgs    bool
	asResult   bool
	message    string

	upstreams []string
	// kinds holds the patterns by tenant.Kind; anyKind when none is set.
	kinds   [3][]string
	anyKind bool

	when, unless *condition
}

type condition struct {
	claims    []config.ClaimMatch
	groups    []string
	scopes    []string
	clientIDs []string
	args      []argMatch
	prog      cel.Program
	// progArgs is what prog reads of the arguments.
	progArgs argNeed
}

type argMatch struct {
	config.ArgumentMatch
	// tokens is the pointer split into its unescaped reference tokens,
	// or the name alone.
	tokens []string
	label  string // how the refusal names it: "repo", "/repo/owner"
}

func compileRule(cr *config.PolicyRule, path string, index int, limit uint64, havePDP bool) (*rule, error) {
	r := &rule{index: index, path: path, name: cr.Name, message: cr.Message}
	switch cr.Phase {
	case config.PhaseList:
		r.phase = PhaseList
	case config.PhaseCall:
		r.phase = PhaseCall
	default:
		return nil, fmt.Errorf("%s.phase: unknown phase %q", path, cr.Phase)
	}
	switch cr.Effect {
	case config.EffectAllow:
		r.effect = effectAllow
	case config.EffectDeny:
		r.effect = effectDeny
	case config.EffectPDP:
		if !havePDP {
			return nil, fmt.Errorf("%s.effect: pdp without policy.pdp", path)
		}
		r.effect = effectPDP
	default:
		return nil, fmt.Errorf("%s.effect: unknown effect %q", path, cr.Effect)
	}
	r.failOpen = cr.OnPDPError == config.FailOpen
	r.pdpArgs = cr.PDPArguments && r.phase == PhaseCall
	m := &cr.Match
	r.upstreams = m.Upstreams
	r.kinds = [3][]string{tenant.Tool: m.Tools, tenant.Prompt: m.Prompts, tenant.Resource: m.Resources}
	r.anyKind = m.Tools == nil && m.Prompts == nil && m.Resources == nil
	var err error
	call := r.phase == PhaseCall
	if r.when, err = compileCondition(cr.When, path+".when", call, limit); err != nil {
		return nil, err
	}
	if r.unless, err = compileCondition(cr.Unless, path+".unless", call, limit); err != nil {
		return nil, err
	}
	reads := r.when != nil && len(r.when.args) > 0 || r.unless != nil && len(r.unless.args) > 0
	switch cr.Refusal {
	case config.RefusalResult:
		r.asResult = true
	case config.RefusalError:
	default:
		r.asResult = call && reads
	}
	return r, nil
}

func compileCondition(c *config.PolicyCondition, path string, call bool, limit uint64) (*condition, error) {
	if c == nil {
		return nil, nil
	}
	out := &condition{claims: c.Claims, groups: c.Groups, scopes: c.Scopes, clientIDs: c.ClientIDs}
	for i, am := range c.Arguments {
		if !call {
			return nil, fmt.Errorf("%s.arguments[%d]: a list-phase rule cannot read arguments", path, i)
		}
		a := argMatch{ArgumentMatch: am}
		if am.Pointer != "" {
			a.label = am.Pointer
			for _, t := range strings.Split(am.Pointer[1:], "/") {
				a.tokens = append(a.tokens, strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~"))
			}
		} else {
			a.label, a.tokens = am.Name, []string{am.Name}
		}
		out.args = append(out.args, a)
	}
	if c.CEL != "" {
		ast, err := celenv.Check(c.CEL, call, limit)
		if err != nil {
			return nil, fmt.Errorf("%s.cel: %v", path, err)
		}
		env, _ := celenv.Env(call)
		opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
		if !boundedCost(ast, limit) {
			opts = append(opts, cel.CostLimit(limit), cel.CostTracking(byteCosts{}))
		}
		prg, err := env.Program(ast, opts...)
		if err != nil {
			return nil, fmt.Errorf("%s.cel: %v", path, err)
		}
		out.prog = prg
		out.progArgs = argumentsRead(ast)
	}
	return out, nil
}

// matches reports whether the rule's match selects in's item.
func (r *rule) matches(in *Input) bool {
	if r.upstreams != nil && !matchAny(r.upstreams, in.Upstream) {
		return false
	}
	if r.anyKind {
		return true
	}
	if int(in.Kind) >= len(r.kinds) {
		return false
	}
	pats := r.kinds[in.Kind]
	if pats == nil {
		return false
	}
	if in.Kind != tenant.Resource {
		return matchAny(pats, in.Original)
	}
	// A URI is matched as written and percent-decoded once: a deny must
	// catch either form, an allow must hold for both (as tenant rules
	// decide).
	dec, err := url.PathUnescape(in.Original)
	if err != nil || dec == in.Original {
		return matchAny(pats, in.Original) || err != nil && r.effect != effectAllow
	}
	if r.effect == effectAllow {
		return matchAny(pats, in.Original) && matchAny(pats, dec)
	}
	return matchAny(pats, in.Original) || matchAny(pats, dec)
}

func matchAny(pats []string, s string) bool {
	for _, p := range pats {
		if glob.Match(p, s) {
			return true
		}
	}
	return false
}

// applies reports whether r applies to st: it matches, when holds and
// unless does not. A non-nil Decision is a refusal on an error (a rule
// that cannot be evaluated fails closed, whatever its effect).
func (r *rule) applies(st *state) (bool, *Decision) {
	if !r.matches(st.in) {
		return false, nil
	}
	st.why, st.miss = whyNone, nil
	if r.when != nil {
		ok, miss, err := r.when.holds(st)
		if err != nil {
			return false, r.failure(st, err)
		}
		if !ok {
			return false, nil
		}
		st.why = whyWhen
		st.miss = miss // the matchers all held: say what the rule refuses
	}
	if r.unless != nil {
		ok, miss, err := r.unless.holds(st)
		if err != nil {
			return false, r.failure(st, err)
		}
		if ok {
			return false, nil
		}
		if miss != nil {
			st.why, st.miss = whyUnless, miss
		}
	}
	return true, nil
}

func (r *rule) failure(st *state, err error) *Decision {
	d := r.decision(st, false, r.phase, ByRule)
	d.Err = err
	d.Message = "the call could not be checked against policy rule " + r.label() + ": refused"
	return &d
}

func (r *rule) label() string {
	if r.name != "" {
		return strconv.Quote(r.name)
	}
	return strconv.Itoa(r.index)
}

// decision is r's decision to allow or not, with the refusal's message.
func (r *rule) decision(st *state, allow bool, ph Phase, by Source) Decision {
	d := Decision{Allow: allow, By: by, Phase: ph, Index: r.index, Path: r.path, Name: r.name}
	if allow {
		return d
	}
	d.AsResult = r.asResult
	var b strings.Builder
	b.WriteString("refused by policy rule ")
	b.WriteString(r.label())
	if a := st.miss; a != nil && by == ByRule {
		b.WriteString(": argument ")
		b.WriteString(strconv.Quote(a.label))
		b.WriteByte(' ')
		b.WriteString(a.rule(st.why == whyUnless))
	}
	if r.message != "" {
		b.WriteString(". ")
		b.WriteString(r.message)
	}
	d.Message = b.String()
	return d
}

// rule says what the matcher requires (must) or forbids.
func (a *argMatch) rule(must bool) string {
	var what string
	switch {
	case a.Glob != "":
		what = "match " + strconv.Quote(a.Glob)
	case a.OneOf != nil:
		q := make([]string, len(a.OneOf))
		for i, s := range a.OneOf {
			q[i] = strconv.Quote(s)
		}
		what = "be one of " + strings.Join(q, ", ")
	default:
		what = "be " + strconv.Quote(a.Equals)
	}
	if must {
		return "must " + what
	}
	return "must not " + what
}

// holds evaluates c on st. miss is, when c does not hold because of an
// argument matcher, that matcher; when c holds, the last argument matcher
// (what a deny refuses).
func (c *condition) holds(st *state) (ok bool, miss *argMatch, err error) {
	p := st.in.Principal
	for i := range c.claims {
		if !claimHolds(&c.claims[i], p.Claims) {
			return false, nil, nil
		}
	}
	if c.groups != nil {
		if !slices.ContainsFunc(st.groups(), func(g string) bool { return slices.Contains(c.groups, g) }) {
			return false, nil, nil
		}
	}
	for _, s := range c.scopes {
		if !slices.Contains(p.Scopes, s) {
			return false, nil, nil
		}
	}
	if c.clientIDs != nil && !slices.Contains(c.clientIDs, st.clientID()) {
		return false, nil, nil
	}
	for i := range c.args {
		a := &c.args[i]
		args, err := st.arguments(argNeed{names: a.tokens[:1]})
		if err != nil {
			return false, nil, err
		}
		if !a.holds(args) {
			return false, a, nil
		}
		miss = a
	}
	if c.prog != nil {
		if !c.progArgs.none() {
			if _, err := st.arguments(c.progArgs); err != nil {
				return false, nil, err
			}
		}
		out, _, err := c.prog.Eval(st.activation())
		if err != nil {
			return false, nil, fmt.Errorf("cel: %w", scrub(err))
		}
		b, isBool := out.Value().(bool)
		if !isBool {
			return false, nil, errors.New("cel: not a bool")
		}
		if !b {
			return false, nil, nil
		}
	}
	return true, miss, nil
}

func (a *argMatch) holds(args map[string]any) bool {
	v, ok := lookup(args, a.tokens)
	if !ok {
		return false
	}
	switch {
	case a.Glob != "":
		s, isStr := v.(string)
		return isStr && glob.Match(a.Glob, s)
	case a.OneOf != nil:
		s, ok := scalarString(v)
		return ok && slices.Contains(a.OneOf, s)
	default:
		s, ok := scalarString(v)
		return ok && s == a.Equals
	}
}

// claimHolds evaluates one claim matcher.
func claimHolds(m *config.ClaimMatch, claims map[string]any) bool {
	v, ok := claimValue(claims, m.Claim)
	if !ok {
		return false
	}
	switch {
	case m.Contains != "":
		switch v := v.(type) {
		case string:
			return slices.Contains(strings.Fields(v), m.Contains)
		case []any:
			return slices.ContainsFunc(v, func(e any) bool { s, ok := scalarString(e); return ok && s == m.Contains })
		case []string:
			return slices.Contains(v, m.Contains)
		}
		return false
	case m.OneOf != nil:
		s, ok := scalarString(v)
		return ok && slices.Contains(m.OneOf, s)
	default:
		s, ok := scalarString(v)
		return ok && s == m.Equals
	}
}

// claimValue finds a claim by name or, when no claim has that exact
// name, by a dotted path into nested objects (as tenant_claim does).
func claimValue(claims map[string]any, name string) (any, bool) {
	if v, ok := claims[name]; ok {
		return v, true
	}
	if !strings.Contains(name, ".") {
		return nil, false
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// scalarString returns a string, number or boolean in its JSON form
// (strings unquoted).
func scalarString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	}
	return "", false
}

// lookup follows reference tokens into decoded JSON.
func lookup(args map[string]any, tokens []string) (any, bool) {
	var cur any = args
	for _, t := range tokens {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) || t != strconv.Itoa(i) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// scrub keeps a CEL runtime error from quoting values (a "no such key"
// names the key, which the expression holds anyway; values never).
func scrub(err error) error {
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return errors.New(msg)
}

// byteCosts charges the comparison of two strings by their lengths in
// bytes, where CEL's standard tracker counts their runes one by one on
// every comparison (a 10 KB argument compared by five rules was a third
// of a decision). Bytes are at least as many as runes: the charge is the
// standard one or more, so the cost limit holds as strictly.
type byteCosts struct{}

func (byteCosts) CallCost(_, overload string, args []ref.Val, _ ref.Val) *uint64 {
	if overload != overloads.Equals && overload != overloads.NotEquals || len(args) != 2 {
		return nil
	}
	a, ok := args[0].(types.String)
	b, ok2 := args[1].(types.String)
	if !ok || !ok2 {
		return nil
	}
	c := uint64(math.Ceil(float64(min(len(a), len(b))) * cost.StringTraversalCostFactor))
	return &c
}
