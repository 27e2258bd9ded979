// Package celenv declares the CEL environment of policy rules (the
// variables a `cel:` condition may read, and their types) and checks an
// expression against it: parsed, type-checked to bool, and refused when
// its estimated worst-case cost exceeds a limit.
//
// It is a package of its own, without the gateway's config, so that
// config validation (which reports a bad expression with its YAML line)
// and the policy engine (which compiles and runs it) share one
// declaration.
package celenv

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
)

// The variables of the environment. Every one is declared with its type,
// so that a misspelt name or a wrong type is an error at load.
const (
	Subject   = "principal.subject"   // string
	Tenant    = "principal.tenant"    // string
	ClientID  = "principal.client_id" // string: azp, else client_id
	Scopes    = "principal.scopes"    // list(string)
	Groups    = "principal.groups"    // list(string): policy.groups_claim
	Claims    = "principal.claims"    // map(string, dyn)
	Method    = "request.method"      // string: "tools/call", "tools/list", ...
	Kind      = "request.kind"        // string: "tool", "prompt" or "resource"
	Name      = "request.name"        // string: as the tenant sees it
	Original  = "request.original"    // string: the upstream's own name or URI
	Upstream  = "request.upstream"    // string
	Arguments = "arguments"           // map(string, dyn), phase call only
)

// Variables lists the variables of the call phase (the list phase has
// all but the last).
var Variables = [...]string{Subject, Tenant, ClientID, Scopes, Groups, Claims, Method, Kind, Name, Original, Upstream, Arguments}

// Size bounds assumed by the static cost estimate for what the variables
// hold: a list or map of at most MaxElems entries, a string of at most
// MaxStringBytes. The runtime cost limit holds whatever the input is.
const (
	MaxElems       = 64
	MaxStringBytes = 1024
)

var (
	once    sync.Once
	envs    [2]*cel.Env // [0]: list phase, [1]: call phase
	envsErr error
)

// Env returns the environment of a phase: with call set, the call phase's
// (arguments declared), else the list phase's. The result is shared and
// safe for concurrent use.
func Env(call bool) (*cel.Env, error) {
	once.Do(func() {
		base := []cel.EnvOption{
			cel.Variable(Subject, cel.StringType),
			cel.Variable(Tenant, cel.StringType),
			cel.Variable(ClientID, cel.StringType),
			cel.Variable(Scopes, cel.ListType(cel.StringType)),
			cel.Variable(Groups, cel.ListType(cel.StringType)),
			cel.Variable(Claims, cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable(Method, cel.StringType),
			cel.Variable(Kind, cel.StringType),
			cel.Variable(Name, cel.StringType),
			cel.Variable(Original, cel.StringType),
			cel.Variable(Upstream, cel.StringType),
		}
		envs[0], envsErr = cel.NewEnv(base...)
		if envsErr != nil {
			return
		}
		envs[1], envsErr = envs[0].Extend(cel.Variable(Arguments, cel.MapType(cel.StringType, cel.DynType)))
	})
	if envsErr != nil {
		return nil, envsErr
	}
	if call {
		return envs[1], nil
	}
	return envs[0], nil
}

// ErrReadsArguments is returned by [Check] for a list-phase expression
// that would compile in the call phase: it reads arguments, which a list
// has none of.
var ErrReadsArguments = errors.New(`reads "arguments", which exist only in phase "call"`)

// Check parses and type-checks expr in the environment of its phase,
// requires it to be a bool, and estimates its worst-case cost: above
// limit (when limit > 0) it is refused. The error says what is wrong
// and where in expr.
func Check(expr string, call bool, limit uint64) (*cel.Ast, error) {
	env, err := Env(call)
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		if !call {
			if other, _ := Env(true); other != nil {
				if _, iss2 := other.Compile(expr); iss2.Err() == nil {
					return nil, ErrReadsArguments
				}
			}
		}
		return nil, fmt.Errorf("%s", oneLine(iss.Err().Error()))
	}
	if !ast.OutputType().IsExactType(types.BoolType) {
		return nil, fmt.Errorf("must be a bool expression, is %s", ast.OutputType())
	}
	if limit > 0 {
		est, err := env.EstimateCost(ast, sizes{})
		if err != nil {
			return nil, fmt.Errorf("cost estimate: %v", err)
		}
		if est.Max > limit {
			return nil, fmt.Errorf("estimated worst-case cost %s exceeds the limit %d (policy.cel_cost_limit)", costString(est.Max), limit)
		}
	}
	return ast, nil
}

func costString(c uint64) string {
	if c == ^uint64(0) {
		return "unbounded"
	}
	return fmt.Sprint(c)
}

// oneLine joins the lines of a CEL error (which points at the column
// with a caret on lines of its own) into one, for a Problem.
func oneLine(s string) string {
	s = strings.TrimPrefix(s, "ERROR: <input>:")
	lines := strings.Split(s, "\n")
	out := lines[:0]
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.Trim(l, "|.^ ") == "" || strings.HasPrefix(l, "|") {
			continue
		}
		l = strings.TrimPrefix(l, "ERROR: <input>:")
		out = append(out, l)
	}
	return "at " + strings.Join(out, "; ")
}

// sizes bounds the sizes of the variables for the cost estimate.
type sizes struct{}

func (sizes) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if len(n.Path()) == 0 {
		return nil
	}
	switch n.Type().Kind() {
	case types.StringKind, types.BytesKind:
		e := cost.RangedSizeEstimate(0, MaxStringBytes)
		return &e
	case types.ListKind, types.MapKind:
		e := cost.RangedSizeEstimate(0, MaxElems)
		return &e
	}
	return nil
}

func (sizes) EstimateCallCost(function, overloadID string, target *cost.AstNode, args []cost.AstNode) *cost.CallEstimate {
	return nil
}
