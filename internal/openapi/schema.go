package openapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

const (
	// maxSchemaNodes bounds the nodes of one schema once its references
	// are expanded: a document of a few KiB can otherwise expand to an
	// exponential size (each property referring twice to the next schema).
	maxSchemaNodes = 20_000
	// maxSchemaDepth bounds its nesting.
	maxSchemaDepth = 64
)

// openAPIOnly are keywords of OpenAPI's schema object that JSON Schema
// does not have.
var openAPIOnly = []string{"discriminator", "xml", "externalDocs", "nullable", "example"}

// dataKeys hold values, not schemas: nothing in them is rewritten.
var dataKeys = map[string]bool{"example": true, "examples": true, "default": true, "const": true, "enum": true}

// schema returns ref as a JSON Schema with its local references expanded.
func (c *compiler) schema(ref *openapi3.SchemaRef, where string) (any, error) {
	b, err := json.Marshal(ref)
	if err != nil {
		return nil, fmt.Errorf("%s: a schema: %v", where, err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: a schema: %v", where, err)
	}
	x := &expander{c: c, where: where}
	out, err := x.expand(v, nil, 0)
	if err != nil {
		return nil, err
	}
	if x.cycle != "" {
		c.warnf("%s: schema %s refers to itself: inside itself it accepts any value", where, x.cycle)
	}
	if b, err := json.Marshal(out); err != nil || len(b) > c.maxBytes {
		return nil, fmt.Errorf("%s: a schema is more than %d bytes once its references are expanded", where, c.maxBytes)
	}
	return out, nil
}

// An expander expands one schema.
type expander struct {
	c     *compiler
	where string
	nodes int
	cycle string // the first reference found inside itself
}

func (x *expander) expand(v any, stack []string, depth int) (any, error) {
	x.nodes++
	if x.nodes > maxSchemaNodes || depth > maxSchemaDepth {
		return nil, fmt.Errorf("%s: a schema is too large or too deep once its references are expanded (more than %d nodes or %d levels)", x.where, maxSchemaNodes, maxSchemaDepth)
	}
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var err error
			if out[i], err = x.expand(e, stack, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			return x.ref(v, ref, stack, depth)
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			if dataKeys[k] {
				out[k] = e
				continue
			}
			var err error
			if out[k], err = x.expand(e, stack, depth+1); err != nil {
				return nil, err
			}
		}
		convert(out)
		return out, nil
	}
	return v, nil
}

// ref expands a schema that is a reference (with, in 3.1, keywords beside
// it, which are kept).
func (x *expander) ref(v map[string]any, ref string, stack []string, depth int) (any, error) {
	for _, s := range stack {
		if s == ref {
			if x.cycle == "" {
				x.cycle = ref
			}
			return map[string]any{}, nil
		}
	}
	target, ok := resolve(x.c.tree, ref)
	if !ok {
		return nil, fmt.Errorf("%s: $ref %q does not point into the document", x.where, ref)
	}
	t, err := x.expand(target, append(stack, ref), depth+1)
	if err != nil {
		return nil, err
	}
	if len(v) == 1 {
		return t, nil
	}
	m, ok := t.(map[string]any)
	if !ok {
		return t, nil
	}
	out := make(map[string]any, len(m)+len(v))
	for k, e := range m {
		out[k] = e
	}
	for k, e := range v {
		if k == "$ref" {
			continue
		}
		if dataKeys[k] {
			out[k] = e
			continue
		}
		if out[k], err = x.expand(e, stack, depth+1); err != nil {
			return nil, err
		}
	}
	convert(out)
	return out, nil
}

// convert turns the OpenAPI-only keywords of schema m into JSON Schema:
// nullable into a type union with null, example into examples; the
// others are dropped.
func convert(m map[string]any) {
	if n, _ := m["nullable"].(bool); n {
		switch t := m["type"].(type) {
		case string:
			m["type"] = []any{t, "null"}
		case []any:
			if !slices.Contains(t, any("null")) {
				m["type"] = append(t, "null")
			}
		}
	}
	if ex, ok := m["example"]; ok {
		if _, has := m["examples"]; !has {
			m["examples"] = []any{ex}
		}
	}
	for _, k := range openAPIOnly {
		delete(m, k)
	}
}

// resolve follows a local JSON pointer reference ("#/components/...").
func resolve(tree any, ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	if frag == "" {
		return tree, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false
	}
	cur := tree
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			if cur, ok = c[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
