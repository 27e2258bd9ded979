package guard

import (
	"bytes"
	"errors"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// The content a guard inspects is the strings of a JSON message. A walker
// goes once over the message's bytes, hands each string of the phase's
// selection to a function, and writes the message anew only when one of
// them changed: everything else (member order, numbers, spacing, the
// strings it was not asked about) is copied byte for byte.

var errJSON = errors.New("content is not valid JSON")

// mode says which strings under a value are inspected.
type mode uint8

const (
	skip mode = iota // none
	all              // every string value
	text             // the values of members named "text"
)

// maxDepth bounds the nesting the walker follows (jsonx.Valid allows
// deeper; content nested deeper is refused rather than skipped).
const maxDepth = 512

type walker struct {
	data []byte
	out  []byte // nil until a string changed
	last int    // data[last:] is not in out yet
	fn   func(s string) (string, bool)
	stop bool // fn asked to stop (a block)
}

// topMode returns the mode of a top-level member of the phase's content.
func topMode(p Phase, name string) mode {
	switch p {
	case Arguments:
		return all
	case Results:
		switch name {
		case "content", "messages", "contents":
			return text
		case "structuredContent", "description":
			return all
		}
	case Definitions:
		switch name {
		case "description", "title", "annotations", "inputSchema", "outputSchema", "arguments":
			return all
		}
	}
	return skip
}

// walk runs fn on the strings of data, a JSON object, that phase p
// inspects; fn returns a replacement and whether it differs. walk returns
// data itself when nothing changed.
func walk(p Phase, data []byte, fn func(string) (string, bool)) ([]byte, error) {
	w := &walker{data: data, fn: fn}
	i := ws(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, errJSON
	}
	end, err := w.object(i, 0, func(name string) mode { return topMode(p, name) })
	if err != nil {
		return nil, err
	}
	if ws(data, end) != len(data) {
		return nil, errJSON
	}
	if w.out == nil {
		return data, nil
	}
	return append(w.out, data[w.last:]...), nil
}

func ws(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// object walks the object at data[i]; modeOf gives each member's mode.
func (w *walker) object(i, depth int, modeOf func(string) mode) (int, error) {
	if depth > maxDepth {
		return 0, errJSON
	}
	i = ws(w.data, i+1)
	if i < len(w.data) && w.data[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(w.data) || w.data[i] != '"' {
			return 0, errJSON
		}
		end, err := stringEnd(w.data, i)
		if err != nil {
			return 0, err
		}
		name, err := unquote(w.data[i:end])
		if err != nil {
			return 0, errJSON
		}
		i = ws(w.data, end)
		if i >= len(w.data) || w.data[i] != ':' {
			return 0, errJSON
		}
		i = ws(w.data, i+1)
		if i, err = w.value(i, depth+1, modeOf(name), name == "text"); err != nil {
			return 0, err
		}
		i = ws(w.data, i)
		if i >= len(w.data) {
			return 0, errJSON
		}
		switch w.data[i] {
		case ',':
			i = ws(w.data, i+1)
		case '}':
			return i + 1, nil
		default:
			return 0, errJSON
		}
	}
}

// value walks the value at data[i] in mode m; isText says it is the value
// of a member named "text".
func (w *walker) value(i, depth int, m mode, isText bool) (int, error) {
	if i >= len(w.data) {
		return 0, errJSON
	}
	if m == skip || w.stop {
		return skipValue(w.data, i, depth)
	}
	switch w.data[i] {
	case '"':
		end, err := stringEnd(w.data, i)
		if err != nil {
			return 0, err
		}
		if m == all || isText {
			if err := w.str(i, end); err != nil {
				return 0, err
			}
		}
		return end, nil
	case '{':
		return w.object(i, depth, func(string) mode { return m })
	case '[':
		if depth > maxDepth {
			return 0, errJSON
		}
		i = ws(w.data, i+1)
		if i < len(w.data) && w.data[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = w.value(i, depth+1, m, false); err != nil {
				return 0, err
			}
			i = ws(w.data, i)
			if i >= len(w.data) {
				return 0, errJSON
			}
			switch w.data[i] {
			case ',':
				i = ws(w.data, i+1)
			case ']':
				return i + 1, nil
			default:
				return 0, errJSON
			}
		}
	}
	return skipValue(w.data, i, depth)
}

// str inspects the string data[i:end] (quotes included).
func (w *walker) str(i, end int) error {
	s, err := unquote(w.data[i:end])
	if err != nil {
		return errJSON
	}
	r, changed := w.fn(s)
	if !changed {
		return nil
	}
	if w.out == nil {
		w.out = make([]byte, 0, len(w.data)+64)
	}
	w.out = append(w.out, w.data[w.last:i]...)
	w.out = appendString(w.out, r)
	w.last = end
	return nil
}

// stringEnd returns the index just past the string at data[i], a quote.
func stringEnd(data []byte, i int) (int, error) {
	end, err := jsonx.StringEnd(data, i)
	if err != nil {
		return 0, errJSON
	}
	return end, nil
}

// skipValue returns the index just past the value at data[i], checking
// its structure loosely (the strings it holds are not looked at).
func skipValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return 0, errJSON
	}
	switch c := data[i]; c {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		if depth > maxDepth {
			return 0, errJSON
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = ws(data, i+1)
		if i < len(data) && data[i] == closer {
			return i + 1, nil
		}
		for {
			var err error
			if c == '{' {
				if i >= len(data) || data[i] != '"' {
					return 0, errJSON
				}
				if i, err = stringEnd(data, i); err != nil {
					return 0, err
				}
				i = ws(data, i)
				if i >= len(data) || data[i] != ':' {
					return 0, errJSON
				}
				i = ws(data, i+1)
			}
			if i, err = skipValue(data, i, depth+1); err != nil {
				return 0, err
			}
			i = ws(data, i)
			if i >= len(data) {
				return 0, errJSON
			}
			switch data[i] {
			case ',':
				i = ws(data, i+1)
			case closer:
				return i + 1, nil
			default:
				return 0, errJSON
			}
		}
	}
	j := i
	for j < len(data) {
		c := data[j]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
		j++
	}
	if j == i {
		return 0, errJSON
	}
	return j, nil
}

// appendString appends s as a JSON string: quote, backslash and control
// characters escaped, invalid UTF-8 as U+FFFD, and nothing else (unlike
// encoding/json, which also escapes "<", ">" and "&" and would make a
// redacted message longer than needed).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			i++
			continue
		}
		if c >= 0x80 {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			if r == '\u2028' || r == '\u2029' {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\u202`...)
				dst = append(dst, byte('8'+r-'\u2028'))
				i += n
				start = i
				continue
			}
			i += n
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		default:
			dst = append(dst, `\u00`...)
			dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// unquote returns the value of the JSON string q (quotes included). A
// string without escapes is returned as a view of q's bytes, not a copy:
// the walker's callers never keep the strings they are handed, and the
// content is not modified while it is inspected. Invalid UTF-8 is left as
// it is (appendString writes U+FFFD for it).
func unquote(q []byte) (string, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", errJSON
	}
	b := q[1 : len(q)-1]
	k := bytes.IndexByte(b, '\\')
	if k < 0 {
		if len(b) == 0 {
			return "", nil
		}
		return unsafe.String(&b[0], len(b)), nil
	}
	out := make([]byte, 0, len(b))
	for {
		out = append(out, b[:k]...)
		b = b[k:]
		if len(b) < 2 {
			return "", errJSON
		}
		switch c := b[1]; c {
		case '"', '\\', '/':
			out = append(out, c)
			b = b[2:]
		case 'b':
			out, b = append(out, '\b'), b[2:]
		case 'f':
			out, b = append(out, '\f'), b[2:]
		case 'n':
			out, b = append(out, '\n'), b[2:]
		case 'r':
			out, b = append(out, '\r'), b[2:]
		case 't':
			out, b = append(out, '\t'), b[2:]
		case 'u':
			r, ok := hex4(b[2:])
			if !ok {
				return "", errJSON
			}
			b = b[6:]
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if len(b) >= 6 && b[0] == '\\' && b[1] == 'u' {
					r2, ok = hex4(b[2:])
				}
				if d := utf16.DecodeRune(r, r2); ok && d != utf8.RuneError {
					r = d
					b = b[6:]
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", errJSON
		}
		k = bytes.IndexByte(b, '\\')
		if k < 0 {
			out = append(out, b...)
			return string(out), nil
		}
	}
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c-'a') + 10
		case 'A' <= c && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}
