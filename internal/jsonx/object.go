// Package jsonx edits JSON objects without re-encoding what it does not
// touch.
//
// An [Object] is a JSON object as an ordered list of members whose values are
// the original bytes. Changing one member (a tool's name, a resource's URI)
// and encoding the object again leaves every other member, known or unknown,
// exactly as the peer sent it, in the order it sent it.
package jsonx

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
)

// A Member is one name/value pair of an Object.
type Member struct {
	Name  string
	Value json.RawMessage
}

// An Object is a decoded JSON object whose member values are raw JSON.
type Object struct {
	Members []Member
}

// ErrNotObject is returned by [ParseObject] for JSON that is not an object.
var ErrNotObject = errors.New("not a JSON object")

// ParseObject decodes data, which must be one JSON object. The member values
// alias data: they stay valid as long as data is not modified. A member name
// that occurs twice is an error.
func ParseObject(data []byte) (*Object, error) {
	if !Valid(data) {
		return nil, fmt.Errorf("%w: invalid JSON", ErrNotObject)
	}
	return parseObjectValid(data)
}

// ParseValidObject is ParseObject for data known to be valid JSON (a part
// of a document that was validated whole): it skips the validation pass.
// On invalid input it returns an error or a wrong result, never panics.
func ParseValidObject(data []byte) (*Object, error) { return parseObjectValid(data) }

// Get returns the raw value of the member called name, or nil. Names match
// exactly (JSON member names are case-sensitive).
func (o *Object) Get(name string) json.RawMessage {
	for i := range o.Members {
		if o.Members[i].Name == name {
			return o.Members[i].Value
		}
	}
	return nil
}

// Object returns the member called name parsed as an object, which it must
// be, as ParseValidObject parses it; ok is false when there is no such
// member or it is not a valid object.
func (o *Object) Object(name string) (m *Object, ok bool) {
	raw := o.Get(name)
	if raw == nil {
		return nil, false
	}
	m, err := parseObjectValid(raw)
	return m, err == nil
}

// ObjectOr returns the member called name parsed as an object, or a new
// empty object when there is none or it is not a valid object.
func (o *Object) ObjectOr(name string) *Object {
	if m, ok := o.Object(name); ok {
		return m
	}
	return &Object{}
}

// HasCaseVariant reports whether the object has a member whose name is
// name spelt another way, once case is folded ("Name", "\u212Aind" with a
// Kelvin sign, "kınd" with a dotless i, for "kind"), but is not name itself.
// Upstreams match member names case-insensitively in more than one way:
// encoding/json by Unicode simple folding (K and ſ fold to k and s),
// JavaScript and Python by upper- or lower-casing whole strings (ı upper-cases
// to I, ß to SS). So that none of them can act on such a member beside the
// one the gateway checks, a name is compared by its skeleton (see
// foldSkeleton), which puts all of these together; the gateway refuses them
// on the members it routes on or sets itself.
func (o *Object) HasCaseVariant(name string) bool {
	var key string // name's skeleton, made only if a member needs it
	for _, m := range o.Members {
		if m.Name == name {
			continue
		}
		if ascii(m.Name) && ascii(name) {
			// The common case, without allocating: in ASCII, every folding
			// above is ASCII case.
			if strings.EqualFold(m.Name, name) {
				return true
			}
			continue
		}
		if key == "" {
			key = foldSkeleton(name)
		}
		if foldSkeleton(m.Name) == key {
			return true
		}
	}
	return false
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldSkeleton is what s is to every case-insensitive comparison the
// gateway knows of. Each rune becomes the lower case of its upper case
// (ı → I → i, ſ → S → s, İ → i as Go's unicode.ToLower has it), then
// Unicode full case folding applies (ß → ss, ﬁ → fi), and each rune of
// the result becomes the smallest of its simple folding orbit (the orbit
// of k holds K and the Kelvin sign). Two strings with the same skeleton
// are taken as the same name.
func foldSkeleton(s string) string {
	s = strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, s)
	s = cases.Fold().String(s)
	b := make([]rune, 0, len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b = append(b, least)
	}
	return string(b)
}

// GetString returns the string value of member name, and whether the member
// exists and is a string.
func (o *Object) GetString(name string) (string, bool) {
	v := o.Get(name)
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	s, err := Unquote(v)
	return s, err == nil
}

// Set replaces the value of member name, or appends the member.
func (o *Object) Set(name string, value json.RawMessage) {
	for i := range o.Members {
		if o.Members[i].Name == name {
			o.Members[i].Value = value
			return
		}
	}
	o.Members = append(o.Members, Member{Name: name, Value: value})
}

// SetString sets member name to the JSON string s.
func (o *Object) SetString(name, s string) {
	o.Set(name, AppendString(nil, s))
}

// AppendString appends s as a JSON string to dst, byte for byte what
// json.Marshal(s) gives. Strings of plain printable ASCII (names, URIs) are
// copied as they are; any other goes through json.Marshal.
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		// json.Marshal escapes control characters, quote and backslash,
		// and, for HTML safety, <, > and &; it also rewrites bytes of
		// invalid UTF-8 and U+2028/U+2029, which are not ASCII.
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// Delete removes member name, if present.
func (o *Object) Delete(name string) {
	for i := range o.Members {
		if o.Members[i].Name == name {
			o.Members = append(o.Members[:i], o.Members[i+1:]...)
			return
		}
	}
}

// Bytes encodes the object: members in order, values as they are.
func (o *Object) Bytes() []byte { return o.AppendTo(nil) }

// AppendTo appends the object's encoding to dst. It grows dst once, to the
// size the encoding will have (names with escapes aside): a 10 KB tool
// call's params used to be copied into a new buffer and then once more
// into a larger one for the closing brace.
func (o *Object) AppendTo(dst []byte) []byte {
	dst = slices.Grow(dst, o.Size())
	dst = append(dst, '{')
	for i, m := range o.Members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, m.Name)
		dst = append(dst, ':')
		dst = append(dst, m.Value...)
	}
	return append(dst, '}')
}

// Size returns the size of the object's encoding, names with escapes
// aside (those take more): what a buffer that is to hold it needs.
func (o *Object) Size() int {
	n := 2
	for i, m := range o.Members {
		n += len(m.Name) + len(m.Value) + 3 // quotes, colon
		if i > 0 {
			n++ // comma
		}
	}
	return n
}

// Mentions reports whether the object's encoding contains s, without
// encoding it. s must be a string of characters JSON never escapes, with
// no quote, backslash, colon, comma or brace (a _meta key such as
// "io.modelcontextprotocol/protocolVersion"): then it is in the encoding
// exactly when it is in a member's name or value, since it cannot span
// two of them, nor run into an escape sequence, which starts with a
// backslash.
func (o *Object) Mentions(s string) bool {
	for _, m := range o.Members {
		if strings.Contains(m.Name, s) || strings.Contains(string(m.Value), s) {
			return true
		}
	}
	return false
}

// Clone returns a copy of the object whose members can be set and
// deleted without changing o. The values are shared: they are never
// changed in place, only replaced.
func (o *Object) Clone() *Object {
	return &Object{Members: slices.Clone(o.Members)}
}

// ParseArray decodes data, which must be one JSON array, into its raw
// elements. The elements alias data.
func ParseArray(data []byte) ([]json.RawMessage, error) {
	if !Valid(data) {
		return nil, errors.New("not a JSON array: invalid JSON")
	}
	return parseArrayValid(data)
}

// ParseValidArray is ParseArray for data known to be valid JSON.
func ParseValidArray(data []byte) ([]json.RawMessage, error) { return parseArrayValid(data) }

// AppendArray appends a JSON array of the given raw elements to dst.
func AppendArray(dst []byte, elems []json.RawMessage) []byte {
	dst = append(dst, '[')
	for i, e := range elems {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e...)
	}
	return append(dst, ']')
}
