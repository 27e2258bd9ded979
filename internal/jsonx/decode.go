package jsonx

import (
	"encoding/json"
	"errors"
	"unsafe"
)

// Decode returns the JSON value data as encoding/json decodes it into an
// any with UseNumber: map[string]any, []any, string, json.Number, bool or
// nil. It is what a JSON Schema validator takes, made in one pass over
// bytes that Valid checked first: a string without escapes is one copy,
// where encoding/json's decoder steps through it byte by byte (for a 10 KB
// argument, the bulk of validating a call). A member name that occurs twice
// in one object is an error, as everywhere in the gateway.
func Decode(data []byte) (any, error) {
	if !Valid(data) {
		return nil, errSyntax
	}
	v, _, err := decoder{}.value(data, skipSpace(data, 0))
	return v, err
}

// DecodeShared is Decode whose strings share data's memory where they need
// no unescaping, so that a 10 KB string argument costs no copy. It is for
// a value used only while data is neither changed nor reused (a call's
// arguments, validated against their schema and dropped): data must not
// change for as long as any string of the value is in use.
func DecodeShared(data []byte) (any, error) {
	if !Valid(data) {
		return nil, errSyntax
	}
	v, _, err := decoder{shared: true}.value(data, skipSpace(data, 0))
	return v, err
}

// DecodeValid is Decode for data that must be valid JSON: a member of a
// document that Valid accepted whole (ParseObject's members are). It skips
// the validation pass; invalid data may panic.
func DecodeValid(data []byte) (any, error) {
	i := skipSpace(data, 0)
	if i == len(data) {
		return nil, errSyntax
	}
	v, _, err := decoder{}.value(data, i)
	return v, err
}

// A decoder decodes valid JSON; shared: see DecodeShared.
type decoder struct{ shared bool }

// value decodes the value at data[i] of valid JSON and returns it with the
// index just past it. Nesting is bounded by Valid's maxDepth.
func (d decoder) value(data []byte, i int) (any, int, error) {
	switch data[i] {
	case '{':
		m := map[string]any{}
		i = skipSpace(data, i+1)
		if data[i] == '}' {
			return m, i + 1, nil
		}
		for {
			end, err := skipString(data, i)
			if err != nil {
				return nil, 0, err
			}
			name, err := Unquote(data[i:end])
			if err != nil {
				return nil, 0, err
			}
			if _, dup := m[name]; dup {
				return nil, 0, duplicate(name)
			}
			i = skipSpace(data, skipSpace(data, end)+1) // past ':'
			v, next, err := d.value(data, i)
			if err != nil {
				return nil, 0, err
			}
			m[name] = v
			i = skipSpace(data, next)
			if data[i] == '}' {
				return m, i + 1, nil
			}
			i = skipSpace(data, i+1) // past ','
		}
	case '[':
		a := []any{}
		i = skipSpace(data, i+1)
		if data[i] == ']' {
			return a, i + 1, nil
		}
		for {
			v, next, err := d.value(data, i)
			if err != nil {
				return nil, 0, err
			}
			a = append(a, v)
			i = skipSpace(data, next)
			if data[i] == ']' {
				return a, i + 1, nil
			}
			i = skipSpace(data, i+1)
		}
	case '"':
		end, err := skipString(data, i)
		if err != nil {
			return nil, 0, err
		}
		if d.shared && end-i > 2 {
			if in := data[i+1 : end-1]; plainString(in) {
				return unsafe.String(&in[0], len(in)), end, nil
			}
		}
		s, err := Unquote(data[i:end])
		return s, end, err
	case 't':
		return true, i + len("true"), nil
	case 'f':
		return false, i + len("false"), nil
	case 'n':
		return nil, i + len("null"), nil
	}
	end, err := skipValue(data, i) // a number: up to its delimiter
	if err != nil {
		return nil, 0, err
	}
	if end == i {
		return nil, 0, errors.New("jsonx: expected a value")
	}
	return json.Number(data[i:end]), end, nil
}
