// Package jsonrpc decodes and encodes the JSON-RPC 2.0 messages MCP is built on,
// keeping params, results and error data as raw JSON.
//
// The gateway looks inside a message only where it must (method, id, a name or
// URI to route on); everything else stays as the bytes the peer sent, so
// unknown fields survive the trip. Decoding is strict about the envelope
// (JSON-RPC 2.0, id type, exactly one of result/error) and case-sensitive
// about member names: a "Method" key is not a "method".
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// The JSON-RPC 2.0 error codes; MCP's own are in internal/protocol.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// An Error is a JSON-RPC error object. It implements error, and two Errors
// match with errors.Is when their codes are equal, so a sentinel such as
// [ErrInvalidParams] can be wrapped with context and still be matched.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrParse          = &Error{Code: CodeParseError, Message: "parse error"}
	ErrInvalidRequest = &Error{Code: CodeInvalidRequest, Message: "invalid request"}
	ErrMethodNotFound = &Error{Code: CodeMethodNotFound, Message: "method not found"}
	ErrInvalidParams  = &Error{Code: CodeInvalidParams, Message: "invalid params"}
	ErrInternal       = &Error{Code: CodeInternalError, Message: "internal error"}
)

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code int64, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError converts err to a JSON-RPC error object. An *Error anywhere in err's
// chain is returned as is; anything else becomes an internal error whose
// message is err's text.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternalError, Message: err.Error()}
}

// An ID is a request id as raw JSON: a string or a number, kept byte for byte
// so that a response carries exactly the id its request had. The zero ID means
// "absent" (a notification); [NullID] is the explicit null used in error
// responses to requests whose id could not be read.
type ID struct{ raw []byte }

// NullID is the id of an error response to an unreadable request.
var NullID = ID{raw: []byte("null")}

// StringID returns a string id.
func StringID(s string) ID {
	b, _ := json.Marshal(s)
	return ID{raw: b}
}

// IntID returns a numeric id.
func IntID(n int64) ID { return ID{raw: strconv.AppendInt(nil, n, 10)} }

// RawID returns the id whose JSON encoding is b, after checking that b is a
// JSON string or number.
func RawID(b []byte) (ID, error) {
	b = bytes.TrimSpace(b)
	if !validID(b) {
		return ID{}, fmt.Errorf("%w: id must be a string or a number", ErrInvalidRequest)
	}
	return ID{raw: bytes.Clone(b)}, nil
}

// IsValid reports whether the id is present (including null).
func (id ID) IsValid() bool { return len(id.raw) > 0 }

// IsNull reports whether the id is the JSON null.
func (id ID) IsNull() bool { return string(id.raw) == "null" }

// Raw returns the id's JSON encoding; nil for an absent id.
func (id ID) Raw() []byte { return id.raw }

// String returns the id's JSON encoding, for logs and map keys.
func (id ID) String() string { return string(id.raw) }

// MarshalJSON implements json.Marshaler.
func (id ID) MarshalJSON() ([]byte, error) {
	if len(id.raw) == 0 {
		return []byte("null"), nil
	}
	return id.raw, nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (id *ID) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*id = NullID
		return nil
	}
	v, err := RawID(b)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

func validID(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	switch c := b[0]; {
	case c == '"':
		var s string
		return json.Unmarshal(b, &s) == nil
	case c == '-' || (c >= '0' && c <= '9'):
		var n json.Number
		return json.Unmarshal(b, &n) == nil
	}
	return false
}

// Kind says which of the four JSON-RPC message shapes a Message is.
type Kind int

const (
	KindRequest       Kind = iota + 1 // method and id
	KindNotification                  // method, no id
	KindResponse                      // id and result
	KindErrorResponse                 // id and error
)

// A Message is one decoded JSON-RPC message. Params, Result and the error's
// Data are the peer's bytes, unparsed.
type Message struct {
	Kind   Kind
	ID     ID
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *Error
}

// IsCall reports whether m is a request (expects a response).
func (m *Message) IsCall() bool { return m.Kind == KindRequest }

// wire is the envelope as it appears on the wire. Pointers tell "absent"
// from "null".
type wire struct {
	JSONRPC *string          `json:"jsonrpc"`
	ID      *json.RawMessage `json:"id"`
	Method  *string          `json:"method"`
	Params  json.RawMessage  `json:"params"`
	Result  *json.RawMessage `json:"result"`
	Error   *json.RawMessage `json:"error"`
}

// IsBatch reports whether data is a JSON array (a JSON-RPC batch), looking
// only at its first non-space byte.
func IsBatch(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '['
}

// Decode decodes one JSON-RPC message. Malformed JSON is an error matching
// [ErrParse]; well-formed JSON that is not a valid JSON-RPC 2.0 message is an
// error matching [ErrInvalidRequest]. When the error is ErrInvalidRequest and
// the id could be read, the returned Message carries it, so the caller can
// answer with that id.
func Decode(data []byte) (*Message, error) {
	if !jsonx.Valid(data) {
		return nil, fmt.Errorf("%w: body is not valid JSON", ErrParse)
	}
	var w wire
	if err := unmarshalStrictCase(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	m := &Message{}
	if w.ID != nil {
		if err := m.ID.UnmarshalJSON(*w.ID); err != nil {
			return nil, err
		}
	}
	if w.JSONRPC == nil || *w.JSONRPC != "2.0" {
		return m, fmt.Errorf(`%w: "jsonrpc" must be "2.0"`, ErrInvalidRequest)
	}
	switch {
	case w.Method != nil:
		if w.Result != nil || w.Error != nil {
			return m, fmt.Errorf("%w: a request cannot carry result or error", ErrInvalidRequest)
		}
		if *w.Method == "" {
			return m, fmt.Errorf("%w: empty method", ErrInvalidRequest)
		}
		if p := bytes.TrimLeft(w.Params, " \t\r\n"); len(p) > 0 && p[0] != '{' && p[0] != '[' && string(p) != "null" {
			return m, fmt.Errorf("%w: params must be an object or an array", ErrInvalidRequest)
		}
		m.Method = *w.Method
		if string(bytes.TrimSpace(w.Params)) != "null" {
			m.Params = w.Params
		}
		if w.ID == nil {
			m.Kind = KindNotification
		} else {
			if m.ID.IsNull() {
				return m, fmt.Errorf("%w: request id must not be null", ErrInvalidRequest)
			}
			m.Kind = KindRequest
		}
	case w.Result != nil && w.Error == nil:
		if w.ID == nil {
			return m, fmt.Errorf("%w: response without id", ErrInvalidRequest)
		}
		m.Kind, m.Result = KindResponse, *w.Result
	case w.Error != nil && w.Result == nil:
		if w.ID == nil {
			return m, fmt.Errorf("%w: response without id", ErrInvalidRequest)
		}
		var e Error
		if err := json.Unmarshal(*w.Error, &e); err != nil {
			return m, fmt.Errorf("%w: bad error object: %v", ErrInvalidRequest, err)
		}
		m.Kind, m.Error = KindErrorResponse, &e
	default:
		return m, fmt.Errorf("%w: not a request, notification or response", ErrInvalidRequest)
	}
	return m, nil
}

// unmarshalStrictCase decodes the envelope of validated data, rejecting
// member names that differ from the expected ones only by case ("ID",
// "Method"), which encoding/json would otherwise accept silently, and
// duplicate members, which peers resolve differently. It finds the members'
// raw values without decoding or copying them: params and results are
// passed on, not read.
func unmarshalStrictCase(data []byte, w *wire) error {
	o, err := jsonx.ParseValidObject(data)
	if err != nil {
		if errors.Is(err, jsonx.ErrNotObject) {
			return errors.New("message must be a JSON object")
		}
		return err
	}
	for _, m := range o.Members {
		v := json.RawMessage(m.Value)
		switch m.Name {
		case "jsonrpc":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return errors.New(`"jsonrpc" must be a string`)
			}
			w.JSONRPC = &s
		case "id":
			w.ID = &v
		case "method":
			if len(v) == 0 || v[0] != '"' {
				return errors.New(`"method" must be a string`)
			}
			s, err := jsonx.Unquote(v)
			if err != nil {
				return errors.New(`"method" must be a string`)
			}
			w.Method = &s
		case "params":
			w.Params = v
		case "result":
			w.Result = &v
		case "error":
			w.Error = &v
		default:
			for _, known := range [...]string{"jsonrpc", "id", "method", "params", "result", "error"} {
				if equalFoldASCII(m.Name, known) {
					return fmt.Errorf("unexpected member %q", m.Name)
				}
			}
		}
	}
	return nil
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// AppendRequest appends the encoding of a request (or, with a zero id, a
// notification) to dst. params must be valid JSON or nil.
func AppendRequest(dst []byte, id ID, method string, params json.RawMessage) []byte {
	// One allocation at most, of the final size (a method with escapes
	// aside), however large params are.
	dst = slices.Grow(dst, len(params)+len(id.raw)+len(method)+48)
	dst = appendRequestHead(dst, id, method)
	if len(params) > 0 {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// Params are the params of a request about to be sent: raw JSON, or an
// object that is encoded only as part of the request (see
// AppendRequestParams). A method that edits the client's params (a tool's
// name back to the upstream's own) passes the edited object, so that they
// are encoded once, straight into the request's body, rather than into a
// buffer of their own that the body then copies (for a 10 KB call, a
// second copy of 10 KB). The zero Params are absent params.
type Params struct {
	raw json.RawMessage
	obj *jsonx.Object
}

// RawParams returns params that are raw, valid JSON (or nil: absent).
func RawParams(raw json.RawMessage) Params { return Params{raw: raw} }

// ObjectParams returns params that are the object o. o must not change
// once given: every encoding of the Params is of o as it is then.
func ObjectParams(o *jsonx.Object) Params { return Params{obj: o} }

// Object returns the object of params made by ObjectParams, and whether
// they were.
func (p Params) Object() (*jsonx.Object, bool) { return p.obj, p.obj != nil }

// Bytes returns the params as raw JSON: the raw params as they are, or a
// new encoding of the object. A caller that needs them as bytes pays the
// copy the object spares the others.
func (p Params) Bytes() json.RawMessage {
	if p.obj != nil {
		return p.obj.Bytes()
	}
	return p.raw
}

// AppendRequestParams is AppendRequest with params p: byte for byte what
// AppendRequest(dst, id, method, p.Bytes()) appends, with an object
// encoded in place, in one buffer grown once.
func AppendRequestParams(dst []byte, id ID, method string, p Params) []byte {
	if p.obj == nil {
		return AppendRequest(dst, id, method, p.raw)
	}
	dst = slices.Grow(dst, p.obj.Size()+len(id.raw)+len(method)+48)
	dst = appendRequestHead(dst, id, method)
	dst = append(dst, `,"params":`...)
	dst = p.obj.AppendTo(dst)
	return append(dst, '}')
}

// appendRequestHead appends a request's members before its params.
func appendRequestHead(dst []byte, id ID, method string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	if id.IsValid() {
		dst = append(dst, `,"id":`...)
		dst = append(dst, id.raw...)
	}
	dst = append(dst, `,"method":`...)
	return appendString(dst, method)
}

// AppendResult appends the encoding of a success response. result must be
// valid JSON; nil encodes as {}.
func AppendResult(dst []byte, id ID, result json.RawMessage) []byte {
	dst = slices.Grow(dst, len(result)+len(id.raw)+40)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"result":`...)
	if len(result) == 0 {
		dst = append(dst, "{}"...)
	} else {
		dst = append(dst, result...)
	}
	return append(dst, '}')
}

// AppendError appends the encoding of an error response. A zero id encodes as
// null, as JSON-RPC requires when the request's id is unknown.
func AppendError(dst []byte, id ID, e *Error) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, e.Code, 10)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, e.Message)
	if len(e.Data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = append(dst, e.Data...)
	}
	return append(dst, "}}"...)
}

// Encode re-encodes m, with its raw parts unchanged.
func Encode(m *Message) []byte {
	switch m.Kind {
	case KindRequest, KindNotification:
		return AppendRequest(nil, m.ID, m.Method, m.Params)
	case KindErrorResponse:
		return AppendError(nil, m.ID, m.Error)
	default:
		return AppendResult(nil, m.ID, m.Result)
	}
}

func appendID(dst []byte, id ID) []byte {
	if !id.IsValid() {
		return append(dst, "null"...)
	}
	return append(dst, id.raw...)
}

func appendString(dst []byte, s string) []byte { return jsonx.AppendString(dst, s) }
