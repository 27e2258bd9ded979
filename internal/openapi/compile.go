package openapi

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
)

// Options says which operations become tools and where requests go.
type Options struct {
	// Name is the upstream's name, for the server's identity.
	Name string
	// DocumentURL is where the document came from: a file path or an
	// http(s) URL, against which a relative server URL is resolved.
	DocumentURL string
	// BaseURL overrides the document's servers. Empty: its first server,
	// with the defaults of its variables.
	BaseURL string
	// Include selects the operations served: an operationId, "tag:NAME",
	// or "METHOD /path" where METHOD may be "*" and, in the path template,
	// "*" matches one segment and a final "**" the rest. Empty: every
	// operation with an operationId.
	Include []string
	// Exclude removes operations Include selected; the same selectors.
	Exclude []string
	// MaxSchemaBytes bounds each tool's inputSchema and outputSchema once
	// their references are expanded. 0: DefaultMaxSchemaBytes.
	MaxSchemaBytes int
}

const (
	// DefaultMaxSchemaBytes bounds a tool's schema after expansion.
	DefaultMaxSchemaBytes = 256 << 10
	// maxNameLen is the longest tool name (2025-11-25 server/tools).
	maxNameLen = 128
	// maxInstructions bounds the instructions taken from the document.
	maxInstructions = 4 << 10
)

// An API is a compiled document: its tools and how to call each. It is
// immutable and safe for concurrent use.
type API struct {
	name, version string
	instructions  string
	base          *url.URL
	tools         []json.RawMessage
	ops           map[string]*operation
	warnings      []string
	digest        string
}

// Tools returns the tools, each an MCP Tool object, sorted by path and
// method.
func (a *API) Tools() []json.RawMessage { return a.tools }

// Warnings says what was skipped or simplified, and why.
func (a *API) Warnings() []string { return a.warnings }

// Digest is the SHA-256, in hex, of the document and the options: equal
// digests make equal tools and requests.
func (a *API) Digest() string { return a.digest }

// BaseURL is where the requests go.
func (a *API) BaseURL() string { return a.base.String() }

// An operation is what a tools/call of one tool sends.
type operation struct {
	method string
	path   string // the template, from the document
	params []param
	// body is set when the operation takes a JSON body, as argument "body".
	body, bodyRequired bool
	// structured is set when the tool has an outputSchema.
	structured bool
}

// A param is one parameter of an operation.
type param struct {
	name     string // in the document
	arg      string // the argument's name
	in       string
	required bool
	style    string
	explode  bool
	// asJSON is set for a parameter given by content, not schema: its
	// value is sent as JSON text.
	asJSON bool
}

// methods are the operation methods, in the order tools are listed.
var methods = []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete,
	http.MethodOptions, http.MethodHead, http.MethodPatch, http.MethodTrace}

// Compile parses doc and maps its operations to tools. It does no network
// I/O: a $ref to another document is an error.
func Compile(doc []byte, opts Options) (*API, error) {
	if opts.MaxSchemaBytes <= 0 {
		opts.MaxSchemaBytes = DefaultMaxSchemaBytes
	}
	include, err := parseSelectors("include", opts.Include)
	if err != nil {
		return nil, err
	}
	exclude, err := parseSelectors("exclude", opts.Exclude)
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	t, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("not an OpenAPI document: %v", shorten(err.Error()))
	}
	if !strings.HasPrefix(t.OpenAPI, "3.0") && !strings.HasPrefix(t.OpenAPI, "3.1") {
		return nil, fmt.Errorf("openapi %q: only 3.0 and 3.1 documents are served", t.OpenAPI)
	}
	tree, err := documentTree(t)
	if err != nil {
		return nil, err
	}
	a := &API{name: opts.Name, ops: make(map[string]*operation)}
	if t.Info != nil {
		a.version = t.Info.Version
		if a.name == "" {
			a.name = t.Info.Title
		}
		a.instructions = truncate(t.Info.Description, maxInstructions)
	}
	if a.base, err = baseURL(t, opts); err != nil {
		return nil, err
	}
	c := &compiler{api: a, tree: tree, maxBytes: opts.MaxSchemaBytes, byName: make(map[string]string)}
	if t.Paths != nil {
		paths := t.Paths.Map()
		for _, path := range slices.Sorted(maps.Keys(paths)) {
			item := paths[path]
			ops := item.Operations()
			for _, m := range methods {
				op := ops[m]
				if op == nil {
					continue
				}
				if !selected(include, exclude, m, path, op) {
					continue
				}
				if err := c.operation(m, path, item, op); err != nil {
					return nil, err
				}
			}
		}
	}
	h := sha256.New()
	h.Write(doc)
	fmt.Fprintf(h, "\x00%q\x00%q\x00%q\x00%q\x00%q\x00%d", opts.Name, opts.DocumentURL, opts.BaseURL, opts.Include, opts.Exclude, opts.MaxSchemaBytes)
	a.digest = hex.EncodeToString(h.Sum(nil))
	return a, nil
}

// documentTree is the document as generic JSON, which local $refs point
// into.
func documentTree(t *openapi3.T) (any, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("not an OpenAPI document: %v", shorten(err.Error()))
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return nil, err
	}
	return tree, nil
}

// baseURL is where requests go: opts.BaseURL, else the first server's URL
// with its variables' defaults, resolved against the document's URL.
func baseURL(t *openapi3.T, opts Options) (*url.URL, error) {
	raw := opts.BaseURL
	if raw == "" {
		if len(t.Servers) == 0 || t.Servers[0] == nil {
			return nil, errors.New("the document names no server: set openapi.base_url")
		}
		s := t.Servers[0]
		raw = s.URL
		for name, v := range s.Variables {
			if v != nil {
				raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
			}
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("server URL %q does not parse", raw)
	}
	if !u.IsAbs() {
		doc, err := url.Parse(opts.DocumentURL)
		if err != nil || (doc.Scheme != "http" && doc.Scheme != "https") {
			return nil, fmt.Errorf("server URL %q is relative and the document was not fetched from a URL: set openapi.base_url", raw)
		}
		u = doc.ResolveReference(u)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q is not an http or https URL", u.Redacted())
	}
	if u.User != nil {
		return nil, errors.New("the server URL must not contain credentials")
	}
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// A compiler maps operations to tools.
type compiler struct {
	api      *API
	tree     any
	maxBytes int
	byName   map[string]string // tool name -> "METHOD path"
}

func (c *compiler) warnf(format string, args ...any) {
	c.api.warnings = append(c.api.warnings, fmt.Sprintf(format, args...))
}

// operation adds the tool of method path, or skips it with a warning.
func (c *compiler) operation(method, path string, item *openapi3.PathItem, op *openapi3.Operation) error {
	where := method + " " + path
	name := op.OperationID
	if name == "" {
		name = strings.ToLower(method) + "_" + strings.Trim(path, "/")
	}
	name = sanitize(name)
	if prev, ok := c.byName[name]; ok {
		return fmt.Errorf("operations %s and %s both make the tool name %q: give one another operationId, or exclude it", prev, where, name)
	}

	o := &operation{method: method, path: path}
	props := map[string]any{}
	var required []string
	// Path-level parameters, replaced by the operation's of the same name
	// and location.
	var refs []*openapi3.ParameterRef
	for _, pr := range op.Parameters {
		refs = append(refs, pr)
	}
	for _, pr := range item.Parameters {
		if pr == nil || pr.Value == nil {
			continue
		}
		if !slices.ContainsFunc(op.Parameters, func(o *openapi3.ParameterRef) bool {
			return o != nil && o.Value != nil && o.Value.Name == pr.Value.Name && o.Value.In == pr.Value.In
		}) {
			refs = append(refs, pr)
		}
	}
	seen := map[string]string{} // argument name -> location
	for _, pr := range refs {
		if pr == nil || pr.Value == nil {
			continue
		}
		p := pr.Value
		if p.In == openapi3.ParameterInHeader && slices.Contains([]string{"Accept", "Content-Type", "Authorization"}, http.CanonicalHeaderKey(p.Name)) {
			continue // OpenAPI 3.x "Parameter Object": ignored
		}
		pa := param{name: p.Name, arg: p.Name, in: p.In, required: p.Required || p.In == openapi3.ParameterInPath}
		pa.style, pa.explode = styleOf(p)
		switch {
		case p.In == openapi3.ParameterInPath && pa.style != "simple":
			c.warnf("%s: skipped: path parameter %q has style %q; only simple is supported", where, p.Name, pa.style)
			return nil
		case p.In == openapi3.ParameterInQuery && !slices.Contains([]string{"form", "spaceDelimited", "pipeDelimited", "deepObject"}, pa.style),
			p.In == openapi3.ParameterInHeader && pa.style != "simple",
			p.In == openapi3.ParameterInCookie && pa.style != "form":
			if pa.required {
				c.warnf("%s: skipped: required %s parameter %q has unsupported style %q", where, p.In, p.Name, pa.style)
				return nil
			}
			c.warnf("%s: %s parameter %q left out: style %q is not supported", where, p.In, p.Name, pa.style)
			continue
		}
		var schema any = map[string]any{}
		switch {
		case p.Schema != nil:
			s, err := c.schema(p.Schema, where)
			if err != nil {
				return err
			}
			schema = s
		case len(p.Content) > 0:
			if mt := jsonMedia(p.Content); mt != nil && mt.Schema != nil {
				s, err := c.schema(mt.Schema, where)
				if err != nil {
					return err
				}
				schema = s
			}
			pa.asJSON = true
		}
		if m, ok := schema.(map[string]any); ok && p.Description != "" {
			if _, has := m["description"]; !has {
				m["description"] = p.Description
			}
		}
		if loc, dup := seen[pa.arg]; dup || pa.arg == "body" {
			pa.arg = p.In + "_" + p.Name
			if dup {
				c.warnf("%s: parameter %q is both a %s and a %s parameter: the %s one is argument %q", where, p.Name, loc, p.In, p.In, pa.arg)
			}
		}
		seen[pa.arg] = p.In
		props[pa.arg] = schema
		if pa.required {
			required = append(required, pa.arg)
		}
		o.params = append(o.params, pa)
	}
	if rb := op.RequestBody; rb != nil && rb.Value != nil {
		if mt := jsonMedia(rb.Value.Content); mt != nil {
			var schema any = map[string]any{}
			if mt.Schema != nil {
				s, err := c.schema(mt.Schema, where)
				if err != nil {
					return err
				}
				schema = s
			}
			if m, ok := schema.(map[string]any); ok && rb.Value.Description != "" {
				if _, has := m["description"]; !has {
					m["description"] = rb.Value.Description
				}
			}
			props["body"] = schema
			o.body, o.bodyRequired = true, rb.Value.Required
			if rb.Value.Required {
				required = append(required, "body")
			}
		} else if rb.Value.Required {
			c.warnf("%s: skipped: its request body is required and is not JSON (%s)", where, strings.Join(slices.Sorted(maps.Keys(rb.Value.Content)), ", "))
			return nil
		} else {
			c.warnf("%s: its request body is left out: it is not JSON", where)
		}
	}
	input := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		input["required"] = required
	}
	tool := map[string]any{"name": name, "inputSchema": input, "annotations": annotations(method)}
	if op.Summary != "" {
		tool["title"] = op.Summary
	}
	if d := cmp.Or(op.Description, op.Summary); d != "" {
		tool["description"] = d
	}
	if out, ok, err := c.output(op, where); err != nil {
		return err
	} else if ok {
		tool["outputSchema"] = out
		o.structured = true
	}
	b, err := json.Marshal(tool)
	if err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	if len(b) > 2*c.maxBytes {
		c.warnf("%s: skipped: its tool definition is %d bytes, more than %d", where, len(b), 2*c.maxBytes)
		return nil
	}
	c.byName[name] = where
	c.api.ops[name] = o
	c.api.tools = append(c.api.tools, b)
	return nil
}

// output returns the outputSchema of op: its first 2xx JSON response's
// schema, when that is an object schema.
func (c *compiler) output(op *openapi3.Operation, where string) (any, bool, error) {
	if op.Responses == nil {
		return nil, false, nil
	}
	rs := op.Responses.Map()
	codes := slices.Sorted(maps.Keys(rs))
	for _, code := range codes {
		if !(len(code) == 3 && code[0] == '2') && code != "2XX" {
			continue
		}
		r := rs[code]
		if r == nil || r.Value == nil {
			return nil, false, nil
		}
		mt := jsonMedia(r.Value.Content)
		if mt == nil || mt.Schema == nil {
			return nil, false, nil
		}
		s, err := c.schema(mt.Schema, where)
		if err != nil {
			return nil, false, err
		}
		m, ok := s.(map[string]any)
		if !ok || !isObjectType(m["type"]) {
			return nil, false, nil
		}
		return m, true, nil
	}
	return nil, false, nil
}

func isObjectType(t any) bool {
	switch t := t.(type) {
	case string:
		return t == "object"
	case []any:
		return len(t) == 1 && t[0] == "object"
	}
	return false
}

// annotations are the hints the method gives.
func annotations(method string) map[string]any {
	a := map[string]any{"openWorldHint": true}
	switch method {
	case http.MethodGet, http.MethodHead:
		a["readOnlyHint"], a["idempotentHint"] = true, true
	case http.MethodPut:
		a["readOnlyHint"], a["idempotentHint"] = false, true
	case http.MethodDelete:
		a["readOnlyHint"], a["destructiveHint"], a["idempotentHint"] = false, true, true
	default:
		a["readOnlyHint"] = false
	}
	return a
}

// styleOf returns p's style and explode, with the defaults of its
// location (OpenAPI 3.x "Style Values").
func styleOf(p *openapi3.Parameter) (string, bool) {
	style := p.Style
	if style == "" {
		switch p.In {
		case openapi3.ParameterInQuery, openapi3.ParameterInCookie:
			style = "form"
		default:
			style = "simple"
		}
	}
	explode := style == "form"
	if p.Explode != nil {
		explode = *p.Explode
	}
	return style, explode
}

// jsonMedia returns the JSON media type of content: application/json, a
// +json type, or nil.
func jsonMedia(content openapi3.Content) *openapi3.MediaType {
	if mt := content.Get("application/json"); mt != nil {
		return mt
	}
	for _, k := range slices.Sorted(maps.Keys(content)) {
		base, _, _ := strings.Cut(strings.ToLower(k), ";")
		if strings.HasSuffix(strings.TrimSpace(base), "+json") {
			return content[k]
		}
	}
	return nil
}

// sanitize makes s a valid tool name.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > maxNameLen {
		b = b[:maxNameLen]
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

// A selector picks operations.
type selector struct {
	id, tag, method string
	path            []string // segments; "*" one, a final "**" the rest
}

func parseSelectors(key string, ss []string) ([]selector, error) {
	var out []selector
	for _, s := range ss {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			return nil, fmt.Errorf("%s: an empty selector", key)
		case strings.HasPrefix(s, "tag:"):
			out = append(out, selector{tag: strings.TrimPrefix(s, "tag:")})
		case strings.Contains(s, " "):
			m, p, _ := strings.Cut(s, " ")
			p = strings.TrimSpace(p)
			if !strings.HasPrefix(p, "/") {
				return nil, fmt.Errorf("%s: selector %q: the path must start with /", key, s)
			}
			segs := strings.Split(strings.Trim(p, "/"), "/")
			if i := slices.Index(segs, "**"); i >= 0 && i != len(segs)-1 {
				return nil, fmt.Errorf("%s: selector %q: ** may only end the path", key, s)
			}
			out = append(out, selector{method: strings.ToUpper(m), path: segs})
		default:
			out = append(out, selector{id: s})
		}
	}
	return out, nil
}

func (s selector) matches(method, path string, op *openapi3.Operation) bool {
	switch {
	case s.id != "":
		return op.OperationID == s.id
	case s.tag != "":
		return slices.Contains(op.Tags, s.tag)
	}
	if s.method != "*" && s.method != method {
		return false
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range s.path {
		if p == "**" {
			return true
		}
		if i >= len(segs) || (p != "*" && p != segs[i]) {
			return false
		}
	}
	return len(segs) == len(s.path)
}

// selected reports whether the operation is served.
func selected(include, exclude []selector, method, path string, op *openapi3.Operation) bool {
	in := false
	if len(include) == 0 {
		in = op.OperationID != ""
	} else {
		for _, s := range include {
			if s.matches(method, path, op) {
				in = true
				break
			}
		}
	}
	if !in {
		return false
	}
	for _, s := range exclude {
		if s.matches(method, path, op) {
			return false
		}
	}
	return true
}

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// shorten bounds an error message from the parser.
func shorten(s string) string { return truncate(s, 300) }
