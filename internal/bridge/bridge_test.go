package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/own"
	"github.com/mcpgw/gateway/internal/session"
)

// capNames is Options.Caps: the names of a capabilities object's members.
func capNames(raw json.RawMessage) map[string]bool {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// fakeOut is a call's output sink: it records the events sent ahead of
// the response.
type fakeOut struct {
	events   [][]byte
	collects bool
	gone     bool
}

func (o *fakeOut) Event(msg []byte) error {
	if o.gone {
		return errors.New("client gone")
	}
	o.events = append(o.events, msg)
	return nil
}

func (o *fakeOut) Collects() bool { return o.collects }

// reply is one answer the gateway gave an upstream's request.
type reply struct {
	session string
	id      string
	result  string
	code    int64
}

// fakeUpstream records the answers to its requests.
type fakeUpstream struct {
	name    string
	mu      sync.Mutex
	replies []reply
}

func (u *fakeUpstream) Name() string           { return u.name }
func (u *fakeUpstream) Timeout() time.Duration { return time.Minute }
func (u *fakeUpstream) Reply(_ context.Context, us session.Upstream, id jsonrpc.ID, result json.RawMessage, e *jsonrpc.Error) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := reply{session: us.SessionID, id: string(id.Raw()), result: string(result)}
	if e != nil {
		r.code = e.Code
	}
	u.replies = append(u.replies, r)
	return nil
}

func (u *fakeUpstream) take() []reply {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.replies
	u.replies = nil
	return r
}

func request(t *testing.T, raw string) *jsonrpc.Message {
	t.Helper()
	msg, err := jsonrpc.Decode([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func TestInputCapability(t *testing.T) {
	for method, want := range map[string]string{
		"elicitation/create":     "elicitation",
		"sampling/createMessage": "sampling",
		"roots/list":             "roots",
		"ping":                   "",
		"tools/call":             "",
	} {
		if got := InputCapability(method); got != want {
			t.Errorf("InputCapability(%q) = %q, want %q", method, got, want)
		}
	}
}

// TestLacks: a request for input needs its capability, and an
// elicitation's mode or a sampling request's tools their sub-capability
// (2025-11-25 client/elicitation and client/sampling, "Capabilities");
// an empty elicitation object declares form mode.
func TestLacks(t *testing.T) {
	b := New(Options{Caps: capNames})
	for _, tc := range []struct {
		caps, msg  string
		capability string
		sub        string
		lacks      bool
	}{
		{caps: `{}`, msg: `{"jsonrpc":"2.0","id":1,"method":"roots/list"}`, capability: "roots", lacks: true},
		{caps: `{"roots":{}}`, msg: `{"jsonrpc":"2.0","id":1,"method":"roots/list"}`},
		{caps: `{"elicitation":{}}`, msg: `{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"m"}}`},
		{caps: `{"elicitation":{}}`, msg: `{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"mode":"url","url":"https://x"}}`, capability: "elicitation", sub: "url", lacks: true},
		{caps: `{"elicitation":{"url":{}}}`, msg: `{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"mode":"url","url":"https://x"}}`},
		{caps: `{"elicitation":{"url":{}}}`, msg: `{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"m"}}`, capability: "elicitation", sub: "form", lacks: true},
		{caps: `{"elicitation":{"form":{},"url":{}}}`, msg: `{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"m"}}`},
		{caps: `{"sampling":{}}`, msg: `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"messages":[]}}`},
		{caps: `{"sampling":{}}`, msg: `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"messages":[],"tools":[{"name":"t"}]}}`, capability: "sampling", sub: "tools", lacks: true},
		{caps: `{"sampling":{"tools":{}}}`, msg: `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"messages":[],"tools":[{"name":"t"}]}}`},
		{caps: `{}`, msg: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}, // no request for input
	} {
		c, sub, lacks := b.Lacks(&Caller{Caps: json.RawMessage(tc.caps)}, request(t, tc.msg))
		if c != tc.capability || sub != tc.sub || lacks != tc.lacks {
			t.Errorf("caps %s, %s: Lacks = %q, %q, %v; want %q, %q, %v", tc.caps, tc.msg, c, sub, lacks, tc.capability, tc.sub, tc.lacks)
		}
	}
}

// TestUpstreamRequestRoundTrip: an upstream's request for input reaches a
// session client that can answer it under an id of the gateway's (never
// the upstream's own), and the client's answer goes back to that
// upstream, on the session route gives, with the upstream's id.
func TestUpstreamRequestRoundTrip(t *testing.T) {
	b := New(Options{Caps: capNames})
	up := &fakeUpstream{name: "alpha"}
	us := session.Upstream{SessionID: "u-1"}
	who := &Caller{Principal: "p", Tenant: "t", Session: "g-1", Caps: json.RawMessage(`{"elicitation":{}}`)}
	out := &fakeOut{}
	ctx := context.Background()

	b.UpstreamRequest(ctx, who, out, up, us, request(t, `{"jsonrpc":"2.0","id":"up-7","method":"elicitation/create","params":{"message":"Name?"}}`))
	if len(out.events) != 1 || len(up.take()) != 0 {
		t.Fatalf("events %q: want the request forwarded, and nothing answered yet", out.events)
	}
	fwd := request(t, string(out.events[0]))
	if fwd.Method != "elicitation/create" || !strings.Contains(string(fwd.Params), "Name?") {
		t.Errorf("forwarded %s", out.events[0])
	}
	var fid string
	if err := json.Unmarshal(fwd.ID.Raw(), &fid); err != nil || !strings.HasPrefix(fid, forwardedPrefix) || strings.Contains(fid, "up-7") {
		t.Fatalf("forwarded id %s: want the gateway's own, not the upstream's", fwd.ID.Raw())
	}

	answer := `{"jsonrpc":"2.0","id":` + string(fwd.ID.Raw()) + `,"result":{"action":"accept","content":{"name":"x"}}}`
	var routed string
	b.ClientResponse(ctx, who, request(t, answer), func(name string) (Upstream, session.Upstream, bool) {
		routed = name
		return up, us, true
	})
	got := up.take()
	if routed != "alpha" || len(got) != 1 || got[0] != (reply{session: "u-1", id: `"up-7"`, result: `{"action":"accept","content":{"name":"x"}}`}) {
		t.Fatalf("routed to %q, replies %+v", routed, got)
	}

	// The same answer where the tenant may no longer use the upstream,
	// and answers to nothing the gateway forwarded, reach no upstream.
	for _, a := range []string{
		answer,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
		`{"jsonrpc":"2.0","id":"client-own","result":{}}`,
		`{"jsonrpc":"2.0","id":"` + forwardedPrefix + `alpha.!!","result":{}}`,
		`{"jsonrpc":"2.0","id":"` + forwardedPrefix + `nodot","result":{}}`,
	} {
		b.ClientResponse(ctx, who, request(t, a), func(string) (Upstream, session.Upstream, bool) {
			return up, us, a != answer
		})
		if got := up.take(); len(got) != 0 {
			t.Errorf("answer %s reached the upstream: %+v", a, got)
		}
	}
}

// TestUpstreamRequestRefused: what cannot reach the client is answered
// to the upstream at once: ping by the gateway, a request for input the
// client did not declare (or a stateless caller's, or a batch's) with
// method not found, and one whose client is gone with an internal error.
func TestUpstreamRequestRefused(t *testing.T) {
	b := New(Options{Caps: capNames})
	up := &fakeUpstream{name: "alpha"}
	us := session.Upstream{SessionID: "u-1"}
	ctx := context.Background()
	inSession := func(caps string) *Caller { return &Caller{Session: "g-1", Caps: json.RawMessage(caps)} }
	for _, tc := range []struct {
		name string
		who  *Caller
		out  *fakeOut
		msg  string
		want reply
	}{
		{"ping", inSession(`{}`), &fakeOut{}, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, reply{session: "u-1", id: "1", result: "{}"}},
		{"undeclared", inSession(`{"roots":{}}`), &fakeOut{}, `{"jsonrpc":"2.0","id":2,"method":"sampling/createMessage","params":{"messages":[]}}`, reply{session: "u-1", id: "2", code: jsonrpc.CodeMethodNotFound}},
		{"url mode undeclared", inSession(`{"elicitation":{}}`), &fakeOut{}, `{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"mode":"url","url":"https://x"}}`, reply{session: "u-1", id: "3", code: jsonrpc.CodeMethodNotFound}},
		{"stateless", &Caller{Stateless: true, Caps: json.RawMessage(`{"roots":{}}`)}, &fakeOut{}, `{"jsonrpc":"2.0","id":4,"method":"roots/list"}`, reply{session: "u-1", id: "4", code: jsonrpc.CodeMethodNotFound}},
		{"batch", inSession(`{"roots":{}}`), &fakeOut{collects: true}, `{"jsonrpc":"2.0","id":5,"method":"roots/list"}`, reply{session: "u-1", id: "5", code: jsonrpc.CodeMethodNotFound}},
		{"client gone", inSession(`{"roots":{}}`), &fakeOut{gone: true}, `{"jsonrpc":"2.0","id":6,"method":"roots/list"}`, reply{session: "u-1", id: "6", code: jsonrpc.CodeInternalError}},
	} {
		b.UpstreamRequest(ctx, tc.who, tc.out, up, us, request(t, tc.msg))
		got := up.take()
		if len(got) != 1 || got[0] != tc.want || len(tc.out.events) != 0 {
			t.Errorf("%s: replies %+v, events %q; want %+v and no event", tc.name, got, tc.out.events, tc.want)
		}
	}
}

// heldStream is an upstream's answer that sends nothing more until the
// call is cancelled.
type heldStream struct {
	done   chan struct{}
	once   sync.Once
	closed chan struct{}
}

func newHeldStream() *heldStream {
	return &heldStream{done: make(chan struct{}), closed: make(chan struct{})}
}

func (s *heldStream) cancel(error) { s.once.Do(func() { close(s.done) }) }

func (s *heldStream) Next() (*jsonrpc.Message, []byte, error) {
	<-s.done
	return nil, nil, context.Canceled
}

func (s *heldStream) Close() error {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	return nil
}

func (s *heldStream) Session() session.Upstream { return session.Upstream{SessionID: "u-1"} }

// TestPark: a stateless caller's call whose upstream asks for input is
// answered input_required, its upstream stream left to a pump the owner
// waits for; a principal parks at most max calls, and a place is free
// again once its pump ended (here, as the owner closes).
func TestPark(t *testing.T) {
	store := session.NewMemory(session.MemoryOptions{IdleTTL: time.Hour})
	t.Cleanup(func() { store.Close() })
	var g own.Group
	b := New(Options{Mailbox: store, Caps: capNames, Own: &g})
	up := &fakeUpstream{name: "alpha"}
	ask := request(t, `{"jsonrpc":"2.0","id":"up-1","method":"elicitation/create","params":{"message":"Name?"}}`)
	park := func(principal string) (*heldStream, json.RawMessage, error) {
		s := newHeldStream()
		who := &Caller{Principal: principal, Tenant: "t", Stateless: true, Caps: json.RawMessage(`{"elicitation":{}}`)}
		res, err := b.Park(context.Background(), who, &Call{Method: "tools/call", Target: "alpha__ask"}, up, s, ask, s.cancel, 1)
		return s, res, err
	}

	s1, res, err := park("alice")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		ResultType    string `json:"resultType"`
		InputRequests map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inputRequests"`
		RequestState string `json:"requestState"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.ResultType != "input_required" || !strings.HasPrefix(r.RequestState, requestStatePrefix) ||
		r.InputRequests["input-1"].Method != "elicitation/create" || !strings.Contains(string(r.InputRequests["input-1"].Params), "Name?") {
		t.Fatalf("Park = %s, %v", res, err)
	}
	if strings.Contains(r.RequestState, "alice") {
		t.Errorf("the request state %q names the principal", r.RequestState)
	}

	// alice's one place is taken; bob has his own.
	if _, _, err := park("alice"); !errors.As(err, new(*LimitError)) {
		t.Errorf("alice's second parked call: %v, want a *LimitError", err)
	}
	s2, _, err := park("bob")
	if err != nil {
		t.Fatalf("bob's parked call: %v", err)
	}

	// Close ends both pumps, which cancel their upstream calls and close
	// their streams, and waits for them; nothing parks after it.
	g.Close()
	for _, s := range []*heldStream{s1, s2} {
		select {
		case <-s.done:
		default:
			t.Error("a pump's upstream call was not cancelled")
		}
		select {
		case <-s.closed:
		default:
			t.Error("a pump's upstream stream was not closed")
		}
	}
	if _, _, err := park("carol"); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("Park after Close: %v", err)
	}
	if n := len(b.parked.n); n != 0 {
		t.Errorf("%d principals still hold parked places", n)
	}
}
