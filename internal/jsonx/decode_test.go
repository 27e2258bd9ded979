package jsonx

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// stdDecode is what Decode must equal: encoding/json with UseNumber.
func stdDecode(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

var decodeSeeds = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-1.5e10`, `"x"`, `" \u00e9\n\"\\ "`,
	`{"a":1,"b":[1,2,{"c":null}],"d":"\ud83d\ude00","e":{"f":true}}`,
	` [ 1 , "two" , [ ] , { } ] `,
	`{"text":"` + strings.Repeat("x", 10000) + `"}`,
	`"\xff"`, `{"a":1,"a":2}`, `[1,]`, `{"a"}`, `01`, ``,
}

func TestDecode(t *testing.T) {
	for _, s := range decodeSeeds {
		got, err := Decode([]byte(s))
		want, werr := stdDecode([]byte(s))
		if s == `{"a":1,"a":2}` {
			if err == nil {
				t.Errorf("Decode(%q): a repeated member was accepted", s)
			}
			continue
		}
		if (err != nil) != (werr != nil || !json.Valid([]byte(s))) {
			t.Errorf("Decode(%.40q): error %v, encoding/json %v", s, err, werr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("Decode(%.40q) = %#v, want %#v", s, got, want)
		}
	}
}

// TestDecodeShared: DecodeShared decodes as Decode does, and a string
// that needs no unescaping shares the input's memory.
func TestDecodeShared(t *testing.T) {
	for _, s := range append(decodeSeeds, `["a\nb","\u00e9",""]`) {
		got, err := DecodeShared([]byte(s))
		want, werr := Decode([]byte(s))
		if (err != nil) != (werr != nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeShared(%.40q) = %#v, %v; Decode: %#v, %v", s, got, err, want, werr)
		}
	}
	data := []byte(`{"text":"` + strings.Repeat("x", 100) + `"}`)
	v, err := DecodeShared(data)
	if err != nil {
		t.Fatal(err)
	}
	text := v.(map[string]any)["text"].(string)
	if unsafe.StringData(text) != &data[9] {
		t.Error("a plain string was copied")
	}
}

// FuzzDecode holds Decode to encoding/json's answers, repeated members
// aside (Decode refuses them).
func FuzzDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Decode(data)
		if shared, serr := DecodeShared(data); (serr != nil) != (err != nil) || !reflect.DeepEqual(shared, got) {
			t.Fatalf("DecodeShared(%q) = %#v, %v; Decode: %#v, %v", data, shared, serr, got, err)
		}
		if !json.Valid(data) {
			if err == nil {
				t.Fatalf("Decode accepted invalid JSON %q", data)
			}
			return
		}
		want, werr := stdDecode(data)
		if werr != nil {
			t.Fatalf("encoding/json refused valid %q: %v", data, werr)
		}
		if err != nil {
			if strings.Contains(err.Error(), "duplicate") {
				return
			}
			t.Fatalf("Decode(%q): %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %#v, want %#v", data, got, want)
		}
	})
}

func BenchmarkDecode10K(b *testing.B) {
	data := []byte(`{"text":"` + strings.Repeat("x", 10000) + `"}`)
	b.Run("jsonx", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("shared", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeShared(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := stdDecode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
