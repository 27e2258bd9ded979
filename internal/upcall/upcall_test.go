package upcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// fakeUpstream is a Streamable HTTP upstream of the 2025-11-25 revision:
// initialize opens a session (one new id each), tools/list answers two
// pages, each after a notification, and DELETE ends a session.
type fakeUpstream struct {
	srv         *httptest.Server
	initialized atomic.Int32
	terminated  atomic.Int32
	release     chan struct{} // if not nil, initialize waits for it
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	f := &fakeUpstream{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		f.terminated.Add(1)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Cursor string `json:"cursor"`
		} `json:"params"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &m)
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	switch m.Method {
	case "initialize":
		if f.release != nil {
			<-f.release
		}
		n := f.initialized.Add(1)
		w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", n))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"fake","version":"1"},"instructions":"Use it."}}`)
	case "tools/list":
		page, next := `[{"name":"one","inputSchema":{"type":"object"}}]`, `,"nextCursor":"2"`
		if m.Params.Cursor == "2" {
			page, next = `[{"name":"two","inputSchema":{"type":"object"}}]`, ""
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"listing\"}}\n\n")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+string(m.ID)+",\"result\":{\"tools\":"+page+next+"}}\n\n")
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32601,"message":"Method not found"}}`)
	}
}

func (f *fakeUpstream) client(t *testing.T) *upstream.Client {
	c := upstream.New(config.Upstream{Name: "fake", URL: f.srv.URL, Timeout: config.Duration(5 * time.Second)}, upstream.Options{})
	t.Cleanup(func() { c.Close() })
	return c
}

func newStore(t *testing.T, id string) session.Store {
	s := session.NewMemory(session.MemoryOptions{IdleTTL: time.Hour})
	t.Cleanup(func() { s.Close() })
	if err := s.Create(context.Background(), &session.Record{ID: id}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOpenerOnce: requests of one gateway session that need the same
// upstream session at once open one, which the store then holds; what it
// said of its upstream is told once.
func TestOpenerOnce(t *testing.T) {
	f := newFakeUpstream(t)
	f.release = make(chan struct{})
	c := f.client(t)
	store := newStore(t, "g1")
	var told atomic.Int32
	o := NewOpener(store, func(name string, res *upstream.InitResult) {
		if name == "fake" && res.Instructions == "Use it." {
			told.Add(1)
		}
	}, nil)
	const n = 8
	got := make([]session.Upstream, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	var started sync.WaitGroup
	started.Add(n)
	for i := range n {
		wg.Go(func() {
			started.Done()
			got[i], errs[i] = o.Open(context.Background(), "g1", c, json.RawMessage(`{}`), "")
		})
	}
	started.Wait()
	close(f.release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i].SessionID == "" || got[i].SessionID != got[0].SessionID {
			t.Fatalf("open %d: %+v, %v (first %+v)", i, got[i], errs[i], got[0])
		}
	}
	if rec, err := store.Get(context.Background(), "g1"); err != nil || rec.Upstreams["fake"].SessionID != got[0].SessionID {
		t.Errorf("stored %+v, %v", rec, err)
	}
	if k := f.initialized.Load(); k < 1 || int32(told.Load()) != k {
		t.Errorf("%d sessions opened, %d told", k, told.Load())
	}
}

// TestOpenerLosesRace: when another replica stored a session first, the
// one opened here is ended and the other's is used.
func TestOpenerLosesRace(t *testing.T) {
	f := newFakeUpstream(t)
	c := f.client(t)
	store := newStore(t, "g1")
	theirs := session.Upstream{SessionID: "other-replica", ProtocolVersion: "2025-11-25"}
	if _, err := store.SetUpstream(context.Background(), "g1", "fake", "", theirs); err != nil {
		t.Fatal(err)
	}
	us, err := NewOpener(store, nil, nil).Open(context.Background(), "g1", c, nil, "")
	if err != nil || us.SessionID != "other-replica" {
		t.Fatalf("Open = %+v, %v; want the other replica's", us, err)
	}
	if f.initialized.Load() != 1 || f.terminated.Load() != 1 {
		t.Errorf("opened %d, ended %d: want the loser ended", f.initialized.Load(), f.terminated.Load())
	}
}

// TestResponseAndListOn: a call in its span reads to its result, with
// the notifications on the way; Done hears how it ended, once; ListOn
// follows the pages with ids of its own.
func TestResponseAndListOn(t *testing.T) {
	f := newFakeUpstream(t)
	c := f.client(t)
	ctx := context.Background()
	res, err := c.OpenAs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, r := Begin(ctx, noop.NewTracerProvider().Tracer(""), nil, "fake", "tools/list", "t1")
	var ended []error
	r.Done = func(err error) { ended = append(ended, err) }
	resp, err := c.Call(ctx, res.Session, NewIDs("p").Internal(), "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Start(resp, res.Session)
	var notes int
	out, err := ResultOf(r.Next, func(*jsonrpc.Message) { notes++ })
	if err != nil || !strings.Contains(string(out), `"one"`) || notes != 1 {
		t.Fatalf("ResultOf = %s, %v, %d notes", out, err, notes)
	}
	r.Close()
	r.Finish(errors.New("late"))
	if len(ended) != 1 || ended[0] != nil || r.Session().SessionID != res.Session.SessionID {
		t.Errorf("Done heard %v; session %+v", ended, r.Session())
	}
	items, _, err := ListOn(context.Background(), c, res.Session, catalog.Tools, "watch", catalog.Bounds{Pages: 10, Bytes: 1 << 20})
	if err != nil || len(items) != 2 {
		t.Errorf("ListOn = %s, %v; want two pages' items", items, err)
	}
}

// TestMerge: a call's response joined with the requests its hold hands
// it: both reach the reader, and Close gives the hold back once.
func TestMerge(t *testing.T) {
	f := newFakeUpstream(t)
	c := f.client(t)
	ctx := context.Background()
	res, err := c.OpenAs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, r := Begin(ctx, noop.NewTracerProvider().Tracer(""), nil, "fake", "tools/list", "t1")
	resp, err := c.Call(ctx, res.Session, jsonrpc.StringID("x"), "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Start(resp, res.Session)
	inbox := make(chan []byte, 1)
	inbox <- []byte(`{"jsonrpc":"2.0","id":"g.1","method":"roots/list"}`)
	var released atomic.Int32
	m := Merge(r, inbox, func() { released.Add(1) })
	kinds := map[jsonrpc.Kind]int{}
	for {
		msg, _, err := m.Next()
		if err != nil {
			t.Fatal(err)
		}
		kinds[msg.Kind]++
		if msg.Kind == jsonrpc.KindResponse {
			break
		}
	}
	m.Close()
	m.Close()
	if kinds[jsonrpc.KindNotification] != 1 || kinds[jsonrpc.KindResponse] != 1 || released.Load() != 1 {
		t.Errorf("read %v, released %d", kinds, released.Load())
	}
	// The hold's request may come before or after the response: what is
	// left is not read once the response ended.
	if kinds[jsonrpc.KindRequest] > 1 {
		t.Errorf("the request was read %d times", kinds[jsonrpc.KindRequest])
	}
}

func TestIDs(t *testing.T) {
	g := NewIDs("abc")
	a, b, s := g.Internal(), g.Internal(), g.Stateless()
	if a.String() == b.String() || !strings.HasPrefix(a.String(), `"g.abc.`) || !strings.HasPrefix(s.String(), `"s.abc.`) {
		t.Errorf("ids %s, %s, %s", a, b, s)
	}
	if got := ForwardID(jsonrpc.IntID(7)).String(); got != `"c.7"` {
		t.Errorf("ForwardID(7) = %s", got)
	}
}

func TestHealth(t *testing.T) {
	var h Health
	if _, tried := h.Last("a"); tried || h.Problems([]string{"a"}) != nil {
		t.Fatal("an upstream never tried has a health")
	}
	h.Note("a", errors.New("refused"))
	if p := h.Problems([]string{"a", "b"}); p != nil {
		t.Errorf("b untried, yet problems %q", p)
	}
	h.Note("b", errors.New("down"))
	if p := h.Problems([]string{"a", "b"}); len(p) != 2 || p[0] != "upstream a: refused" {
		t.Errorf("problems %q", p)
	}
	h.Note("b", nil)
	if err, tried := h.Last("b"); !tried || err != nil || h.Problems([]string{"a", "b"}) != nil {
		t.Errorf("b answered: %v, %v", err, tried)
	}
}

// TestOpenAll: each upstream is opened, what it said is told, and how
// each went is reported; one that fails is left out.
func TestOpenAll(t *testing.T) {
	f := newFakeUpstream(t)
	down := upstream.New(config.Upstream{Name: "down", URL: "http://127.0.0.1:1/mcp", Timeout: config.Duration(5 * time.Second)}, upstream.Options{})
	t.Cleanup(func() { down.Close() })
	var told atomic.Int32
	o := NewOpener(newStore(t, "g1"), func(string, *upstream.InitResult) { told.Add(1) }, nil)
	var mu sync.Mutex
	outcomes := map[string]error{}
	got := o.OpenAll(context.Background(), []*upstream.Client{f.client(t), down}, nil, func(name string, err error) {
		mu.Lock()
		outcomes[name] = err
		mu.Unlock()
	})
	if len(got) != 1 || got["fake"].SessionID == "" || told.Load() != 1 {
		t.Errorf("opened %+v, told %d", got, told.Load())
	}
	if len(outcomes) != 2 || outcomes["fake"] != nil || outcomes["down"] == nil {
		t.Errorf("outcomes %v", outcomes)
	}
}

// TestOpenerComplete: a new record gets every upstream session opened for
// it, as stored; when one cannot be stored, the record is deleted and
// the caller is left every session opened, to end.
func TestOpenerComplete(t *testing.T) {
	ctx := context.Background()
	f, g := newFakeUpstream(t), newFakeUpstream(t)
	cf := f.client(t)
	cg := upstream.New(config.Upstream{Name: "other", URL: g.srv.URL, Timeout: config.Duration(5 * time.Second)}, upstream.Options{})
	t.Cleanup(func() { cg.Close() })
	store := newStore(t, "g1")
	var done atomic.Int32
	o := NewOpener(store, nil, nil)
	rec := &session.Record{ID: "g1"}
	if err := o.Complete(ctx, rec, []*upstream.Client{cf, cg}, nil, func(string, error) { done.Add(1) }); err != nil {
		t.Fatal(err)
	}
	stored, err := store.Get(ctx, "g1")
	if err != nil || len(rec.Upstreams) != 2 || stored.Upstreams["fake"].SessionID != rec.Upstreams["fake"].SessionID || stored.Upstreams["other"].SessionID != rec.Upstreams["other"].SessionID {
		t.Fatalf("record %+v, stored %+v, %v", rec.Upstreams, stored, err)
	}
	if done.Load() != 2 {
		t.Errorf("told %d outcomes, want 2", done.Load())
	}

	// The record vanished meanwhile (expired, deleted): nothing is kept.
	gone := &session.Record{ID: "g2"}
	err = o.Complete(ctx, gone, []*upstream.Client{cf}, nil, nil)
	if !errors.Is(err, session.ErrNotFound) || gone.Upstreams["fake"].SessionID == "" {
		t.Fatalf("Complete = %v, upstreams %+v; want not found and the opened session returned", err, gone.Upstreams)
	}
}
