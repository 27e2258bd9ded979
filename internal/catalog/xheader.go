package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
)

// Custom headers from tool parameters (2026-07-28
// basic/transports/streamable-http, "Custom Headers from Tool
// Parameters"). A tool's inputSchema may mark primitive properties with
// x-mcp-header; a client mirrors their values into Mcp-Param-{Name}
// headers, and a server that reads the body checks that they agree. The
// gateway drops tool definitions whose annotations break the rules, as a
// conforming client must, and checks the headers of stateless calls.

// ParamHeader is one x-mcp-header annotation: the header's name part and
// the chain of properties leading to the annotated parameter.
type ParamHeader struct {
	name string
	path []string
	typ  string // "string", "integer" or "boolean"
}

// ParamHeaders returns the x-mcp-header annotations of a tool definition, or
// an error if any breaks the rules (then the tool must not be offered).
func ParamHeaders(tool json.RawMessage) ([]ParamHeader, error) {
	if !bytes.Contains(tool, []byte("x-mcp-header")) {
		return nil, nil // the common case, without parsing
	}
	o, err := jsonx.ParseValidObject(tool)
	if err != nil {
		return nil, err
	}
	schema := o.Get("inputSchema")
	if schema == nil {
		return nil, nil
	}
	var out []ParamHeader
	if err := walkSchema(schema, nil, true, &out); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, h := range out {
		k := strings.ToLower(h.name)
		if seen[k] {
			return nil, fmt.Errorf("x-mcp-header %q is not unique", h.name)
		}
		seen[k] = true
	}
	return out, nil
}

// walkSchema collects annotations reachable through properties only;
// reachable reports whether the schema at hand is. An annotation anywhere
// else invalidates the tool.
func walkSchema(schema json.RawMessage, path []string, reachable bool, out *[]ParamHeader) error {
	s := strings.TrimSpace(string(schema))
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil
	}
	if s[0] == '[' {
		elems, err := jsonx.ParseValidArray(schema)
		if err != nil {
			return err
		}
		for _, e := range elems {
			if err := walkSchema(e, path, false, out); err != nil {
				return err
			}
		}
		return nil
	}
	o, err := jsonx.ParseValidObject(schema)
	if err != nil {
		return err
	}
	if v := o.Get("x-mcp-header"); v != nil {
		if !reachable || len(path) == 0 {
			return errors.New("x-mcp-header on a parameter not reachable through properties alone")
		}
		var name string
		if json.Unmarshal(v, &name) != nil || !validToken(name) {
			return fmt.Errorf("x-mcp-header %s is not an HTTP field-name token", v)
		}
		typ, _ := o.GetString("type")
		if typ != "string" && typ != "integer" && typ != "boolean" {
			return fmt.Errorf("x-mcp-header %q on a parameter of type %q (string, integer or boolean only)", name, typ)
		}
		*out = append(*out, ParamHeader{name: name, path: append([]string(nil), path...), typ: typ})
	}
	for _, m := range o.Members {
		switch m.Name {
		case "properties":
			props, err := jsonx.ParseValidObject(m.Value)
			if err != nil {
				continue
			}
			for _, p := range props.Members {
				if err := walkSchema(p.Value, append(path, p.Name), reachable, out); err != nil {
					return err
				}
			}
		case "x-mcp-header", "type", "description", "title", "enum", "const", "default", "examples", "required":
		default:
			// items, oneOf, $defs, if/then/else...: nothing below is
			// statically reachable.
			if err := walkSchema(m.Value, path, false, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// CheckParamHeaders checks the Mcp-Param-* headers of a call against its
// arguments. It returns a description of the first disagreement, or "".
func CheckParamHeaders(hs []ParamHeader, args json.RawMessage, header http.Header) string {
	for _, h := range hs {
		val := valueAt(args, h.path)
		hv, present := header[http.CanonicalHeaderKey(protocol.HeaderParamPrefix+h.name)]
		if val == nil || string(val) == "null" {
			if present {
				return fmt.Sprintf("Mcp-Param-%s header present but the argument is absent", h.name)
			}
			continue
		}
		if !present || len(hv) != 1 {
			return fmt.Sprintf("required header Mcp-Param-%s is missing", h.name)
		}
		got, err := protocol.DecodeHeaderValue(hv[0])
		if err != nil {
			return fmt.Sprintf("Mcp-Param-%s header value is not valid: %v", h.name, err)
		}
		if !sameValue(h.typ, val, got) {
			return fmt.Sprintf("Mcp-Param-%s header value %q does not match body value %s", h.name, got, val)
		}
	}
	return ""
}

// valueAt returns the raw value at path in the arguments object, or nil.
func valueAt(args json.RawMessage, path []string) json.RawMessage {
	cur := args
	for _, k := range path {
		o, err := jsonx.ParseValidObject(cur)
		if err != nil {
			return nil
		}
		if cur = o.Get(k); cur == nil {
			return nil
		}
	}
	return cur
}

// sameValue compares a body value with its header form: strings as they
// are, integers numerically ("42" and 42.0 agree), booleans as true/false.
func sameValue(typ string, body json.RawMessage, header string) bool {
	switch typ {
	case "string":
		var s string
		return json.Unmarshal(body, &s) == nil && s == header
	case "boolean":
		return string(body) == header
	default:
		b, err1 := strconv.ParseFloat(string(body), 64)
		h, err2 := strconv.ParseFloat(strings.TrimSpace(header), 64)
		return err1 == nil && err2 == nil && b == h && !math.IsInf(b, 0)
	}
}

// HeaderMismatchError is a failed check of mirrored headers, answered with
// HTTP 400 and -32020.
type HeaderMismatchError struct{ Msg string }

func (e *HeaderMismatchError) Error() string { return "Header mismatch: " + e.Msg }

// ParamHeaderValues returns the Mcp-Param-* headers a conforming client
// sends with a call of these arguments (2026-07-28
// basic/transports/streamable-http, "Client Behavior"): the gateway is the
// client of a 2026-07-28 upstream. Nil when there are none.
func ParamHeaderValues(hs []ParamHeader, args json.RawMessage) http.Header {
	var out http.Header
	for _, h := range hs {
		val := valueAt(args, h.path)
		if val == nil || string(val) == "null" {
			continue
		}
		var s string
		switch h.typ {
		case "string":
			if json.Unmarshal(val, &s) != nil {
				continue
			}
		default:
			s = string(val)
		}
		if out == nil {
			out = make(http.Header, len(hs))
		}
		out.Set(protocol.HeaderParamPrefix+h.name, protocol.EncodeHeaderValue(s))
	}
	return out
}
