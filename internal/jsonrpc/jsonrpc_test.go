package jsonrpc

import (
	"bytes"
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		kind    Kind
		id      string
		method  string
		wantErr error
	}{
		{name: "request", in: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, kind: KindRequest, id: "1", method: "ping"},
		{name: "string id kept verbatim", in: `{"jsonrpc":"2.0","id":"a\u0062","method":"x","params":{}}`, kind: KindRequest, id: `"a\u0062"`, method: "x"},
		{name: "big number id kept verbatim", in: `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"x"}`, kind: KindRequest, id: "123456789012345678901234567890", method: "x"},
		{name: "notification", in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, kind: KindNotification, method: "notifications/initialized"},
		{name: "response", in: `{"jsonrpc":"2.0","id":7,"result":{"a":1}}`, kind: KindResponse, id: "7"},
		{name: "error response", in: `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"nope"}}`, kind: KindErrorResponse, id: "7"},
		{name: "not json", in: `{"jsonrpc":`, wantErr: ErrParse},
		{name: "empty", in: ``, wantErr: ErrParse},
		{name: "array element is not an object", in: `"hello"`, wantErr: ErrInvalidRequest},
		{name: "wrong version", in: `{"jsonrpc":"1.0","id":1,"method":"x"}`, wantErr: ErrInvalidRequest},
		{name: "missing version", in: `{"id":1,"method":"x"}`, wantErr: ErrInvalidRequest},
		{name: "object id", in: `{"jsonrpc":"2.0","id":{},"method":"x"}`, wantErr: ErrInvalidRequest},
		{name: "bool id", in: `{"jsonrpc":"2.0","id":true,"method":"x"}`, wantErr: ErrInvalidRequest},
		{name: "null request id", in: `{"jsonrpc":"2.0","id":null,"method":"x"}`, wantErr: ErrInvalidRequest},
		{name: "numeric method", in: `{"jsonrpc":"2.0","id":1,"method":3}`, wantErr: ErrInvalidRequest},
		{name: "empty method", in: `{"jsonrpc":"2.0","id":1,"method":""}`, wantErr: ErrInvalidRequest},
		{name: "scalar params", in: `{"jsonrpc":"2.0","id":1,"method":"x","params":3}`, wantErr: ErrInvalidRequest},
		{name: "result and error", in: `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`, wantErr: ErrInvalidRequest},
		{name: "case variant member", in: `{"jsonrpc":"2.0","id":1,"method":"x","Method":"y"}`, wantErr: ErrInvalidRequest},
		{name: "nothing", in: `{"jsonrpc":"2.0"}`, wantErr: ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode([]byte(tt.in))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Decode error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != tt.kind || m.ID.String() != tt.id || m.Method != tt.method {
				t.Errorf("got kind %v id %q method %q, want %v %q %q", m.Kind, m.ID, m.Method, tt.kind, tt.id, tt.method)
			}
		})
	}
}

func TestInvalidRequestKeepsID(t *testing.T) {
	m, err := Decode([]byte(`{"jsonrpc":"1.0","id":"abc","method":"x"}`))
	if !errors.Is(err, ErrInvalidRequest) || m == nil || m.ID.String() != `"abc"` {
		t.Fatalf("got %v, %v", m, err)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"z":[1,2]},"x-extra":null}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`,
		`{"jsonrpc":"2.0","id":"s","result":{"content":[],"x-unknown":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad \"x\"","data":{"k":1}}}`,
	} {
		m, err := Decode([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(Encode(m)); got != in {
			t.Errorf("Encode = %s\nwant     %s", got, in)
		}
	}
}

func TestErrorIs(t *testing.T) {
	err := Errorf(CodeInvalidParams, "Unknown tool: x")
	if !errors.Is(err, ErrInvalidParams) || errors.Is(err, ErrMethodNotFound) {
		t.Error("errors.Is does not compare codes")
	}
	if e := AsError(errors.New("boom")); e.Code != CodeInternalError {
		t.Errorf("AsError code = %d", e.Code)
	}
}

func TestIsBatch(t *testing.T) {
	if !IsBatch([]byte(" \n[{}]")) || IsBatch([]byte(`{"a":[1]}`)) || IsBatch(nil) {
		t.Error("IsBatch wrong")
	}
}

// FuzzDecode checks that the decoder never panics, that whatever it accepts
// re-encodes to a message it accepts again with the same meaning, and that
// ids survive byte for byte.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`,
		`{"jsonrpc":"2.0","id":"x","result":{}}`,
		`{"jsonrpc":"2.0","id":-1.5e3,"error":{"code":-32603,"message":"m","data":[1]}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1,"ID":2,"method":"ping"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrParse) && !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v matches neither ErrParse nor ErrInvalidRequest", err)
			}
			return
		}
		out := Encode(m)
		m2, err := Decode(out)
		if err != nil {
			t.Fatalf("re-encoded message %s does not decode: %v", out, err)
		}
		if m2.Kind != m.Kind || m2.Method != m.Method || !bytes.Equal(m2.ID.Raw(), m.ID.Raw()) {
			t.Fatalf("round trip changed the message: %+v vs %+v", m, m2)
		}
	})
}
