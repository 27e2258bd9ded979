package catalog

import (
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/testkit"
)

// TestSchemaBombNotEnforced: a $defs chain of anyOfs of two $refs is
// counted through its $refs and, past maxSchemaExpansion, not enforced:
// a bad argument gets through at once, at no cost.
func TestSchemaBombNotEnforced(t *testing.T) {
	for _, depth := range []int{20, 47} {
		raw := testkit.SchemaBomb(depth)
		c := compileSchema(raw)
		if c.s != nil || c.skip != errSchemaTooLarge.Error() {
			t.Fatalf("depth %d: skip %q, want %q", depth, c.skip, errSchemaTooLarge)
		}
		sc := &schemaCache{log: slog.New(slog.DiscardHandler), upstream: "u"}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		if err := schemaItem(sc, "bomb", string(raw)).ValidateArguments([]byte(`{"x":1}`)); err != nil {
			t.Errorf("depth %d: %v, want the schema not enforced", depth, err)
		}
		runtime.ReadMemStats(&after)
		if d := time.Since(start); d > time.Second {
			t.Errorf("depth %d: took %v", depth, d)
		}
		if a := after.TotalAlloc - before.TotalAlloc; a > 8<<20 {
			t.Errorf("depth %d: allocated %d KiB", depth, a>>10)
		}
	}
	// Below the bound, the same shape is enforced.
	c := compileSchema(testkit.SchemaBomb(8))
	if c.s == nil {
		t.Fatalf("depth 8: %s", c.skip)
	}
	if err := validate(c, map[string]any{"x": 1.0}, "arguments"); !isSchemaError(err) {
		t.Errorf("depth 8: %v", err)
	}
	if err := validate(c, map[string]any{"x": "s"}, "arguments"); err != nil {
		t.Errorf("depth 8: %v", err)
	}
}

func isSchemaError(err error) bool {
	var se *SchemaError
	return errors.As(err, &se)
}

// TestSchemaCost: what schemaCost counts and refuses.
func TestSchemaCost(t *testing.T) {
	for name, tc := range map[string]struct {
		schema    string
		skip      error
		recursive bool
	}{
		"plain":       {schema: `{"type":"object","properties":{"a":{"type":"string"},"b":{"enum":[1,2,3]}}}`},
		"shared defs": {schema: `{"properties":{"a":{"$ref":"#/$defs/s"},"b":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`},
		"tree": {schema: `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},
			"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}}`, recursive: true},
		"self through a member": {schema: `{"properties":{"next":{"$ref":"#"}}}`, recursive: true},
		"loop in place":         {schema: `{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, skip: errSchemaLoop},
		"branching recursion": {schema: `{"$defs":{"a":{"anyOf":[{"items":{"$ref":"#/$defs/a"}},{"items":{"$ref":"#/$defs/a"}}]}},"$ref":"#/$defs/a"}`,
			skip: errSchemaTooLarge},
		"dynamic": {schema: `{"$dynamicAnchor":"n","properties":{"x":{"$dynamicRef":"#n"}}}`, skip: errSchemaDynamic},
		"enum":    {schema: `{"enum":[` + strings.Repeat(`1,`, maxSchemaExpansion) + `2]}`, skip: errSchemaTooLarge},
	} {
		c := compileSchema([]byte(tc.schema))
		switch {
		case tc.skip != nil && c.skip != tc.skip.Error():
			t.Errorf("%s: skip %q, want %q", name, c.skip, tc.skip)
		case tc.skip == nil && c.s == nil:
			t.Errorf("%s: not enforced: %s", name, c.skip)
		case tc.skip == nil:
			if _, recursive, _ := schemaCost(c.s); recursive != tc.recursive {
				t.Errorf("%s: recursive %v, want %v", name, recursive, tc.recursive)
			}
		}
	}
}

// TestValidationWorkBound: at the bound, one validation where every
// evaluation fails is still quick; past it the value is refused without
// validating; a large value against a small schema is checked.
func TestValidationWorkBound(t *testing.T) {
	// About 2,500 schemas at each item of an array.
	c := compileSchema([]byte(strings.Replace(string(testkit.SchemaBomb(9)), `"x":{"$ref":"#/$defs/d0"}`, `"a":{"type":"array","items":{"$ref":"#/$defs/d0"}}`, 1)))
	if c.s == nil {
		t.Fatal(c.skip)
	}
	per, _, _ := schemaCost(c.s)
	items := maxValidationWork/per - 2
	arr := make([]any, items)
	for i := range arr {
		arr[i] = 1.0
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	err := validate(c, map[string]any{"a": arr}, "arguments")
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	t.Logf("expansion %d, %d items: %v, %d MiB allocated", per, items, took, (after.TotalAlloc-before.TotalAlloc)>>20)
	if took > 5*time.Second {
		t.Errorf("a validation at the bound took %v", took)
	}
	if !isSchemaError(err) || strings.Contains(err.Error(), "too large") {
		t.Errorf("at the bound: %v, want a violation", err)
	}
	arr = append(arr, make([]any, 4)...)
	if err := validate(c, map[string]any{"a": arr}, "arguments"); !isSchemaError(err) || !strings.Contains(err.Error(), "too large to check") {
		t.Errorf("past the bound: %v", err)
	}

	// 10,000 objects of 5 members against a schema of a few: checked.
	small := compileSchema([]byte(`{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object",
		"properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"string"},"d":{"type":"boolean"},"e":{"type":"number"}},"required":["a"]}}}}`))
	rows := make([]any, 10000)
	for i := range rows {
		rows[i] = map[string]any{"a": 1.0, "b": "x", "c": "y", "d": true, "e": 2.5}
	}
	if err := validate(small, map[string]any{"rows": rows}, "structuredContent"); err != nil {
		t.Errorf("a large value against a small schema: %v", err)
	}
	rows[9999] = map[string]any{"b": "x"}
	if err := validate(small, map[string]any{"rows": rows}, "structuredContent"); !isSchemaError(err) || !strings.Contains(err.Error(), "rows/9999") {
		t.Errorf("a large value with one bad row: %v", err)
	}

	// A deep value against a recursive schema: bounded by the same count.
	tree := compileSchema([]byte(`{"properties":{"next":{"$ref":"#"}}}`))
	var v any = map[string]any{}
	for range 1000 {
		v = map[string]any{"next": v}
	}
	if err := validate(tree, v, "arguments"); err != nil {
		t.Errorf("a deep value against a recursive schema: %v", err)
	}
}
