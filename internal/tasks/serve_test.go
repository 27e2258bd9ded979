package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
)

// fakeRequest is a Request whose tenant may use the upstreams in ups;
// relaying fails the test, since every case here is refused before.
type fakeRequest struct {
	t    *testing.T
	who  Caller
	ups  map[string]bool
	used []string
}

func (f *fakeRequest) Caller() Caller { return f.who }
func (f *fakeRequest) Upstream(name string) (*Upstream, bool) {
	if !f.ups[name] {
		return nil, false
	}
	return &Upstream{Name: name}, true
}
func (f *fakeRequest) UseSession(name string, _ session.Upstream) { f.used = append(f.used, name) }
func (f *fakeRequest) Relay(context.Context, string, *Upstream, json.RawMessage) (json.RawMessage, error) {
	f.t.Error("relayed a refused request")
	return nil, errors.New("no relay")
}
func (f *fakeRequest) Lacks(*jsonrpc.Message) bool      { return false }
func (f *fakeRequest) LimitHit(context.Context, string) {}

// TestServeOwnsTasks: a task id the caller may not use (unknown, too
// long, another principal's, of an upstream its tenant may no longer use)
// gets the one -32602, and nothing reaches an upstream; a 2026-07-28
// caller that did not declare the extension gets -32021 naming it.
func TestServeOwnsTasks(t *testing.T) {
	store := session.NewMemoryTasks(time.Now)
	ts := New(store, slog.New(slog.DiscardHandler), func() jsonrpc.ID { return jsonrpc.StringID("g.1") })
	alice := session.Principal{Issuer: "iss", Subject: "alice", Tenant: "acme"}
	task := &session.Task{ID: session.NewTaskID(), Principal: alice, Upstream: "u", UpstreamTaskID: "up-1", Created: time.Now(), Expires: time.Now().Add(time.Hour)}
	if err := store.CreateTask(t.Context(), task, session.TaskLimits{}); err != nil {
		t.Fatal(err)
	}
	bob := alice
	bob.Subject = "bob"
	for _, tc := range []struct {
		name string
		who  session.Principal
		ups  map[string]bool
		gid  string
	}{
		{"unknown", alice, map[string]bool{"u": true}, session.NewTaskID()},
		{"not ours", alice, map[string]bool{"u": true}, "up-1"},
		{"too long", alice, map[string]bool{"u": true}, "task-" + string(make([]byte, 100))},
		{"another principal", bob, map[string]bool{"u": true}, task.ID},
		{"upstream no longer the tenant's", alice, nil, task.ID},
	} {
		rq := &fakeRequest{t: t, who: Caller{Principal: tc.who}, ups: tc.ups}
		p, _ := jsonx.ParseValidObject([]byte(`{"taskId":"x"}`))
		_, _, err := ts.Serve(t.Context(), rq, "tasks/get", p, tc.gid)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || je.Message != errNotFound().Error() {
			t.Errorf("%s: %v", tc.name, err)
		}
		if len(rq.used) != 0 {
			t.Errorf("%s: used the task's session", tc.name)
		}
	}
	rq := &fakeRequest{t: t, who: Caller{Principal: alice, Stateless: true, MetaCaps: json.RawMessage(`{"extensions":{}}`)}, ups: map[string]bool{"u": true}}
	p, _ := jsonx.ParseValidObject([]byte(`{"taskId":"x"}`))
	_, _, err := ts.Serve(t.Context(), rq, "tasks/get", p, task.ID)
	var ce *protocol.CapabilityError
	if !errors.As(err, &ce) || ce.Sub != Extension {
		t.Errorf("undeclared extension: %v", err)
	}
}

// TestCapabilities: what the gateway offers of tasks follows its
// upstreams' offers and the caller's revision.
func TestCapabilities(t *testing.T) {
	legacy := Offer{Caps: json.RawMessage(`{"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}}`)}
	modern := Offer{Caps: json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`), Modern: true}
	plain := Offer{Caps: json.RawMessage(`{"tools":{}}`)}
	for _, tc := range []struct {
		stateless bool
		offers    []Offer
		key, want string
	}{
		{false, []Offer{legacy, plain}, "tasks", `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`},
		{false, []Offer{modern}, "tasks", ``},
		{false, []Offer{plain}, "tasks", ``},
		{true, []Offer{modern}, "extensions", `{"io.modelcontextprotocol/tasks":{}}`},
		{true, []Offer{legacy}, "extensions", `{"io.modelcontextprotocol/tasks":{}}`},
		{true, []Offer{plain}, "extensions", ``},
	} {
		out := map[string]json.RawMessage{}
		Capabilities(tc.stateless, tc.offers, out)
		if got := string(out[tc.key]); got != tc.want {
			t.Errorf("stateless %v %v: %s = %s, want %s", tc.stateless, tc.offers, tc.key, got, tc.want)
		}
	}
}

func TestDeclares(t *testing.T) {
	for caps, want := range map[string]bool{
		``: false, `{}`: false, `{"extensions":{}}`: false,
		`{"extensions":{"io.modelcontextprotocol/tasks":null}}`: false,
		`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`:   true,
	} {
		if got := Declares(json.RawMessage(caps)); got != want {
			t.Errorf("%s: %v", caps, got)
		}
	}
}
