package subscribe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
)

const (
	subscribing = `{"resources":{"subscribe":true}}`
	legacy      = "2025-11-25"
	modern      = "2026-07-28"
)

func TestFits(t *testing.T) {
	full := make([]string, MaxURIs)
	for i := range full {
		full[i] = fmt.Sprintf("mem://%d", i)
	}
	big := []string{strings.Repeat("x", MaxBytes-10)}
	for _, tc := range []struct {
		name string
		subs []string
		uri  string
		want bool
	}{
		{"empty", nil, "mem://a", true},
		{"room", []string{"mem://a"}, "mem://b", true},
		{"held when full", full, "mem://7", true},
		{"too many", full, "mem://new", false},
		{"bytes: room", big, "0123456789", true},
		{"bytes: too many", big, "0123456789a", false},
		{"held past the bytes", big, big[0], true},
	} {
		if got := Fits(tc.subs, tc.uri); got != tc.want {
			t.Errorf("%s: Fits %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCovers(t *testing.T) {
	subs := []string{"mem://a", "file:///dir/"}
	for uri, want := range map[string]bool{
		"mem://a": true, "mem://a/x": true, "mem://a?v=2": true, "mem://ab": false,
		"file:///dir/f": true, "file:///other": false, "": false,
	} {
		if got := Covers(subs, uri); got != want {
			t.Errorf("%q: Covers %v, want %v", uri, got, want)
		}
	}
	if Covers(nil, "mem://a") {
		t.Error("no subscription covers an update")
	}
}

func TestOffered(t *testing.T) {
	for caps, want := range map[string]bool{
		``: false, `{}`: false, `[]`: false, `{"resources":{}}`: false,
		`{"resources":{"subscribe":false}}`: false, `{"resources":{"subscribe":"true"}}`: false,
		subscribing: true, `{"tools":{},"resources":{"listChanged":true,"subscribe":true}}`: true,
	} {
		var raw json.RawMessage
		if caps != "" {
			raw = json.RawMessage(caps)
		}
		if got := Offered(raw); got != want {
			t.Errorf("%s: Offered %v, want %v", caps, got, want)
		}
	}
}

// fakeRequest is a request of session "s" whose tenant sees the exposed
// URIs "<upstream>+<uri>" of the upstreams in known.
type fakeRequest struct {
	mu      sync.Mutex
	known   map[string]Known // by upstream name
	entries map[string]session.Upstream
	hidden  map[string]bool  // exposed URIs the caller may not see
	openErr map[string]error // by upstream name
	relayed []string         // "<upstream> <uri>"
	relay   error
	opened  []string
	session string
}

func (r *fakeRequest) Resolve(_ context.Context, uri string) (Upstream, string, error) {
	name, orig, ok := strings.Cut(uri, "+")
	if _, known := r.known[name]; !ok || !known || r.hidden[uri] {
		return Upstream{}, "", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Resource not found")
	}
	return Upstream{Name: name}, orig, nil
}

func (r *fakeRequest) Open(_ context.Context, up Upstream) error {
	r.opened = append(r.opened, up.Name)
	return r.openErr[up.Name]
}

func (r *fakeRequest) Known(up Upstream) Known { return r.known[up.Name] }

func (r *fakeRequest) SessionID() string { return r.session }

func (r *fakeRequest) Entry(name string) (session.Upstream, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	us, ok := r.entries[name]
	return us, ok
}

func (r *fakeRequest) SetEntry(name string, us session.Upstream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries[name] = us
}

func (r *fakeRequest) Relay(_ context.Context, up Upstream, uri string) (json.RawMessage, error) {
	r.relayed = append(r.relayed, up.Name+" "+uri)
	if r.relay != nil {
		return nil, r.relay
	}
	return json.RawMessage(`{}`), nil
}

// fakeStore holds one record, "s".
type fakeStore struct {
	mu   sync.Mutex
	rec  session.Record
	sets int
}

func (s *fakeStore) Get(_ context.Context, id string) (*session.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != s.rec.ID {
		return nil, session.ErrNotFound
	}
	rec := s.rec
	rec.Upstreams = make(map[string]session.Upstream)
	for k, v := range s.rec.Upstreams {
		rec.Upstreams[k] = v
	}
	return &rec, nil
}

func (s *fakeStore) SetUpstream(_ context.Context, id, name, prev string, u session.Upstream) (session.Upstream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != s.rec.ID {
		return session.Upstream{}, session.ErrNotFound
	}
	if cur := s.rec.Upstreams[name]; cur.SessionID != prev {
		return cur, session.ErrConflict
	}
	s.sets++
	s.rec.Upstreams[name] = u
	return u, nil
}

type fakeWaker struct{ woken []string }

func (w *fakeWaker) Wake(_ context.Context, id string) error {
	w.woken = append(w.woken, id)
	return nil
}

// newSession returns a request of session "s" holding upstream session
// "u1" with upstream "fs" (a 2025-11-25 one offering subscriptions),
// and a 2026-07-28 upstream session with "new" (offering them) and
// "plain" (not), and the store and waker behind them.
func newSession() (*fakeRequest, *fakeStore, *fakeWaker) {
	entries := map[string]session.Upstream{
		"fs":    {SessionID: "u1", ProtocolVersion: legacy, Capabilities: json.RawMessage(subscribing)},
		"new":   {ProtocolVersion: modern, Capabilities: json.RawMessage(subscribing)},
		"plain": {ProtocolVersion: modern, Capabilities: json.RawMessage(`{"resources":{}}`)},
	}
	rq := &fakeRequest{
		session: "s",
		entries: entries,
		known: map[string]Known{
			"fs":    {Caps: json.RawMessage(subscribing), PerSession: true},
			"new":   {Caps: json.RawMessage(subscribing), Modern: true, PerSession: true},
			"plain": {Caps: json.RawMessage(`{"resources":{}}`), Modern: true, PerSession: true},
		},
	}
	st := &fakeStore{rec: session.Record{ID: "s", Upstreams: map[string]session.Upstream{}}}
	for k, v := range entries {
		st.rec.Upstreams[k] = v
	}
	return rq, st, &fakeWaker{}
}

// TestServe: a subscription is relayed to its upstream with the upstream's
// own URI and recorded once accepted (marking the upstream session to be
// listened to, and waking the GET stream's replica); a 2026-07-28
// upstream's is only recorded; one past the bounds, one the upstream
// refused and one the caller may not see change nothing.
func TestServe(t *testing.T) {
	ctx := t.Context()

	rq, st, w := newSession()
	k := NewKeeper(st, w, nil)
	if res, err := k.Serve(ctx, rq, "fs+file:///a", true); err != nil || string(res) != `{}` {
		t.Fatalf("subscribe: %s, %v", res, err)
	}
	if want := []string{"fs file:///a"}; !slices.Equal(rq.relayed, want) {
		t.Errorf("relayed %q, want %q", rq.relayed, want)
	}
	if us := st.rec.Upstreams["fs"]; !us.Listen || !slices.Equal(us.Subscribed, []string{"file:///a"}) {
		t.Errorf("recorded %+v", us)
	}
	if us, _ := rq.Entry("fs"); !slices.Equal(us.Subscribed, []string{"file:///a"}) {
		t.Errorf("the request's copy: %+v", us)
	}
	if !slices.Equal(w.woken, []string{"s"}) {
		t.Errorf("woken %q", w.woken)
	}
	// Again: nothing more to record.
	if _, err := k.Serve(ctx, rq, "fs+file:///a", true); err != nil || st.sets != 1 || len(w.woken) != 1 {
		t.Errorf("subscribing again: %v, %d writes, %d wake-ups", err, st.sets, len(w.woken))
	}
	if _, err := k.Serve(ctx, rq, "fs+file:///a", false); err != nil {
		t.Fatal(err)
	}
	if us := st.rec.Upstreams["fs"]; !us.Listen || len(us.Subscribed) != 0 {
		t.Errorf("after unsubscribing: %+v", us)
	}

	t.Run("2026-07-28 upstream", func(t *testing.T) {
		rq, st, w := newSession()
		k := NewKeeper(st, w, nil)
		if res, err := k.Serve(ctx, rq, "new+mem://x", true); err != nil || string(res) != `{}` {
			t.Fatalf("subscribe: %s, %v", res, err)
		}
		if len(rq.relayed) != 0 {
			t.Errorf("relayed %q", rq.relayed)
		}
		if us := st.rec.Upstreams["new"]; !slices.Equal(us.Subscribed, []string{"mem://x"}) {
			t.Errorf("recorded %+v", us)
		}
		_, err := k.Serve(ctx, rq, "plain+mem://x", true)
		if e := (*jsonrpc.Error)(nil); !errors.As(err, &e) || e.Code != jsonrpc.CodeMethodNotFound {
			t.Errorf("an upstream offering no subscriptions: %v", err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		rq, st, w := newSession()
		rq.hidden = map[string]bool{"fs+file:///hidden": true}
		full := rq.entries["fs"]
		for i := range MaxURIs {
			full.Subscribed = append(full.Subscribed, fmt.Sprint("file:///", i))
		}
		rq.entries["fs"] = full
		k := NewKeeper(st, w, nil)
		if _, err := k.Serve(ctx, rq, "fs+file:///new", true); err != ErrTooMany {
			t.Errorf("past the bound: %v", err)
		}
		if _, err := k.Serve(ctx, rq, "fs+file:///hidden", false); err == nil {
			t.Error("a hidden resource was served")
		}
		rq.relay = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no"}
		if _, err := k.Serve(ctx, rq, "fs+file:///1", false); err != rq.relay {
			t.Errorf("the upstream's refusal: %v", err)
		}
		if len(rq.relayed) != 1 || st.sets != 0 || len(w.woken) != 0 {
			t.Errorf("relayed %q, %d writes, %d wake-ups", rq.relayed, st.sets, len(w.woken))
		}
	})

	t.Run("no session", func(t *testing.T) {
		rq, st, w := newSession()
		rq.session = ""
		k := NewKeeper(st, w, nil)
		if _, err := k.Serve(ctx, rq, "fs+file:///a", true); err != nil || st.sets != 0 {
			t.Errorf("%v, %d writes", err, st.sets)
		}
	})
}

// TestNoteOverwritten: a concurrent request of the session that writes
// its own list over the one just recorded has it recorded again; an
// upstream session replaced meanwhile is left alone.
func TestNoteOverwritten(t *testing.T) {
	rq, st, w := newSession()
	cleared := false
	k := NewKeeper(clearOnce{st, &cleared}, w, nil)
	k.Note(t.Context(), "s", rq, "fs", "file:///a", true)
	if !cleared {
		t.Fatal("the overwrite did not happen")
	}
	if us := st.rec.Upstreams["fs"]; !slices.Equal(us.Subscribed, []string{"file:///a"}) {
		t.Errorf("recorded %+v, want the URI written again", us)
	}
	if st.sets != 2 {
		t.Errorf("%d writes, want 2", st.sets)
	}

	rq, st, w = newSession()
	st.rec.Upstreams["fs"] = session.Upstream{SessionID: "u2", ProtocolVersion: legacy}
	NewKeeper(st, w, nil).Note(t.Context(), "s", rq, "fs", "file:///a", true)
	if st.sets != 0 || len(w.woken) != 0 {
		t.Errorf("a replaced upstream session: %d writes, %d wake-ups", st.sets, len(w.woken))
	}
}

// clearOnce is a store whose first successful SetUpstream is overwritten
// at once by another request of the session, with the same upstream
// session and a list without the URI.
type clearOnce struct {
	*fakeStore
	done *bool
}

func (s clearOnce) SetUpstream(ctx context.Context, id, name, prev string, u session.Upstream) (session.Upstream, error) {
	cur, err := s.fakeStore.SetUpstream(ctx, id, name, prev, u)
	if err == nil && !*s.done {
		*s.done = true
		s.mu.Lock()
		other := cur
		other.Subscribed = nil
		s.rec.Upstreams[name] = other
		s.mu.Unlock()
	}
	return cur, err
}

// TestTargets: a listen's URIs are grouped by upstream, each upstream's
// session opened once; a URI hidden, of an unreachable upstream, of one
// offering no subscriptions, or of a piped 2025-11-25 one is left out, as
// are duplicates and those past MaxListen.
func TestTargets(t *testing.T) {
	rq := &fakeRequest{
		known: map[string]Known{
			"fs":    {Caps: json.RawMessage(subscribing), PerSession: true},
			"new":   {Caps: json.RawMessage(subscribing), Modern: true},
			"plain": {Caps: json.RawMessage(`{"resources":{}}`), PerSession: true},
			"piped": {Caps: json.RawMessage(subscribing)},
			"down":  {Caps: json.RawMessage(subscribing), PerSession: true},
		},
		hidden:  map[string]bool{"fs+file:///hidden": true},
		openErr: map[string]error{"down": errors.New("unreachable")},
	}
	uris := []string{
		"new+mem://1", "fs+file:///a", "fs+file:///hidden", "plain+mem://p", "piped+mem://q",
		"down+mem://d", "fs+file:///b", "fs+file:///a", "unknown+x",
	}
	got := Targets(t.Context(), rq, uris)
	if len(got) != 2 || got[0].Up.Name != "new" || !got[0].Modern || got[1].Up.Name != "fs" || got[1].Modern {
		t.Fatalf("targets %+v", got)
	}
	if want := map[string]string{"mem://1": "new+mem://1"}; fmt.Sprint(got[0].URIs) != fmt.Sprint(want) {
		t.Errorf("new: %v, want %v", got[0].URIs, want)
	}
	if want := map[string]string{"file:///a": "fs+file:///a", "file:///b": "fs+file:///b"}; fmt.Sprint(got[1].URIs) != fmt.Sprint(want) {
		t.Errorf("fs: %v, want %v", got[1].URIs, want)
	}
	if want := []string{"new", "fs", "plain", "piped", "down"}; !slices.Equal(rq.opened, want) {
		t.Errorf("opened %q, want each once: %q", rq.opened, want)
	}

	many := make([]string, 2*MaxListen)
	for i := range many {
		many[i] = fmt.Sprint("fs+file:///", i)
	}
	if got := Targets(t.Context(), rq, many); len(got) != 1 || len(got[0].URIs) != MaxListen {
		t.Errorf("%d URIs agreed, bound %d", len(got[0].URIs), MaxListen)
	}
}
