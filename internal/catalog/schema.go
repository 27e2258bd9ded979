package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// Tool schemas: a listed tool's inputSchema and outputSchema are compiled
// on the first call that needs them and kept with the Listing they came
// in, so a refetched list (a new Listing) compiles them again and a
// dropped one frees them. Schemas are upstream output: nothing in one may
// make the gateway read a file or a URL (every $ref outside the schema
// fails to compile), and a schema the gateway does not compile is not
// enforced, never a reason to refuse the call; the upstream still checks
// its own arguments.

// Bounds on compiled schemas.
const (
	// maxSchemaBytes bounds one schema the gateway compiles; a larger one
	// is skipped (logged), since compiling costs memory in proportion.
	maxSchemaBytes = 64 << 10
	// maxProblemBytes bounds the message a violation gives the model.
	maxProblemBytes = 1 << 10
)

// maxCompiledBytes bounds the schema bytes compiled and kept per Listing;
// beyond it a schema is compiled for each call that needs it and not
// kept. The Listing owns them: they go when it is replaced or dropped. A
// variable, so that a test can exhaust it.
var maxCompiledBytes = 1 << 20

// schemaCache is one Listing's compiled tool schemas.
type schemaCache struct {
	log      *slog.Logger
	upstream string
	mu       sync.Mutex
	bytes    int // schema bytes of the entries kept
	m        map[schemaKey]*compiled
}

type schemaKey struct {
	tool   string // original name
	output bool
}

// compiled is one compiled schema, or why there is none (s nil).
type compiled struct {
	s    *jsonschema.Schema
	skip string
}

// schemaOf returns the compiled member field ("inputSchema" or
// "outputSchema") of the tool it, nil when the tool has none or it is not
// enforced.
func (sc *schemaCache) schemaOf(it *Item, output bool) *compiled {
	key := schemaKey{it.Original, output}
	sc.mu.Lock()
	c := sc.m[key]
	sc.mu.Unlock()
	if c != nil {
		return c.enforced()
	}
	field := "inputSchema"
	if output {
		field = "outputSchema"
	}
	var raw []byte
	if o, err := jsonx.ParseValidObject(it.Raw); err == nil {
		raw = o.Get(field)
	}
	c = compileSchema(raw)
	if c.skip != "" {
		sc.log.Warn("upstream tool schema not enforced", "upstream", sc.upstream, "tool", strconv.QuoteToASCII(truncate(it.Original, 80)),
			"schema", field, "reason", c.skip)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if prev := sc.m[key]; prev != nil {
		return prev.enforced() // compiled meanwhile by another call
	}
	if sc.bytes+len(raw) <= maxCompiledBytes {
		if sc.m == nil {
			sc.m = make(map[schemaKey]*compiled)
		}
		sc.m[key] = c
		sc.bytes += len(raw)
	}
	return c.enforced()
}

// enforced is c if it holds a schema to enforce, else nil.
func (c *compiled) enforced() *compiled {
	if c.s == nil {
		return nil
	}
	return c
}

// supportedDialect reports whether the gateway compiles schemas that
// declare $schema s: the drafts the validator implements. 2025-11-25
// basic/index, "Schema Dialect": an unsupported dialect is to be handled
// gracefully; the gateway skips the schema (the upstream is the one that
// declared it).
func supportedDialect(s string) bool {
	s = strings.TrimSuffix(s, "#")
	s, ok := strings.CutPrefix(s, "https://")
	if !ok {
		s, _ = strings.CutPrefix(s, "http://")
	}
	switch s {
	case "json-schema.org/draft/2020-12/schema", "json-schema.org/draft/2019-09/schema",
		"json-schema.org/draft-07/schema", "json-schema.org/draft-06/schema", "json-schema.org/draft-04/schema":
		return true
	}
	return false
}

// noLoader refuses every reference outside the schema being compiled.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, errors.New("external references are not followed")
}

// schemaURL names the one schema each compiler holds.
const schemaURL = "urn:mcpgw:schema"

// compileSchema compiles raw, a tool's schema (nil when absent). A schema
// without $schema is 2020-12 (2025-11-25 server/tools, "Tool").
func compileSchema(raw []byte) *compiled {
	if len(raw) == 0 || string(raw) == "null" {
		return &compiled{}
	}
	if len(raw) > maxSchemaBytes {
		return &compiled{skip: fmt.Sprintf("larger than %d bytes", maxSchemaBytes)}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return &compiled{skip: "malformed"}
	}
	if obj, ok := doc.(map[string]any); ok {
		if d, ok := obj["$schema"]; ok {
			s, _ := d.(string)
			if !supportedDialect(s) {
				return &compiled{skip: "unsupported $schema " + strconv.QuoteToASCII(truncate(s, 100))}
			}
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return &compiled{skip: "invalid"}
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		// Not quoted: it may hold a long part of the schema.
		return &compiled{skip: "invalid or with external references"}
	}
	if _, _, err := schemaCost(s); err != nil {
		return &compiled{skip: err.Error()}
	}
	return &compiled{s: s}
}

// A SchemaError is a value that does not conform to a tool's schema. Its
// message says where and how, for a model to correct (2025-11-25
// server/tools, "Error Handling": input validation errors are tool
// execution errors).
type SchemaError struct {
	Problems string
}

func (e *SchemaError) Error() string { return e.Problems }

// ValidateArguments checks a tools/call's arguments (nil when absent)
// against the tool's inputSchema. It returns a *SchemaError for a
// violation, nil when they conform or the schema is not enforced.
func (it *Item) ValidateArguments(args []byte) error {
	if it.schemas == nil {
		return nil
	}
	s := it.schemas.schemaOf(it, false)
	if s == nil {
		return nil
	}
	var v any = map[string]any{}
	if len(args) > 0 && string(args) != "null" {
		var err error
		if v, err = jsonx.DecodeShared(args); err != nil {
			return &SchemaError{Problems: "arguments are not valid JSON, or repeat a member"}
		}
	}
	return validate(s, v, "arguments")
}

// HasOutputSchema reports whether the tool declares an outputSchema that
// the gateway enforces.
func (it *Item) HasOutputSchema() bool {
	return it.schemas != nil && it.schemas.schemaOf(it, true) != nil
}

// ValidateResult checks a tools/call result's structuredContent (nil when
// absent) against the tool's outputSchema, if it has one. A result without
// structuredContent does not conform: with an output schema, the server
// MUST provide structured results (2025-11-25 server/tools, "Output
// Schema").
func (it *Item) ValidateResult(structured []byte) error {
	if it.schemas == nil {
		return nil
	}
	s := it.schemas.schemaOf(it, true)
	if s == nil {
		return nil
	}
	if len(structured) == 0 || string(structured) == "null" {
		return &SchemaError{Problems: "the result has no structuredContent, which the tool's outputSchema requires"}
	}
	// Its strings share structured's memory: the value is dropped once
	// checked, and the result it is part of is the upstream's answer, read
	// into a buffer of its own that nothing changes (the problems reported
	// are new strings, see validate). A 10 KB structured result is then
	// not copied to be checked.
	v, err := jsonx.DecodeShared(structured)
	if err != nil {
		return &SchemaError{Problems: "structuredContent is not valid JSON, or repeats a member"}
	}
	return validate(s, v, "structuredContent")
}

var printer = message.NewPrinter(language.English)

// nullHint tells a model what to send instead of a null where the schema
// wants a value of another type (JSON Schema: null is a type of its own,
// not an absent value): to leave an optional member out, or to send a
// value of the type wanted. "" for any other violation.
func nullHint(e *jsonschema.ValidationError) string {
	t, ok := e.ErrorKind.(*kind.Type)
	if !ok || t.Got != "null" {
		return ""
	}
	want := strings.Join(t.Want, " or ")
	if n := len(e.InstanceLocation); n > 0 {
		return "; null is not a value here: leave " + strconv.Quote(e.InstanceLocation[n-1]) + " out if it is optional, or send a value of type " + want
	}
	return "; null is not a value here: send a value of type " + want
}

// validate checks v against s and words a violation: one line per
// problem, each at its place in what (the arguments or the structured
// content), within maxProblemBytes.
func validate(c *compiled, v any, what string) error {
	if !evaluations(c.s, v, maxValidationWork) {
		return &SchemaError{Problems: what + " are too large to check against the tool's schema"}
	}
	err := c.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &SchemaError{Problems: what + " do not match the schema"}
	}
	var lines []string
	n := 0
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if n > maxProblemBytes {
			return // enough said: the rest is cut anyway
		}
		if len(e.Causes) == 0 {
			at := what
			if len(e.InstanceLocation) > 0 {
				at += "/" + strings.Join(e.InstanceLocation, "/")
			}
			lines = append(lines, "- at "+strconv.Quote(at)+": "+e.ErrorKind.LocalizedString(printer)+nullHint(e))
			n += len(lines[len(lines)-1]) + 1
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	msg := strings.Join(lines, "\n")
	if len(msg) > maxProblemBytes {
		msg = truncate(msg, maxProblemBytes) + "\n…"
	}
	return &SchemaError{Problems: msg}
}
