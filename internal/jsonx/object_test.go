package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestObjectRoundTrip(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", `{}`, `{}`},
		{"spaces kept inside values", `{ "a" : { "b" : [1, 2] } , "c":"x"}`, `{"a":{ "b" : [1, 2] },"c":"x"}`},
		{"unknown and odd members", `{"name":"t","x-vendor":{"k":[1,"two",null]},"n":1.50e3}`, `{"name":"t","x-vendor":{"k":[1,"two",null]},"n":1.50e3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseObject([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(o.Bytes()); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestObjectSet(t *testing.T) {
	o, err := ParseObject([]byte(`{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := o.GetString("name"); !ok || s != "echo" {
		t.Fatalf("GetString = %q, %v", s, ok)
	}
	o.SetString("name", "up__echo")
	want := `{"name":"up__echo","arguments":{"text":"hi"},"_meta":{"progressToken":1}}`
	if got := string(o.Bytes()); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{``, `[]`, `"x"`, `{"a":}`, `{"a":1} {}`, `{"a":1`} {
		if _, err := ParseObject([]byte(in)); err == nil {
			t.Errorf("ParseObject(%q): no error", in)
		}
	}
}

func TestArray(t *testing.T) {
	in := `[ {"a":1} , 2,"three" ,null]`
	elems, err := ParseArray([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(AppendArray(nil, elems)), `[{"a":1},2,"three",null]`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func FuzzObject(f *testing.F) {
	f.Add([]byte(`{"name":"x","a":[1,{"b":null}]}`))
	f.Add([]byte(` { "k" : "v" } `))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := ParseObject(data)
		if err != nil {
			return
		}
		out := o.Bytes()
		if !json.Valid(out) {
			t.Fatalf("invalid output %q from %q", out, data)
		}
		var a, b any
		if json.Unmarshal(data, &a) != nil || json.Unmarshal(out, &b) != nil {
			t.Fatal("unmarshal failed")
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Fatalf("round trip changed value: %s vs %s", ja, jb)
		}
	})
}

func TestDuplicatesAndCaseVariants(t *testing.T) {
	if _, err := ParseObject([]byte(`{"name":"a","name":"b"}`)); err == nil {
		t.Error("duplicate member accepted")
	}
	o, err := ParseObject([]byte(`{"name":"a","NAME":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !o.HasCaseVariant("name") {
		t.Error("HasCaseVariant(name) = false")
	}
	if o.HasCaseVariant("uri") {
		t.Error("HasCaseVariant(uri) = true")
	}
}

// FuzzParseValid feeds the fast path input that may not be valid JSON: it
// must never panic, whatever it returns.
func FuzzParseValid(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"\"}"}],"c":null}`))
	f.Add([]byte(`[{"x":"y"},2,"z"]`))
	f.Add([]byte(`{"a":"unterminated`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseValidObject(data)
		_, _ = ParseValidArray(data)
	})
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, in := range []string{
		``, ` `, `0`, `-0`, `01`, `1.`, `.5`, `1e`, `1e+`, `1E-7`, `-`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`,
		`"\u00e9"`, `"\u00g9"`, `"\x"`, "\"a\tb\"", "\"\xff\xfe\"", `[[[[]]]]`, `{"a":[{"b":{"c":null}}]}`,
		`true`, `tru`, `nul`, `falsey`, `"abc`, `[1 2]`, ` {"a":"b"} `, `{"a":"b"} x`,
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	} {
		if got, want := Valid([]byte(in)), json.Valid([]byte(in)); got != want {
			t.Errorf("Valid(%.40q) = %v, encoding/json says %v", in, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x\u00e9\n",true,null]}`, `[`, `"\ud800"`, `-0.0E+00`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", data, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	data := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{"text":"` + strings.Repeat("x", 10000) + `","n":[1,2,3.5,{"k":true}]}}}`)
	b.Run("jsonx", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			Valid(data)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			json.Valid(data)
		}
	})
}

// FuzzAppendString holds AppendString to json.Marshal, byte for byte.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "tools__echo", "file:///a b?c=d", "a\"b", `a\b`, "<&>", "\x00\x1f\x7f", "é", "\u2028", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendString(%q) = %q, want %q", s, got[1:], want)
		}
	})
}

// TestCommonNames checks that the names parsed without allocating are the
// names, however they are spelled, and that duplicates are still found.
func TestCommonNames(t *testing.T) {
	o, err := ParseObject([]byte(`{"name":"a","na\u006de2":1,"arguments":{},"x-name":2}`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range o.Members {
		names = append(names, m.Name)
	}
	if got, want := strings.Join(names, ","), "name,name2,arguments,x-name"; got != want {
		t.Errorf("names %s, want %s", got, want)
	}
	if _, err := ParseObject([]byte(`{"name":1,"na\u006de":2}`)); err == nil {
		t.Error("a duplicate spelled with an escape was accepted")
	}
	data := []byte(`{"name":"a","arguments":{}}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseValidObject(data) }); n > 2 {
		t.Errorf("%v allocations to parse an object of common names, want at most 2 (the object, its members)", n)
	}
}

func TestEachElement(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: `[]`, want: nil},
		{in: ` [ 1 , "a,]" ,{"b":[2,3]} ,null ] `, want: []string{`1`, `"a,]"`, `{"b":[2,3]}`, `null`}},
		{in: `{}`, wantErr: true},
		{in: `[1,2] x`, want: []string{`1`, `2`}, wantErr: true},
	} {
		var got []string
		err := EachElement([]byte(tc.in), func(start, end int) error {
			got = append(got, tc.in[start:end])
			return nil
		})
		if (err != nil) != tc.wantErr {
			t.Errorf("EachElement(%s): error %v, want error %v", tc.in, err, tc.wantErr)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("EachElement(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
	stop := errors.New("stop")
	n := 0
	if err := EachElement([]byte(`[1,2,3]`), func(int, int) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("EachElement did not stop at fn's error: %v after %d calls", err, n)
	}
	data := []byte(`[` + strings.Repeat(`{},`, 1000) + `{}]`)
	if allocs := testing.AllocsPerRun(10, func() { _ = EachElement(data, func(int, int) error { return nil }) }); allocs != 0 {
		t.Errorf("EachElement allocates %v times", allocs)
	}
}

// TestCaseVariantsUnicode: a member spelt with a character that some
// upstream's case-insensitive matching takes for an ASCII letter is a
// case variant, whatever its length in bytes.
func TestCaseVariantsUnicode(t *testing.T) {
	for _, variant := range []string{
		"KIND", "Kind",
		"\u212Aind", // Kelvin sign: simple folding (encoding/json) gives k
		"k\u0131nd", // dotless ı: upper-casing (JavaScript, Python) gives I
		"K\u0130ND", // dotted İ: lower-casing gives i
	} {
		o := &Object{Members: []Member{{Name: "kind"}, {Name: variant}}}
		if !o.HasCaseVariant("kind") {
			t.Errorf("%q: not a case variant of kind", variant)
		}
	}
	for name, variant := range map[string]string{
		"class":   "cla\u017Fs",  // long s: folds to s
		"strasse": "stra\u00DFe", // ß: full folding gives ss
		"file":    "\uFB01le",    // ﬁ ligature: full folding gives fi
	} {
		o := &Object{Members: []Member{{Name: variant}}}
		if !o.HasCaseVariant(name) {
			t.Errorf("%q: not a case variant of %q", variant, name)
		}
	}
	o := &Object{Members: []Member{{Name: "kind"}, {Name: "kin"}, {Name: "kinds"}, {Name: "k\u00EFnd"}}}
	if o.HasCaseVariant("kind") {
		t.Error("a different name taken for a case variant")
	}
}

// TestCaseVariantNoAllocs: ASCII names, the members of every call, are
// compared without allocating.
func TestCaseVariantNoAllocs(t *testing.T) {
	o := &Object{Members: []Member{{Name: "name"}, {Name: "arguments"}, {Name: "_meta"}}}
	if n := testing.AllocsPerRun(100, func() { o.HasCaseVariant("name") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestObjectSizeAndClone: Size is the encoding's size for names without
// escapes (a buffer of it holds the encoding with no growth), and a
// clone's members change without changing the original's.
func TestObjectSizeAndClone(t *testing.T) {
	for _, in := range []string{`{}`, `{"a":1}`, `{"name":"t","arguments":{"q":"xyz"},"_meta":{}}`} {
		o, err := ParseObject([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Size(); got != len(o.Bytes()) {
			t.Errorf("%s: Size() = %d, want %d", in, got, len(o.Bytes()))
		}
		buf := make([]byte, 0, o.Size())
		if out := o.AppendTo(buf); &out[:1][0] != &buf[:1][0] {
			t.Errorf("%s: AppendTo grew a buffer of Size()", in)
		}
	}
	o, _ := ParseObject([]byte(`{"name":"a","x":1}`))
	c := o.Clone()
	c.SetString("name", "b")
	c.Delete("x")
	c.Set("y", json.RawMessage(`2`))
	if got := string(o.Bytes()); got != `{"name":"a","x":1}` {
		t.Errorf("original after the clone changed: %s", got)
	}
	if got := string(c.Bytes()); got != `{"name":"b","y":2}` {
		t.Errorf("clone = %s", got)
	}
}

// TestObjectMentions: Mentions finds a string of characters JSON never
// escapes exactly where the encoding contains it, escapes around it or not.
func TestObjectMentions(t *testing.T) {
	const s = "io.modelcontextprotocol/"
	for _, in := range []string{`{}`, `{"a":"io.modelcontextprotocol/x"}`, `{"io.modelcontextprotocol/v":1}`,
		`{"a":"\\io.modelcontextprotocol/"}`, `{"a":"\u0069o.modelcontextprotocol/"}`, `{"<io.modelcontextprotocol/>":[1]}`,
		`{"a":"io.modelcontext","b":"protocol/"}`, `{"_meta":{ "io.modelcontextprotocol/protocolVersion" : "x" }}`} {
		o, err := ParseObject([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := o.Mentions(s), bytes.Contains(o.Bytes(), []byte(s)); got != want {
			t.Errorf("%s: Mentions = %v, the encoding %s contains it: %v", in, got, o.Bytes(), want)
		}
	}
}
