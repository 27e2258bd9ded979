package jsonx

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// A fast path for JSON the gateway has validated already (json.Valid, one
// pass): finding the members of an object and the elements of an array is
// then a matter of skipping values, which needs no decoding, no allocation
// and no second validation. encoding/json's Decoder does all three, which
// for a 10 KB tool call cost more than everything else the gateway does.

var errSyntax = errors.New("invalid JSON")

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the index just past the JSON value starting at i, which
// must not be space. data must be valid JSON.
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, errSyntax
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				end, err := skipString(data, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errSyntax
	default: // number, true, false, null
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, nil
			}
			i++
		}
		return i, nil
	}
}

// StringEnd returns the index just past the JSON string that starts with
// the quote at data[i]: the first quote no odd run of backslashes escapes.
// Escapes are not checked.
func StringEnd(data []byte, i int) (int, error) { return skipString(data, i) }

// skipString returns the index just past the string starting at data[i].
// It jumps from quote to quote with bytes.IndexByte (vectorized): a quote
// ends the string unless an odd number of backslashes precede it. For a
// 10 KB argument this is the difference between one pass and a byte loop,
// and the gateway skips a payload several times per call.
func skipString(data []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return 0, errSyntax
		}
		q := j + k
		n := 0
		for b := q - 1; b > i && data[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// Unquote returns the value of the JSON string s (quotes included), without
// allocating beyond the result when s has no escapes.
func Unquote(s []byte) (string, error) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", errSyntax
	}
	// Most keys have no escapes and are ASCII or valid UTF-8.
	if in := s[1 : len(s)-1]; plainString(in) {
		return string(in), nil
	}
	var v string
	if err := json.Unmarshal(s, &v); err != nil {
		return "", err
	}
	return v, nil
}

// plainString reports whether in, the inside of a JSON string, is its own
// decoding: no escapes, no control characters, valid UTF-8.
func plainString(in []byte) bool {
	i := 0
	for ; i+8 <= len(in); i += 8 { // eight bytes at a time, as validString
		if x := binary.LittleEndian.Uint64(in[i:]); hasLess(x, 0x20) || hasByte(x, '\\') {
			break
		}
	}
	for _, c := range in[i:] {
		if c == '\\' || c < 0x20 {
			return false
		}
	}
	return utf8.Valid(in)
}

// parseObjectValid is ParseObject for validated input.
func parseObjectValid(data []byte) (*Object, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, ErrNotObject
	}
	o := &Object{Members: make([]Member, 0, 4)}
	// The duplicate check compares a name with every earlier one while the
	// object is small, which is what every message has and needs no
	// allocation; past pairwiseMax members it switches to a set, so that
	// an object of n members costs O(n), not O(n²) (160k members took 44 s).
	var seen map[string]struct{}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return o, checkTrailing(data, i+1)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, errSyntax
		}
		end, err := skipString(data, i)
		if err != nil {
			return nil, err
		}
		name, ok := commonName(data[i+1 : end-1])
		if !ok {
			if name, err = Unquote(data[i:end]); err != nil {
				return nil, err
			}
		}
		if seen == nil {
			for _, m := range o.Members {
				if m.Name == name {
					return nil, duplicate(name)
				}
			}
			if len(o.Members) == pairwiseMax {
				seen = make(map[string]struct{}, 2*pairwiseMax)
				for _, m := range o.Members {
					seen[m.Name] = struct{}{}
				}
				seen[name] = struct{}{}
			}
		} else {
			if _, dup := seen[name]; dup {
				return nil, duplicate(name)
			}
			seen[name] = struct{}{}
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, errSyntax
		}
		i = skipSpace(data, i+1)
		vend, err := skipValue(data, i)
		if err != nil {
			return nil, err
		}
		if vend == i {
			return nil, errSyntax // no value: {"a":}
		}
		o.Members = append(o.Members, Member{Name: name, Value: data[i:vend:vend]})
		i = skipSpace(data, vend)
		if i >= len(data) {
			return nil, errSyntax
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return o, checkTrailing(data, i+1)
		default:
			return nil, errSyntax
		}
	}
}

// pairwiseMax is the member count up to which comparing a name with every
// earlier name is cheaper than hashing it (measured: BenchmarkDuplicateCheck).
const pairwiseMax = 16

// duplicate is the error for a member name seen twice. See ParseObject:
// duplicates are rejected, not resolved.
func duplicate(name string) error {
	return fmt.Errorf("duplicate member %s", strconv.Quote(name))
}

// commonName returns the member name whose JSON string has the contents
// b, without allocating, if it is one of the names the gateway meets in
// every message (JSON-RPC envelopes, tool calls and results); a call's
// messages are parsed several times, and converting each name to a new
// string was a good share of their allocations.
func commonName(b []byte) (string, bool) {
	// A match has no escapes, so the name is b itself. The switch on
	// string(b) does not allocate.
	switch string(b) {
	case "jsonrpc":
		return "jsonrpc", true
	case "id":
		return "id", true
	case "method":
		return "method", true
	case "params":
		return "params", true
	case "result":
		return "result", true
	case "error":
		return "error", true
	case "name":
		return "name", true
	case "arguments":
		return "arguments", true
	case "_meta":
		return "_meta", true
	case "content":
		return "content", true
	case "structuredContent":
		return "structuredContent", true
	case "isError":
		return "isError", true
	case "uri":
		return "uri", true
	case "type":
		return "type", true
	case "text":
		return "text", true
	case "progressToken":
		return "progressToken", true
	}
	return "", false
}

// parseArrayValid is ParseArray for validated input.
func parseArrayValid(data []byte) ([]json.RawMessage, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return nil, errors.New("not a JSON array")
	}
	var out []json.RawMessage
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return out, checkTrailing(data, i+1)
	}
	for {
		end, err := skipValue(data, i)
		if err != nil {
			return nil, err
		}
		if end == i {
			return nil, errSyntax // no element: [,]
		}
		out = append(out, data[i:end:end])
		i = skipSpace(data, end)
		if i >= len(data) {
			return nil, errSyntax
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return out, checkTrailing(data, i+1)
		default:
			return nil, errSyntax
		}
	}
}

func checkTrailing(data []byte, i int) error {
	if skipSpace(data, i) != len(data) {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

// EachElement calls fn with the offsets of each element of data, a JSON
// array known to be valid JSON, in order: data[start:end] is the element.
// Unlike [ParseValidArray] it allocates nothing, so that an array of many
// small elements costs no more memory than its bytes. It stops at fn's
// first error and returns it.
func EachElement(data []byte, fn func(start, end int) error) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return errors.New("not a JSON array")
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return checkTrailing(data, i+1)
	}
	for {
		end, err := skipValue(data, i)
		if err != nil {
			return err
		}
		if end == i {
			return errSyntax
		}
		if err := fn(i, end); err != nil {
			return err
		}
		i = skipSpace(data, end)
		if i >= len(data) {
			return errSyntax
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return checkTrailing(data, i+1)
		default:
			return errSyntax
		}
	}
}
