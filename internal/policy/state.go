package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/policy/celenv"
)

// Bounds on the arguments the engine decodes: beyond them, a rule that
// reads the arguments fails closed (the call is refused).
const (
	// MaxArgumentBytes bounds the JSON of a call's arguments.
	MaxArgumentBytes = 1 << 20
	// MaxArgumentDepth bounds the nesting of objects and arrays in it.
	MaxArgumentDepth = 32
)

// ErrArguments is a call's arguments the engine will not read: not a
// JSON object, larger than MaxArgumentBytes or nested deeper than
// MaxArgumentDepth.
var ErrArguments = errors.New("arguments are not a JSON object within the policy engine's bounds")

type why uint8

const (
	whyNone why = iota
	whyWhen
	whyUnless
)

// state is one decision in the making: its input and what was derived
// from it, each at most once.
type state struct {
	e  *Engine
	in *Input

	groupList  []string
	haveGroups bool
	client     string
	haveClient bool
	// The call's arguments: parsed into members once, and each member
	// decoded when a rule first needs it (a rule that compares one short
	// argument does not pay for decoding a long one).
	argObj   *jsonx.Object
	argsErr  error
	haveArgs bool
	args     map[string]any
	argsAll  bool
	kindName string

	// vals holds the CEL variables made so far, by their index in
	// celenv.Variables.
	vals [len(celenv.Variables)]ref.Val

	// why and miss are what the rule being evaluated found: which of its
	// conditions decided, and which argument matcher.
	why  why
	miss *argMatch
}

func newState(e *Engine, in *Input) *state {
	if in.Principal == nil {
		in.Principal = &Principal{}
	}
	return &state{e: e, in: in}
}

// groups returns the principal's groups: the groups claim, a string or
// an array of strings.
func (st *state) groups() []string {
	if st.haveGroups {
		return st.groupList
	}
	st.haveGroups = true
	v, _ := claimValue(st.in.Principal.Claims, st.e.groupsClaim)
	switch v := v.(type) {
	case string:
		st.groupList = []string{v}
	case []string:
		st.groupList = v
	case []any:
		st.groupList = make([]string, 0, len(v))
		for _, g := range v {
			if s, ok := g.(string); ok {
				st.groupList = append(st.groupList, s)
			}
		}
	}
	return st.groupList
}

// clientID returns the principal's client: ClientID, else the claim azp,
// else client_id.
func (st *state) clientID() string {
	if st.haveClient {
		return st.client
	}
	st.haveClient = true
	p := st.in.Principal
	st.client = p.ClientID
	if st.client == "" {
		for _, c := range []string{"azp", "client_id"} {
			if s, ok := p.Claims[c].(string); ok && s != "" {
				st.client = s
				break
			}
		}
	}
	return st.client
}

// argNeed is what a rule reads of the arguments: the top-level members
// names, or all of them.
type argNeed struct {
	names []string
	all   bool
}

func (n argNeed) none() bool { return !n.all && len(n.names) == 0 }

// add makes n cover m too.
func (n *argNeed) add(m argNeed) {
	n.all = n.all || m.all
	for _, name := range m.names {
		if !slices.Contains(n.names, name) {
			n.names = append(n.names, name)
		}
	}
}

// arguments returns the call's arguments with at least the members n
// needs decoded (absent ones stay absent). Each member is decoded at most
// once per decision.
func (st *state) arguments(n argNeed) (map[string]any, error) {
	if !st.haveArgs {
		st.haveArgs = true
		st.argObj, st.argsErr = parseArguments(st.in.Arguments)
		if st.argsErr == nil {
			st.args = make(map[string]any, len(st.argObj.Members))
		}
	}
	if st.argsErr != nil || st.argsAll {
		return st.args, st.argsErr
	}
	if n.all {
		st.argsAll = true
		for i := range st.argObj.Members {
			if err := st.decodeMember(&st.argObj.Members[i]); err != nil {
				return nil, err
			}
		}
		return st.args, nil
	}
	for _, name := range n.names {
		for i := range st.argObj.Members {
			if st.argObj.Members[i].Name == name {
				if err := st.decodeMember(&st.argObj.Members[i]); err != nil {
					return nil, err
				}
				break
			}
		}
	}
	return st.args, nil
}

func (st *state) decodeMember(m *jsonx.Member) error {
	if _, done := st.args[m.Name]; done {
		return nil
	}
	if s, ok := plainString(m.Value); ok {
		st.args[m.Name] = s
		return nil
	}
	v, err := jsonx.DecodeValid(m.Value)
	if err == nil {
		v, err = floats(v)
	}
	if err != nil {
		st.args, st.argsErr = nil, ErrArguments
		return ErrArguments
	}
	st.args[m.Name] = v
	return nil
}

// plainString returns the JSON string v, valid JSON, without copying it
// when it needs no unescaping and is valid UTF-8 (a long text argument
// usually is): the string aliases the call's arguments, which nothing
// changes while the decision is made, and no decoded value outlives it.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return "", false
	}
	in := v[1 : len(v)-1]
	if len(in) == 0 {
		return "", true
	}
	// No control characters: the arguments passed jsonx.ValidWithin.
	if !utf8.Valid(in) {
		return "", false
	}
	return unsafe.String(&in[0], len(in)), true
}

// parseArguments splits a call's arguments into members within the
// bounds. Absent or null arguments are an empty object. A member name
// that occurs twice is refused: the engine and the upstream must not
// read different values under one name.
func parseArguments(raw json.RawMessage) (*jsonx.Object, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return &jsonx.Object{}, nil
	}
	if len(raw) > MaxArgumentBytes || raw[0] != '{' || !jsonx.ValidWithin(raw, MaxArgumentDepth) {
		return nil, ErrArguments
	}
	o, err := jsonx.ParseValidObject(raw)
	if err != nil {
		return nil, ErrArguments
	}
	return o, nil
}

// floats turns the numbers of v, a value jsonx decoded, into float64, as
// encoding/json decodes them into an any: what rules have always seen.
func floats(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, err
		}
		return f, nil
	case map[string]any:
		for k, e := range v {
			f, err := floats(e)
			if err != nil {
				return nil, err
			}
			v[k] = f
		}
	case []any:
		for i, e := range v {
			f, err := floats(e)
			if err != nil {
				return nil, err
			}
			v[i] = f
		}
	}
	return v, nil
}

func (st *state) kind() string {
	if st.kindName == "" {
		// tenant.Kind's names are plural ("tools"); CEL's request.kind
		// is the singular.
		st.kindName = strings.TrimSuffix(st.in.Kind.String(), "s")
	}
	return st.kindName
}

// activation is the state as CEL variables.
func (st *state) activation() interpreter.Activation { return (*activation)(st) }

type activation state

// ResolveName returns each variable as a CEL value made once per
// decision: every rule that reads it shares the conversion.
func (a *activation) ResolveName(name string) (any, bool) {
	st := (*state)(a)
	i := slices.Index(celenv.Variables[:], name)
	if i < 0 {
		return nil, false
	}
	if v := st.vals[i]; v != nil {
		return v, true
	}
	native, ok := st.native(name)
	if !ok {
		return nil, false
	}
	v := types.DefaultTypeAdapter.NativeToValue(native)
	st.vals[i] = v
	return v, true
}

// native returns variable name as a Go value.
func (st *state) native(name string) (any, bool) {
	p := st.in.Principal
	switch name {
	case celenv.Subject:
		return p.Subject, true
	case celenv.Tenant:
		return p.Tenant, true
	case celenv.ClientID:
		return st.clientID(), true
	case celenv.Scopes:
		if p.Scopes == nil {
			return []string{}, true
		}
		return p.Scopes, true
	case celenv.Groups:
		if g := st.groups(); g != nil {
			return g, true
		}
		return []string{}, true
	case celenv.Claims:
		if p.Claims == nil {
			return map[string]any{}, true
		}
		return p.Claims, true
	case celenv.Method:
		return st.in.Method, true
	case celenv.Kind:
		return st.kind(), true
	case celenv.Name:
		return st.in.Name, true
	case celenv.Original:
		return st.in.Original, true
	case celenv.Upstream:
		return st.in.Upstream, true
	case celenv.Arguments:
		// The condition decoded what its expression reads before
		// evaluating it (condition.holds); the map is shared, so what
		// later rules decode into it shows through the same value.
		if st.argsErr != nil || st.args == nil {
			// CEL reports a resolution failure as an error: the rule
			// fails closed.
			return nil, false
		}
		return st.args, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }
