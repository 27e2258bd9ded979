package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// TestAppendRequestParams: a request with object params is byte for byte
// the request with their encoding as raw params, with any id (or none),
// any method, and an edited object; raw and absent params are
// AppendRequest's.
func TestAppendRequestParams(t *testing.T) {
	ids := []ID{{}, IntID(7), StringID("c.1/2")}
	methods := []string{"tools/call", `odd"method<`}
	objects := []string{`{}`, `{"name":"up__echo","arguments":{"text":"` + strings.Repeat("x", 10000) + `"}}`,
		`{ "name" : "é\u00e9" , "_meta" : { "k" : [1, 2] } }`}
	for _, id := range ids {
		for _, method := range methods {
			for _, in := range objects {
				o, err := jsonx.ParseObject([]byte(in))
				if err != nil {
					t.Fatal(err)
				}
				o.SetString("name", "echo")
				p := ObjectParams(o)
				want := AppendRequest(nil, id, method, o.Bytes())
				if got := AppendRequestParams(nil, id, method, p); string(got) != string(want) {
					t.Errorf("object params %.40s: got %.80s, want %.80s", in, got, want)
				}
				if got := AppendRequestParams([]byte("x"), id, method, p); string(got) != "x"+string(want) {
					t.Errorf("object params appended to x: got %.80s", got)
				}
				if got := string(p.Bytes()); got != string(o.Bytes()) {
					t.Errorf("Bytes() = %.80s, want %.80s", got, o.Bytes())
				}
				if got, ok := p.Object(); !ok || got != o {
					t.Errorf("Object() = %v, %v; want the object", got, ok)
				}
			}
			for _, raw := range []json.RawMessage{nil, json.RawMessage(`{"a":1}`)} {
				p := RawParams(raw)
				if got, want := AppendRequestParams(nil, id, method, p), AppendRequest(nil, id, method, raw); string(got) != string(want) {
					t.Errorf("raw params %s: got %s, want %s", raw, got, want)
				}
				if _, ok := p.Object(); ok || string(p.Bytes()) != string(raw) {
					t.Errorf("raw params %s: Bytes() = %s, Object() ok = %v", raw, p.Bytes(), ok)
				}
			}
		}
	}
}

// TestAppendRequestParamsOneAllocation: a 10 KB object is encoded into
// the request's buffer, allocated once, not into one of its own first.
func TestAppendRequestParamsOneAllocation(t *testing.T) {
	o, err := jsonx.ParseObject([]byte(`{"name":"up__echo","arguments":{"text":"` + strings.Repeat("x", 10000) + `"}}`))
	if err != nil {
		t.Fatal(err)
	}
	o.SetString("name", "echo")
	p, id := ObjectParams(o), IntID(7)
	// Grown once: the buffer is the size asked for, rounded up to its
	// allocation size class, never the doubling of a second growth.
	out := AppendRequestParams(nil, id, "tools/call", p)
	if slack := cap(out) - len(out); slack > len(out)/8 {
		t.Errorf("AppendRequestParams left %d bytes unused of %d: the buffer grew more than once", slack, cap(out))
	}
	if raceEnabled {
		return // the race detector's instrumentation allocates too
	}
	if n := testing.AllocsPerRun(20, func() { AppendRequestParams(nil, id, "tools/call", p) }); n != 1 {
		t.Errorf("AppendRequestParams made %v allocations, want 1", n)
	}
}
