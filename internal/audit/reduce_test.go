package audit

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReduceArgumentsNone(t *testing.T) {
	args := json.RawMessage(`{"token":"s3cret","n":42}`)
	for _, mode := range []string{"", "none", "NONE", "full", "raw"} {
		if got := ReduceArguments(mode, args); got != "" {
			t.Errorf("ReduceArguments(%q) = %q, want \"\"", mode, got)
		}
	}
	for _, mode := range []string{"none", "hash", "redacted"} {
		for _, args := range []string{``, ` `, `null`} {
			if got := ReduceArguments(mode, json.RawMessage(args)); got != "" {
				t.Errorf("ReduceArguments(%q, %q) = %q, want \"\"", mode, args, got)
			}
		}
	}
}

var hashRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func TestReduceArgumentsHash(t *testing.T) {
	a := ReduceArguments("hash", json.RawMessage(`{"q":"s3cret","n":1}`))
	if !hashRE.MatchString(a) {
		t.Fatalf("hash = %q, want sha256:<64 hex>", a)
	}
	if strings.Contains(a, "s3cret") {
		t.Errorf("hash contains the value: %q", a)
	}
	// Stable, and blind to formatting.
	for _, same := range []string{`{"q":"s3cret","n":1}`, "{ \"q\" : \"s3cret\",\n  \"n\": 1 }\n"} {
		if got := ReduceArguments("hash", json.RawMessage(same)); got != a {
			t.Errorf("hash of %q = %q, want %q", same, got, a)
		}
	}
	// The known value, so that a change of algorithm is noticed: the
	// SHA-256 of `{"q":"s3cret","n":1}`.
	if want := "sha256:8544cded2c6d3a06e3e60a77d58903bf2869fb460c436ca35861a3f9d6ad2f93"; a != want {
		t.Errorf("hash = %q, want %q", a, want)
	}
	for _, other := range []string{`{"q":"s3cret","n":2}`, `{"n":1,"q":"s3cret"}`, `{"q":"S3cret","n":1}`} {
		if got := ReduceArguments("hash", json.RawMessage(other)); got == a {
			t.Errorf("hash of %q equals the hash of different arguments", other)
		}
	}
	// Invalid JSON still hashes (its raw bytes), and still shows nothing.
	if got := ReduceArguments("hash", json.RawMessage(`{"q":"s3cret"`)); !hashRE.MatchString(got) {
		t.Errorf("hash of invalid JSON = %q", got)
	}
}

func TestReduceArgumentsRedacted(t *testing.T) {
	tests := []struct {
		args, want string
	}{
		{`{"q":"s3cret","n":42,"f":-1.5e10,"ok":true,"no":false,"z":null}`, `{"q":"REDACTED","n":0,"f":0,"ok":false,"no":false,"z":null}`},
		{`{"nested":{"list":["a",1,{"k":"v"},[]],"empty":{}}}`, `{"nested":{"list":["REDACTED",0,{"k":"REDACTED"},[]],"empty":{}}}`},
		{" {\n  \"a\" : [ \"x\" , \"y\" ]\n} ", `{"a":["REDACTED","REDACTED"]}`},
		{`{"key with \"quotes\"":"v","é":"\u00e9"}`, `{"key with \"quotes\"":"REDACTED","é":"REDACTED"}`},
		{`["a","b"]`, `["REDACTED","REDACTED"]`},
		{`"just a string"`, `"REDACTED"`},
		{`12345`, `0`},
		{`{}`, `{}`},
		{`{"a":1`, InvalidArguments},
		{`{"a":1} {"b":2}`, InvalidArguments},
		{`{"a":01}`, InvalidArguments},
		{`nope`, InvalidArguments},
	}
	for _, tt := range tests {
		if got := ReduceArguments("redacted", json.RawMessage(tt.args)); got != tt.want {
			t.Errorf("ReduceArguments(redacted, %s) = %s, want %s", tt.args, got, tt.want)
		}
	}
}

// TestRedactedKeepsNoValue checks the property every redacted output must
// have: the same shape as the input, and no scalar value from it.
func TestRedactedKeepsNoValue(t *testing.T) {
	const args = `{"token":"Bearer abc.def.ghi","password":"hunter2","pin":1234,"card":4111111111111111,
		"items":[{"note":"call me at 555-0100","qty":3},"plain secret",-7.25,true],"deep":{"a":{"b":{"c":"xyzzy"}}}}`
	got := ReduceArguments("redacted", json.RawMessage(args))
	for _, secret := range []string{"abc.def.ghi", "hunter2", "1234", "4111111111111111", "555-0100", "plain secret", "7.25", "xyzzy", "true"} {
		if strings.Contains(got, secret) {
			t.Errorf("redacted output contains %q: %s", secret, got)
		}
	}
	checkRedacted(t, args, got)
}

// checkRedacted checks that out has in's shape with every scalar
// replaced.
func checkRedacted(t *testing.T, in, out string) {
	t.Helper()
	// Numbers as json.Number: any size decodes. Duplicate keys: the last
	// wins on both sides, so the shapes still compare.
	decode := func(s string) (any, error) {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v)
	}
	inV, err := decode(in)
	if err != nil {
		t.Fatalf("input: %v", err)
	}
	outV, err := decode(out)
	if err != nil {
		t.Fatalf("output %q is not JSON: %v", out, err)
	}
	if diff := cmp.Diff(redactValue(inV), outV); diff != "" {
		t.Errorf("redacted shape mismatch (-want +got):\n%s", diff)
	}
}

// redactValue is the reference redaction of a decoded JSON value.
func redactValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = redactValue(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = redactValue(e)
		}
		return s
	case string:
		return Redacted
	case json.Number:
		return json.Number("0")
	case bool:
		return false
	}
	return v
}

func FuzzReduceArgumentsRedacted(f *testing.F) {
	f.Add(`{"a":"b","c":[1,2,{"d":null}]}`)
	f.Add(`[]`)
	f.Add(`"x"`)
	f.Add(`{"a":{"b":{"c":[true,false,-0.0e-0]}}}`)
	f.Fuzz(func(t *testing.T, args string) {
		got := ReduceArguments("redacted", json.RawMessage(args))
		trimmed := strings.Trim(args, jsonSpace)
		switch {
		case trimmed == "" || trimmed == "null":
			if got != "" {
				t.Fatalf("absent arguments gave %q", got)
			}
		case !json.Valid([]byte(args)):
			if got != InvalidArguments {
				t.Fatalf("invalid JSON %q gave %q", args, got)
			}
		default:
			checkRedacted(t, args, got)
		}
	})
}
