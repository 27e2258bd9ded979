package catalog

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
)

func schemaItem(sc *schemaCache, name, input string) *Item {
	raw, _ := json.Marshal(map[string]any{"name": name, "inputSchema": json.RawMessage(input)})
	return &Item{Original: name, Exposed: name, Raw: raw, schemas: sc}
}

// TestSchemaCacheBound: compiled schemas are kept per Listing up to
// maxCompiledBytes; past it a schema is compiled for each call and still
// enforced.
func TestSchemaCacheBound(t *testing.T) {
	old := maxCompiledBytes
	t.Cleanup(func() { maxCompiledBytes = old })
	schema := `{"type":"object","required":["x"]}`
	maxCompiledBytes = 2 * len(schema)
	sc := &schemaCache{log: slog.New(slog.DiscardHandler), upstream: "u"}
	for _, name := range []string{"a", "b", "c", "d"} {
		it := schemaItem(sc, name, schema)
		for range 2 {
			var se *SchemaError
			if err := it.ValidateArguments([]byte(`{}`)); !errors.As(err, &se) {
				t.Fatalf("%s: %v, want a SchemaError", name, err)
			}
			if err := it.ValidateArguments([]byte(`{"x":1}`)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	if len(sc.m) != 2 || sc.bytes != 2*len(schema) {
		t.Errorf("kept %d schemas, %d bytes; want 2, %d", len(sc.m), sc.bytes, 2*len(schema))
	}
}

// TestSchemaSkipped: schemas the gateway does not enforce let any
// arguments through.
func TestSchemaSkipped(t *testing.T) {
	sc := &schemaCache{log: slog.New(slog.DiscardHandler), upstream: "u"}
	big := `{"type":"object","required":["x"],"description":"` + strings.Repeat("d", maxSchemaBytes) + `"}`
	for name, s := range map[string]string{
		"too large":   big,
		"dialect":     `{"$schema":"https://example.com/s","required":["x"]}`,
		"not string":  `{"$schema":7,"required":["x"]}`,
		"file ref":    `{"properties":{"x":{"$ref":"file:///etc/passwd"}},"required":["x"]}`,
		"http ref":    `{"$ref":"http://127.0.0.1:1/schema.json"}`,
		"invalid":     `{"type":17,"required":["x"]}`,
		"not object":  `[1]`,
		"bad pattern": `{"properties":{"x":{"pattern":"("}},"required":["x"]}`,
	} {
		if err := schemaItem(sc, name, s).ValidateArguments([]byte(`{}`)); err != nil {
			t.Errorf("%s: %v, want the schema skipped", name, err)
		}
	}
	for _, c := range sc.m {
		if c.s != nil || c.skip == "" {
			t.Errorf("a skipped schema compiled: %+v", c)
		}
	}
}

// TestSchemaProblemsBounded: the message a violation gives is at most
// maxProblemBytes and a little.
func TestSchemaProblemsBounded(t *testing.T) {
	sc := &schemaCache{log: slog.New(slog.DiscardHandler), upstream: "u"}
	it := schemaItem(sc, "t", `{"type":"object","additionalProperties":{"type":"integer"}}`)
	args := map[string]string{}
	for i := range 500 {
		args[strings.Repeat("k", 50)+string(rune('a'+i%26))+strings.Repeat("z", i)] = "s"
	}
	b, _ := json.Marshal(args)
	var se *SchemaError
	if err := it.ValidateArguments(b); !errors.As(err, &se) {
		t.Fatalf("%v", err)
	}
	if len(se.Problems) > maxProblemBytes+8 {
		t.Errorf("problems are %d bytes", len(se.Problems))
	}
}

// BenchmarkValidateArguments is the validation's own cost per call, with
// the schema compiled (as after a tool's first call).
func BenchmarkValidateArguments(b *testing.B) {
	sc := &schemaCache{log: slog.New(slog.DiscardHandler), upstream: "u"}
	it := schemaItem(sc, "t", `{"type":"object","properties":{"q":{"type":"string"}}}`)
	for _, size := range []int{100, 10000} {
		args := []byte(`{"q":"` + strings.Repeat("x", size) + `"}`)
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := it.ValidateArguments(args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSchemaNullHint: a null where the schema wants another type (an
// optional boolean sent as null, a common slip of models) is refused, as
// JSON Schema says, with a message that says what to send instead.
func TestSchemaNullHint(t *testing.T) {
	sc := &schemaCache{log: slog.New(slog.DiscardHandler), upstream: "u"}
	it := schemaItem(sc, "t", `{"type":"object","properties":{"verbose":{"type":"boolean"},"n":{"type":["integer","string"]}}}`)
	var se *SchemaError
	if err := it.ValidateArguments([]byte(`{"verbose":null}`)); !errors.As(err, &se) {
		t.Fatalf("null for a boolean: %v", err)
	}
	if want := `- at "arguments/verbose": got null, want boolean; null is not a value here: leave "verbose" out if it is optional, or send a value of type boolean`; se.Problems != want {
		t.Errorf("message %q, want %q", se.Problems, want)
	}
	if err := it.ValidateArguments([]byte(`{"n":null}`)); !errors.As(err, &se) || !strings.HasSuffix(se.Problems, `or send a value of type integer or string`) {
		t.Errorf("null for an integer or string: %v", err)
	}
	if err := it.ValidateArguments([]byte(`{"verbose":"yes"}`)); !errors.As(err, &se) || strings.Contains(se.Problems, "null") {
		t.Errorf("a string for a boolean: %v", err)
	}
	if err := it.ValidateArguments([]byte(`{}`)); err != nil {
		t.Errorf("verbose left out: %v", err)
	}
}

// TestValidateResultShared: a result's structuredContent is checked
// without a copy of its strings, and the problems reported do not share
// its memory: they stay as they were when the result's bytes change
// afterwards.
func TestValidateResultShared(t *testing.T) {
	sc := &schemaCache{log: slog.New(slog.DiscardHandler), upstream: "u"}
	raw, _ := json.Marshal(map[string]any{"name": "t", "inputSchema": json.RawMessage(`{"type":"object"}`),
		"outputSchema": json.RawMessage(`{"type":"object","properties":{"mail":{"type":"string","pattern":"^[a-z]+@"},"n":{"type":"integer"}}}`)})
	it := &Item{Original: "t", Exposed: "t", Raw: raw, schemas: sc}
	if err := it.ValidateResult([]byte(`{"mail":"a@example.com","n":1}`)); err != nil {
		t.Fatalf("conforming result: %v", err)
	}
	structured := []byte(`{"mail":"not-an-address","n":"x"}`)
	var se *SchemaError
	if err := it.ValidateResult(structured); !errors.As(err, &se) {
		t.Fatalf("result that does not conform: %v", err)
	}
	before := strings.Clone(se.Problems)
	if !strings.Contains(before, "not-an-address") {
		t.Fatalf("problems do not quote the value, so this proves nothing: %q", before)
	}
	for i := range structured {
		structured[i] = 'Z'
	}
	if se.Problems != before {
		t.Errorf("problems changed with the result's bytes: %q, were %q", se.Problems, before)
	}
}
