package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"cel.dev/cel-go/interpreter"

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
	args       map[string]any
	argsErr    error
	haveArgs   bool
	kindName   string

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

// arguments decodes the arguments, once.
func (st *state) arguments() (map[string]any, error) {
	if !st.haveArgs {
		st.haveArgs = true
		st.args, st.argsErr = decodeArguments(st.in.Arguments)
	}
	return st.args, st.argsErr
}

// decodeArguments decodes a call's arguments within the bounds. Absent
// or null arguments are an empty object.
func decodeArguments(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	if len(raw) > MaxArgumentBytes || raw[0] != '{' || tooDeep(raw, MaxArgumentDepth) {
		return nil, ErrArguments
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, ErrArguments
	}
	return m, nil
}

// tooDeep reports whether the JSON text b nests objects and arrays
// deeper than max, without decoding it.
func tooDeep(b []byte, max int) bool {
	depth := 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > max {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
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

func (a *activation) ResolveName(name string) (any, bool) {
	st := (*state)(a)
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
		args, err := st.arguments()
		if err != nil {
			// CEL reports a resolution failure as an error: the rule
			// fails closed.
			return nil, false
		}
		return args, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }
