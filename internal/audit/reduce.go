package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
)

// Modes of config.Upstream.AuditArguments.
const (
	ArgumentsNone     = "none"
	ArgumentsHash     = "hash"
	ArgumentsRedacted = "redacted"
)

// jsonSpace is JSON's insignificant whitespace (RFC 8259), narrower than
// unicode.IsSpace: a form feed before a value makes it invalid JSON.
const jsonSpace = " \t\n\r"

// Redacted replaces every string in redacted arguments.
const Redacted = "REDACTED"

// InvalidArguments is what the redacted mode gives for arguments that are
// not valid JSON.
const InvalidArguments = "(invalid JSON)"

// ReduceArguments returns what the audit log may record of a call's raw
// arguments under mode, an upstream's audit_arguments. It never returns
// a value from args:
//   - "none", "" or anything unknown: "";
//   - "hash": "sha256:" and the hex SHA-256 of args with insignificant
//     whitespace removed, so that the same arguments give the same hash
//     however they were formatted (member order still counts). Arguments
//     from a small set (a yes/no flag) can be found again by hashing
//     each candidate: use it to correlate calls, not to hide values;
//   - "redacted": the JSON with only its shape kept: object keys, nesting
//     and array lengths stay, every string becomes "REDACTED", every
//     number 0 and every boolean false; null stays null.
//
// Absent arguments (empty or null) give "" in every mode.
func ReduceArguments(mode string, args json.RawMessage) string {
	args = bytes.Trim(args, jsonSpace)
	if len(args) == 0 || string(args) == "null" {
		return ""
	}
	switch mode {
	case ArgumentsHash:
		var buf bytes.Buffer
		data := []byte(args)
		if json.Compact(&buf, args) == nil {
			data = buf.Bytes()
		}
		sum := sha256.Sum256(data)
		return "sha256:" + hex.EncodeToString(sum[:])
	case ArgumentsRedacted:
		out, err := redact(args)
		if err != nil {
			return InvalidArguments
		}
		return string(out)
	}
	return ""
}

// redact re-encodes the JSON value data token by token, keeping keys and
// structure and replacing every scalar but null.
func redact(data []byte) ([]byte, error) {
	// Token alone would accept a stream of values ("1 2").
	if !json.Valid(data) {
		return nil, errors.New("invalid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out []byte
	// stack holds, for each open object or array, whether the next token
	// is an object key, and whether a value has been written (for commas).
	type frame struct {
		object, wantKey, first bool
	}
	var stack []frame
	beforeValue := func() {
		if len(stack) == 0 {
			return
		}
		f := &stack[len(stack)-1]
		if f.object {
			// A value follows its key, which wrote the comma.
			f.wantKey = true
			return
		}
		if !f.first {
			out = append(out, ',')
		}
		f.first = false
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.object && f.wantKey {
				if key, ok := tok.(string); ok {
					if !f.first {
						out = append(out, ',')
					}
					f.first = false
					f.wantKey = false
					k, _ := json.Marshal(key)
					out = append(append(out, k...), ':')
					continue
				}
			}
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				beforeValue()
				out = append(out, byte(v))
				stack = append(stack, frame{object: v == '{', wantKey: v == '{', first: true})
			case '}', ']':
				stack = stack[:len(stack)-1]
				out = append(out, byte(v))
			}
		case string:
			beforeValue()
			out = append(out, `"`+Redacted+`"`...)
		case json.Number:
			beforeValue()
			out = append(out, '0')
		case bool:
			beforeValue()
			out = append(out, "false"...)
		case nil:
			beforeValue()
			out = append(out, "null"...)
		default:
			return nil, errors.New("unexpected JSON token")
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no JSON value")
	}
	return out, nil
}
