package pipe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
)

// fakeConn is a server the test plays: it answers initialize itself and
// hands the test everything else the Handler sends (out); the test sends
// as the server with send.
type fakeConn struct {
	in   chan []byte
	out  chan []byte
	done chan struct{}
	once sync.Once
}

func newFakeConn() *fakeConn {
	return &fakeConn{in: make(chan []byte, 64), out: make(chan []byte, 64), done: make(chan struct{})}
}

func (f *fakeConn) Send(ctx context.Context, msg []byte) error {
	m, err := jsonrpc.Decode(msg)
	if err != nil {
		return err
	}
	switch {
	case m.Method == "initialize":
		f.in <- jsonrpc.AppendResult(nil, m.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"resources":{"subscribe":true}},"serverInfo":{"name":"fake","version":"1"}}`))
		return nil
	case m.Method == "notifications/initialized":
		return nil
	}
	select {
	case f.out <- msg:
		return nil
	case <-f.done:
		return errors.New("closed")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeConn) Recv() ([]byte, error) {
	select {
	case m := <-f.in:
		return m, nil
	case <-f.done:
		return nil, io.EOF
	}
}

func (f *fakeConn) Close() error {
	f.once.Do(func() { close(f.done) })
	return nil
}

// next returns the next message the Handler sent the server.
func (f *fakeConn) next(t *testing.T) *jsonrpc.Message {
	t.Helper()
	select {
	case raw := <-f.out:
		m, err := jsonrpc.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("the server got nothing")
		return nil
	}
}

// send sends raw as the server.
func (f *fakeConn) send(raw string) { f.in <- []byte(raw) }

// routeRig is a Handler of one fakeConn, for every principal, behind an
// HTTP server: header X-Principal names the principal and the tenant.
type routeRig struct {
	t    *testing.T
	h    *Handler
	conn *fakeConn
	url  string
}

func newRouteRig(t *testing.T) *routeRig {
	return newRouteRigWith(t, func(req *http.Request) string { return req.Header.Get("X-Principal") })
}

// newRouteRigWith is newRouteRig with Options.Principal principal.
func newRouteRigWith(t *testing.T, principal func(*http.Request) string) *routeRig {
	r := &routeRig{t: t, conn: newFakeConn()}
	r.h = NewHandler(Options{
		Name:      "fake",
		Isolation: Shared,
		Principal: principal,
		Dial: func(context.Context, *http.Request, string) (Conn, error) {
			return r.conn, nil
		},
	})
	srv := httptest.NewServer(r.h)
	t.Cleanup(func() {
		srv.Close()
		r.h.Close()
	})
	r.url = srv.URL
	return r
}

func (r *routeRig) post(principal, sid, body string) *http.Response {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url, strings.NewReader(body))
	req.Header.Set("X-Principal", principal)
	req.Header.Set("Content-Type", "application/json")
	if sid != "" {
		req.Header.Set(protocol.HeaderSessionID, sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

func (r *routeRig) open(principal string) string {
	r.t.Helper()
	resp := r.post(principal, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		r.t.Fatalf("initialize: %s", resp.Status)
	}
	return resp.Header.Get(protocol.HeaderSessionID)
}

// stream reads the messages of an SSE response.
type stream struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func (s *stream) next(t *testing.T) *jsonrpc.Message {
	t.Helper()
	// A message that never comes fails the test rather than hanging it.
	stop := time.AfterFunc(10*time.Second, func() { s.resp.Body.Close() })
	defer stop.Stop()
	for s.sc.Scan() {
		if data, ok := strings.CutPrefix(s.sc.Text(), "data: "); ok {
			m, err := jsonrpc.Decode([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("stream ended: %v", s.sc.Err())
	return nil
}

func (r *routeRig) stream(resp *http.Response) *stream {
	r.t.Cleanup(func() { resp.Body.Close() })
	return &stream{resp: resp, sc: bufio.NewScanner(resp.Body)}
}

func (r *routeRig) listen(principal, sid string) *stream {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.url, nil)
	req.Header.Set("X-Principal", principal)
	req.Header.Set(protocol.HeaderSessionID, sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		r.t.Fatalf("GET: %v %v", resp, err)
	}
	return r.stream(resp)
}

// TestRouteServerRequests: a request of the server's goes to the one
// session with requests in flight; only that session may answer it; with
// two sessions' requests in flight, or none, the server gets -32601; a
// notification of no request is dropped while the Conn's sessions are two
// principals'.
func TestRouteServerRequests(t *testing.T) {
	r := newRouteRig(t)
	a, b := r.open("alice"), r.open("bob")
	callA := r.stream(r.post("alice", a, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`))
	idA := r.conn.next(t).ID

	r.conn.send(`{"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":{"message":"approve?"}}`)
	if m := callA.next(t); m.Method != "elicitation/create" {
		t.Fatalf("alice's stream got %+v, want the elicitation", m)
	}
	// Bob answers alice's question: dropped, as an unknown id would be.
	resp := r.post("bob", b, `{"jsonrpc":"2.0","id":"s1","result":{"action":"accept","content":{"who":"bob"}}}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("bob's answer: %s", resp.Status)
	}
	resp = r.post("alice", a, `{"jsonrpc":"2.0","id":"s1","result":{"action":"accept","content":{"who":"alice"}}}`)
	resp.Body.Close()
	if m := r.conn.next(t); !bytes.Contains(m.Result, []byte("alice")) {
		t.Fatalf("the server got %s, want alice's answer", jsonrpc.Encode(m))
	}

	// Bob's call in flight too: no one can tell whose a request is.
	callB := r.stream(r.post("bob", b, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"y"}}`))
	idB := r.conn.next(t).ID
	r.conn.send(`{"jsonrpc":"2.0","id":"s2","method":"sampling/createMessage","params":{}}`)
	m := r.conn.next(t)
	if m.Kind != jsonrpc.KindErrorResponse || m.Error.Code != jsonrpc.CodeMethodNotFound || string(m.ID.Raw()) != `"s2"` {
		t.Fatalf("the server got %s, want -32601 for s2", jsonrpc.Encode(m))
	}
	// A log message of no request: two principals, so no one gets it; the
	// response that follows is each stream's next message.
	r.conn.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"alice's secret"}}`)
	r.conn.send(`{"jsonrpc":"2.0","id":` + string(idA.Raw()) + `,"result":{"content":[]}}`)
	r.conn.send(`{"jsonrpc":"2.0","id":` + string(idB.Raw()) + `,"result":{"content":[]}}`)
	for _, s := range []*stream{callA, callB} {
		if m := s.next(t); m.Kind != jsonrpc.KindResponse || string(m.ID.Raw()) != "1" {
			t.Errorf("got %s, want the response", jsonrpc.Encode(m))
		}
	}
	// No request in flight: refused too, not sent to some stream.
	r.listen("alice", a)
	r.conn.send(`{"jsonrpc":"2.0","id":"s3","method":"roots/list"}`)
	if m := r.conn.next(t); m.Kind != jsonrpc.KindErrorResponse || m.Error.Code != jsonrpc.CodeMethodNotFound {
		t.Fatalf("the server got %s, want -32601 for s3", jsonrpc.Encode(m))
	}
	if n := r.h.refused.Load(); n != 2 {
		t.Errorf("%d refused, want 2", n)
	}
}

// TestRouteOnePrincipal: while every session of the Conn is one
// principal's, a notification of no request reaches them.
func TestRouteOnePrincipal(t *testing.T) {
	r := newRouteRig(t)
	a1, a2 := r.open("alice"), r.open("alice")
	s1, s2 := r.listen("alice", a1), r.listen("alice", a2)
	r.conn.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`)
	for _, s := range []*stream{s1, s2} {
		if m := s.next(t); m.Method != "notifications/message" {
			t.Errorf("got %s", jsonrpc.Encode(m))
		}
	}
}

// TestRouteUnknownPrincipal: without Options.Principal (gateway bridge),
// each session is taken for a principal of its own: a notification of no
// request reaches none of two sessions.
func TestRouteUnknownPrincipal(t *testing.T) {
	r := newRouteRigWith(t, nil)
	a1, a2 := r.open("alice"), r.open("alice")
	s1, s2 := r.listen("alice", a1), r.listen("alice", a2)
	r.conn.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`)
	r.conn.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	for _, s := range []*stream{s1, s2} {
		if m := s.next(t); m.Method != "notifications/tools/list_changed" {
			t.Errorf("got %s, want only list_changed", jsonrpc.Encode(m))
		}
	}
}

// TestRouteSubscriptions: resources/updated reaches the sessions that
// subscribed its URI; list_changed reaches every session; the server is
// subscribed once per URI, and unsubscribed when its last subscriber
// unsubscribes or ends.
func TestRouteSubscriptions(t *testing.T) {
	r := newRouteRig(t)
	a, b, c := r.open("alice"), r.open("bob"), r.open("carol")
	sa, sb, sc := r.listen("alice", a), r.listen("bob", b), r.listen("carol", c)

	subA := r.stream(r.post("alice", a, `{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":"file:///x"}}`))
	m := r.conn.next(t)
	if m.Method != "resources/subscribe" {
		t.Fatalf("the server got %s", jsonrpc.Encode(m))
	}
	r.conn.send(`{"jsonrpc":"2.0","id":` + string(m.ID.Raw()) + `,"result":{}}`)
	if m := subA.next(t); m.Kind != jsonrpc.KindResponse || string(m.ID.Raw()) != "5" {
		t.Fatalf("alice's subscribe: %s", jsonrpc.Encode(m))
	}
	// Bob's subscribe of the same URI is answered by the Handler.
	resp := r.post("bob", b, `{"jsonrpc":"2.0","id":6,"method":"resources/subscribe","params":{"uri":"file:///x"}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte(`"result"`)) {
		t.Fatalf("bob's subscribe: %s", body)
	}
	// Carol unsubscribes what she never subscribed: answered, and the
	// server hears nothing of it.
	resp = r.post("carol", c, `{"jsonrpc":"2.0","id":7,"method":"resources/unsubscribe","params":{"uri":"file:///x"}}`)
	resp.Body.Close()

	r.conn.send(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///x"}}`)
	r.conn.send(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///y"}}`)
	r.conn.send(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`)
	for _, s := range []*stream{sa, sb} {
		if m := s.next(t); m.Method != "notifications/resources/updated" || !bytes.Contains(m.Params, []byte("file:///x")) {
			t.Errorf("a subscriber got %s, want the update of file:///x", jsonrpc.Encode(m))
		}
	}
	for _, s := range []*stream{sa, sb, sc} {
		if m := s.next(t); m.Method != "notifications/resources/list_changed" {
			t.Errorf("got %s, want list_changed", jsonrpc.Encode(m))
		}
	}

	// Alice unsubscribes: bob still holds it, the server hears nothing.
	// Bob's session ends: the server is unsubscribed.
	resp = r.post("alice", a, `{"jsonrpc":"2.0","id":8,"method":"resources/unsubscribe","params":{"uri":"file:///x"}}`)
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodDelete, r.url, nil)
	req.Header.Set(protocol.HeaderSessionID, b)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	if m := r.conn.next(t); m.Method != "resources/unsubscribe" || !bytes.Contains(m.Params, []byte("file:///x")) {
		t.Fatalf("the server got %s, want the unsubscribe of file:///x", jsonrpc.Encode(m))
	}
	select {
	case raw := <-r.conn.out:
		t.Errorf("the server got %s too", raw)
	default:
	}
}

// TestPoolShares: admit refuses beyond a share and beyond the pool, and
// names the idle Conn to stop: the newcomer's own at its share, else the
// heaviest holder's least recently used.
func TestPoolShares(t *testing.T) {
	p := newPool()
	idle := func(principal, tenant string, used time.Time) *uconn {
		c := &uconn{principal: principal, tenant: tenant, ready: make(chan struct{}), initDone: make(chan struct{}), lastUsed: used}
		close(c.ready)
		close(c.initDone)
		return c
	}
	t0 := time.Now()
	a1, a2, b1 := idle("a", "t1", t0), idle("a", "t1", t0.Add(time.Second)), idle("b", "t2", t0.Add(-time.Second))
	for _, c := range []*uconn{a1, a2, b1} {
		if lim, _ := p.admit(c, 3, 2, 0); lim != "" {
			t.Fatalf("admit: %s", lim)
		}
	}
	if lim, v := p.admit(idle("a", "t1", t0), 3, 2, 0); lim != limitPrincipal || v != a1 {
		t.Errorf("a at its share: %s, %v; want %s and a1", lim, v, limitPrincipal)
	}
	if lim, v := p.admit(idle("c", "t3", t0), 3, 2, 0); lim != limitPool || v != a1 {
		t.Errorf("c, pool full: %s, %v; want %s and a1 (a holds the most; b1 is older)", lim, v, limitPool)
	}
	a1.pending = map[int64]*call{1: {}}
	a2.streams = map[*hsession]chan []byte{nil: nil}
	if lim, v := p.admit(idle("c", "t3", t0), 3, 2, 0); lim != limitPool || v != b1 {
		t.Errorf("c, pool full, a busy: %s, %v; want b1", lim, v)
	}
	if lim, v := p.admit(idle("a", "t1", t0), 3, 2, 0); lim != limitPrincipal || v != nil {
		t.Errorf("a at its share, all busy: %s, %v; want refused", lim, v)
	}
	p.remove(b1)
	if lim, _ := p.admit(idle("c", "t3", t0), 3, 2, 0); lim != "" {
		t.Errorf("room: %s", lim)
	}
}

// TestRouteByProgressToken: with two sessions' requests in flight, a
// request of the server's carrying the progress token of one of them goes
// to that one, with the client's own token back; the server's cancellation
// of it goes to the session asked, and its answer is then no one's.
func TestRouteByProgressToken(t *testing.T) {
	r := newRouteRig(t)
	a, b := r.open("alice"), r.open("bob")
	callA := r.stream(r.post("alice", a, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"same"}}}`))
	idA := r.conn.next(t).ID
	callB := r.stream(r.post("bob", b, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"y","_meta":{"progressToken":"same"}}}`))
	mb := r.conn.next(t)
	_, tokB := swapToken(mb.Params, nil)
	r.conn.send(`{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{"message":"for bob","_meta":{"progressToken":` + string(tokB) + `}}}`)
	m := callB.next(t)
	if m.Method != "elicitation/create" || !bytes.Contains(m.Params, []byte(`"progressToken":"same"`)) {
		t.Fatalf("bob's stream got %s", jsonrpc.Encode(m))
	}
	r.conn.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`)
	if m := callB.next(t); m.Method != "notifications/cancelled" {
		t.Fatalf("bob's stream got %s, want the cancellation", jsonrpc.Encode(m))
	}
	resp := r.post("bob", b, `{"jsonrpc":"2.0","id":9,"result":{"action":"cancel"}}`)
	resp.Body.Close()
	// Alice's stream: nothing of bob's; her next message is her response.
	r.conn.send(`{"jsonrpc":"2.0","id":` + string(idA.Raw()) + `,"result":{"content":[]}}`)
	if m := callA.next(t); m.Kind != jsonrpc.KindResponse {
		t.Errorf("alice's stream got %s, want her response", jsonrpc.Encode(m))
	}
	select {
	case raw := <-r.conn.out:
		t.Errorf("the server got %s after the cancellation", raw)
	default:
	}
}
