// Package jsonx edits JSON objects without re-encoding what it does not
// touch.
//
// An [Object] is a JSON object as an ordered list of members whose values are
// the original bytes. Changing one member (a tool's name, a resource's URI)
// and encoding the object again leaves every other member, known or unknown,
// exactly as the peer sent it, in the order it sent it.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// alias data: they stay valid as long as data is not modified.
func ParseObject(data []byte) (*Object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotObject, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, ErrNotObject
	}
	o := &Object{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key is %T", tok)
		}
		// A duplicate member is rejected, not resolved: peers disagree on
		// which one wins (Go and JavaScript take the last), so routing on
		// one copy while an upstream acts on the other would be a way
		// around policy.
		for _, m := range o.Members {
			if m.Name == name {
				return nil, fmt.Errorf("duplicate member %q", name)
			}
		}
		start := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		end := dec.InputOffset()
		// Alias the input instead of keeping Decode's copy: find the value's
		// first byte after the colon and any space.
		i := int(start)
		for i < int(end) && (data[i] == ':' || isSpace(data[i])) {
			i++
		}
		o.Members = append(o.Members, Member{Name: name, Value: data[i:end:end]})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON object")
	}
	return o, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

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

// HasCaseVariant reports whether the object has a member whose name equals
// name ignoring ASCII case but is not name itself ("Name" for "name").
// encoding/json matches struct fields case-insensitively, so an upstream
// written with it could act on such a member; the gateway refuses them on the
// members it routes on.
func (o *Object) HasCaseVariant(name string) bool {
	for _, m := range o.Members {
		if m.Name != name && len(m.Name) == len(name) && bytes.EqualFold([]byte(m.Name), []byte(name)) {
			return true
		}
	}
	return false
}

// GetString returns the string value of member name, and whether the member
// exists and is a string.
func (o *Object) GetString(name string) (string, bool) {
	v := o.Get(name)
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
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
	b, _ := json.Marshal(s)
	o.Set(name, b)
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

// AppendTo appends the object's encoding to dst.
func (o *Object) AppendTo(dst []byte) []byte {
	dst = append(dst, '{')
	for i, m := range o.Members {
		if i > 0 {
			dst = append(dst, ',')
		}
		k, _ := json.Marshal(m.Name)
		dst = append(dst, k...)
		dst = append(dst, ':')
		dst = append(dst, m.Value...)
	}
	return append(dst, '}')
}

// ParseArray decodes data, which must be one JSON array, into its raw
// elements. The elements alias data.
func ParseArray(data []byte) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, errors.New("not a JSON array")
	}
	var out []json.RawMessage
	for dec.More() {
		start := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		end := dec.InputOffset()
		i := int(start)
		for i < int(end) && (data[i] == ',' || isSpace(data[i])) {
			i++
		}
		out = append(out, data[i:end:end])
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON array")
	}
	return out, nil
}

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
