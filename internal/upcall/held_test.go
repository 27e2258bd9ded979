package upcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// TestHeldConcurrent: Set, Entry, Snapshot and Replace of one record from
// many goroutines at once (run with -race); without Replace, each name
// ends with what was set last.
func TestHeldConcurrent(t *testing.T) {
	for _, replace := range []bool{true, false} {
		var h Held
		rec := &session.Record{ID: "g1"}
		const writers, rounds = 8, 200
		var wg sync.WaitGroup
		for w := range writers {
			name := "up" + strconv.Itoa(w)
			wg.Go(func() {
				for i := range rounds {
					h.Set(rec, name, session.Upstream{SessionID: name + "." + strconv.Itoa(i)})
				}
			})
			wg.Go(func() {
				for range rounds {
					if us, ok := h.Entry(rec, name); ok && us.SessionID == "" {
						t.Error("an entry without a session id")
					}
					for n, us := range h.Snapshot(rec) {
						if us.SessionID == "" {
							t.Errorf("snapshot: %s without a session id", n)
						}
					}
				}
			})
		}
		if replace {
			wg.Go(func() {
				for range rounds {
					h.Replace(rec, h.Snapshot(rec))
				}
			})
		}
		wg.Wait()
		if replace {
			continue // a replacement may undo a later Set
		}
		for w := range writers {
			name := "up" + strconv.Itoa(w)
			if us, ok := h.Entry(rec, name); !ok || us.SessionID != name+"."+strconv.Itoa(rounds-1) {
				t.Errorf("%s: got %+v, %v", name, us, ok)
			}
		}
		snap := h.Snapshot(rec)
		snap["other"] = session.Upstream{SessionID: "x"}
		if _, ok := h.Entry(rec, "other"); ok {
			t.Error("a snapshot shares the record's map")
		}
	}
	var h Held
	if h.Snapshot(nil) != nil {
		t.Error("Snapshot(nil) is not nil")
	}
	if _, ok := h.Entry(nil, "up0"); ok {
		t.Error("Entry(nil) found one")
	}
}

// expiringUpstream is a Streamable HTTP upstream of the 2025-11-25
// revision whose sessions it can forget: a request on a forgotten (or
// never opened) session gets 404. initialize opens a new session each
// time (s1, s2, …); tools/list answers with the session it came on.
type expiringUpstream struct {
	srv         *httptest.Server
	initialized atomic.Int32
	mu          sync.Mutex
	live        map[string]bool
	expireOnUse bool // each session is forgotten after its first tools/list
	calls       []string
}

func newExpiringUpstream(t *testing.T) *expiringUpstream {
	f := &expiringUpstream{live: make(map[string]bool)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// forget makes the upstream forget every session, as a restart does.
func (f *expiringUpstream) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.live)
}

func (f *expiringUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &m)
	if m.Method == "initialize" {
		sid := fmt.Sprintf("s%d", f.initialized.Add(1))
		f.mu.Lock()
		f.live[sid] = true
		f.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", sid)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}}`)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	f.mu.Lock()
	live := f.live[sid]
	if m.Method == "tools/list" {
		f.calls = append(f.calls, sid)
		if live && f.expireOnUse {
			delete(f.live, sid)
			live = false
		}
	}
	f.mu.Unlock()
	if !live {
		http.Error(w, "unknown session", http.StatusNotFound)
		return
	}
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"tools":[],"session":"`+sid+`"}}`)
}

func (f *expiringUpstream) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// hopTo returns a Hop to f for gateway session g1 of store, and the
// record it holds the upstream sessions of.
func hopTo(t *testing.T, f *expiringUpstream) (Hop, *session.Record) {
	c := upstream.New(config.Upstream{Name: "fake", URL: f.srv.URL, Timeout: config.Duration(5 * time.Second)}, upstream.Options{})
	t.Cleanup(func() { c.Close() })
	rec := &session.Record{ID: "g1"}
	store := newStore(t, rec.ID)
	return Hop{Held: new(Held), Record: rec, Opener: NewOpener(store, nil, nil), Client: c,
		Caps: func() json.RawMessage { return json.RawMessage(`{}`) }}, rec
}

func listTools(t *testing.T, p Hop, c Call) (string, error) {
	t.Helper()
	c.ID, c.Method, c.Tracer = jsonrpc.IntID(1), "tools/list", noop.NewTracerProvider().Tracer("")
	resp, err := p.Call(context.Background(), c)
	if err != nil {
		return "", err
	}
	defer resp.Close()
	res, err := ResultOf(resp.Next, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Session string }
	_ = json.Unmarshal(res, &out)
	if resp.Session().SessionID != out.Session {
		t.Errorf("the response says it went on %q, the upstream saw %q", resp.Session().SessionID, out.Session)
	}
	return out.Session, nil
}

// TestHopReopensExpired: a hop opens its upstream session on first use
// and holds it; a call whose upstream session the upstream forgot opens a
// new one, holds it, and is sent once more; the guard admits each call
// once and hears how it ended; Note hears each answer; Shape sees the
// session the params go on.
func TestHopReopensExpired(t *testing.T) {
	f := newExpiringUpstream(t)
	p, rec := hopTo(t, f)
	var admitted, ended, shaped atomic.Int32
	var notes []error
	c := Call{
		Guard: func(context.Context) (func(error), error) {
			admitted.Add(1)
			return func(err error) {
				if err != nil {
					t.Errorf("done: %v", err)
				}
				ended.Add(1)
			}, nil
		},
		Shape: func(us session.Upstream, params jsonrpc.Params) jsonrpc.Params {
			if us.SessionID == "" {
				t.Error("params shaped for no session")
			}
			shaped.Add(1)
			return params
		},
		Note: func(err error) { notes = append(notes, err) },
	}

	got, err := listTools(t, p, c)
	if err != nil || got != "s1" {
		t.Fatalf("first call: on %q, %v; want s1", got, err)
	}
	if us, ok := p.Held.Entry(rec, "fake"); !ok || us.SessionID != "s1" {
		t.Fatalf("held %+v, %v after the first call", us, ok)
	}

	f.forget()
	got, err = listTools(t, p, c)
	if err != nil || got != "s2" {
		t.Fatalf("after expiry: on %q, %v; want s2", got, err)
	}
	if us, ok := p.Held.Entry(rec, "fake"); !ok || us.SessionID != "s2" {
		t.Errorf("held %+v, %v after the re-open, want s2", us, ok)
	}
	if s := f.sent(); fmt.Sprint(s) != "[s1 s1 s2]" {
		t.Errorf("tools/list went on %v, want [s1 s1 s2]", s)
	}
	if n := f.initialized.Load(); n != 2 {
		t.Errorf("%d sessions opened, want 2", n)
	}
	if a, e, s := admitted.Load(), ended.Load(), shaped.Load(); a != 2 || e != 2 || s != 3 {
		t.Errorf("admitted %d, ended %d, shaped %d: want 2, 2, 3", a, e, s)
	}
	if len(notes) != 2 || notes[0] != nil || notes[1] != nil {
		t.Errorf("notes %v, want two nil", notes)
	}
}

// TestHopExpiredTwice: when the session opened again expires too, the
// call fails with the expiry (it is not sent a third time), the guard and
// Note hear it, and the new session stays held.
func TestHopExpiredTwice(t *testing.T) {
	f := newExpiringUpstream(t)
	p, rec := hopTo(t, f)
	if got, err := listTools(t, p, Call{}); err != nil || got != "s1" {
		t.Fatalf("first call: on %q, %v; want s1", got, err)
	}
	f.mu.Lock()
	f.expireOnUse = true
	f.mu.Unlock()
	var doneErr, noted error
	_, err := listTools(t, p, Call{
		Guard: func(context.Context) (func(error), error) { return func(err error) { doneErr = err }, nil },
		Note:  func(err error) { noted = err },
	})
	if !errors.Is(err, upstream.ErrSessionExpired) {
		t.Fatalf("got %v, want ErrSessionExpired", err)
	}
	if !errors.Is(doneErr, upstream.ErrSessionExpired) || !errors.Is(noted, upstream.ErrSessionExpired) {
		t.Errorf("done heard %v, Note heard %v", doneErr, noted)
	}
	if s := f.sent(); fmt.Sprint(s) != "[s1 s1 s2]" {
		t.Errorf("tools/list went on %v, want [s1 s1 s2]", s)
	}
	if us, ok := p.Held.Entry(rec, "fake"); !ok || us.SessionID != "s2" {
		t.Errorf("held %+v, %v, want s2", us, ok)
	}
}

// TestHopGuardRefuses: a call the guard refuses opens no session and
// sends nothing; Note hears nothing of the upstream.
func TestHopGuardRefuses(t *testing.T) {
	f := newExpiringUpstream(t)
	p, rec := hopTo(t, f)
	refused := errors.New("refused")
	noted := false
	_, err := listTools(t, p, Call{
		Guard: func(context.Context) (func(error), error) { return nil, refused },
		Note:  func(error) { noted = true },
	})
	if !errors.Is(err, refused) {
		t.Fatalf("got %v, want the guard's refusal", err)
	}
	if n := f.initialized.Load(); n != 0 || len(f.sent()) != 0 || noted {
		t.Errorf("%d sessions opened, %d sent, noted %v", n, len(f.sent()), noted)
	}
	if _, ok := p.Held.Entry(rec, "fake"); ok {
		t.Error("a session is held")
	}
}
