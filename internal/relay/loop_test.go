package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpgw/gateway/internal/bridge"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/listen"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/relay"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/tasks"
	"github.com/mcpgw/gateway/internal/upcall"
	"github.com/mcpgw/gateway/internal/upstream"
)

// upstreamServer is a 2025-11-25 upstream whose tools/call streams what
// the tool's name asks for before its result: "chatty" a log message, an
// update of a resource and a progress notification; "fail" answers an
// error; "ask" asks the client to elicit first.
func upstreamServer(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	replies := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &m)
		if m.Method == "" || m.ID == nil {
			if m.Result != nil || m.Error != nil {
				mu.Lock()
				replies++
				mu.Unlock()
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		event := func(msg string) { io.WriteString(w, "data: "+msg+"\n\n") }
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "up-1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"up","version":"1"}}}`)
		case "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			switch m.Params.Name {
			case "chatty":
				event(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello"}}`)
				event(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a"}}`)
				event(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`)
			case "fail":
				event(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32602,"message":"no such argument"}}`)
				return
			case "ask":
				event(`{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"mode":"form","message":"Name?","requestedSchema":{"type":"object"}}}`)
				return // the call hears no more
			}
			event(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"done"}]}}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32601,"message":"Method not found"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fakeOut is the client's side of one request.
type fakeOut struct {
	events   []string
	streamed bool
}

func (o *fakeOut) Event(msg []byte) error { o.events = append(o.events, string(msg)); return nil }
func (o *fakeOut) Collects() bool         { return false }
func (o *fakeOut) Stream()                { o.streamed = true }

// fakeHop calls the upstream for real and records what the relay asked.
type fakeHop struct {
	c         *upstream.Client
	us        session.Upstream
	stateless bool
	expose    bool // ExposeUpdated lets updates through
	observed  []string
	logs      int
	awaited   int
}

func (h *fakeHop) Session(context.Context) (session.Upstream, error) { return h.us, nil }

func (h *fakeHop) Call(ctx context.Context, id jsonrpc.ID, params jsonrpc.Params) (*upcall.Response, error) {
	ctx, r := upcall.Begin(ctx, noop.NewTracerProvider().Tracer(""), nil, h.c.Name(), "tools/call", "t1")
	resp, err := h.c.CallParams(ctx, h.us, id, "tools/call", params, nil)
	if err != nil {
		r.Finish(err)
		return nil, err
	}
	r.Start(resp, h.us)
	return r, nil
}

func (h *fakeHop) Observe(msg *jsonrpc.Message) { h.observed = append(h.observed, msg.Method) }
func (h *fakeHop) ExposeUpdated(_ context.Context, msg *jsonrpc.Message) []byte {
	if !h.expose {
		return nil
	}
	p, _ := jsonx.ParseValidObject(msg.Params)
	p.SetString("uri", "up+file:///a")
	return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, msg.Method, p.Bytes())
}
func (h *fakeHop) EnableLogs(context.Context) { h.logs++ }
func (h *fakeHop) HoldShared(context.Context, session.Upstream) *listen.Hold {
	return listen.NoHold
}
func (h *fakeHop) AwaitRoots(context.Context) { h.awaited++ }
func (h *fakeHop) Caller() *bridge.Caller {
	return &bridge.Caller{Principal: "p", Tenant: "t1", Stateless: h.stateless, Caps: json.RawMessage(`{}`)}
}
func (h *fakeHop) TaskCaller() tasks.Caller         { return tasks.Caller{Stateless: h.stateless} }
func (h *fakeHop) LimitHit(context.Context, string) {}

func setup(t *testing.T) (*relay.Relayer, *fakeHop) {
	srv := upstreamServer(t)
	c := upstream.New(config.Upstream{Name: "up", URL: srv.URL, Timeout: config.Duration(5 * time.Second)}, upstream.Options{})
	t.Cleanup(func() { c.Close() })
	res, err := c.OpenAs(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	caps := func(raw json.RawMessage) map[string]bool {
		set := map[string]bool{}
		if o, err := jsonx.ParseObject(raw); err == nil {
			for _, m := range o.Members {
				set[m.Name] = true
			}
		}
		return set
	}
	ids := upcall.NewIDs("test")
	r := &relay.Relayer{
		Bridge: bridge.New(bridge.Options{Caps: caps}),
		Tasks:  tasks.New(session.NewMemoryTasks(nil), slog.New(slog.DiscardHandler), ids.Internal),
		IDs:    ids,
	}
	return r, &fakeHop{c: c, us: res.Session}
}

func request(tool string, out *fakeOut, c *upstream.Client) *relay.Request {
	params, _ := json.Marshal(map[string]any{"name": tool, "arguments": map[string]any{}})
	return &relay.Request{ID: jsonrpc.IntID(1), Method: "tools/call", Target: "up__" + tool, Params: jsonrpc.RawParams(params), Input: true,
		Out: out, Upstream: c, Prefix: "up"}
}

// TestRelaySession: a session client's call hears the upstream's
// notifications as they come (an update only as ExposeUpdated makes it),
// then gets the result through Rewrite; the gateway observes each.
func TestRelaySession(t *testing.T) {
	for _, expose := range []bool{false, true} {
		r, hop := setup(t)
		hop.expose = expose
		out := &fakeOut{}
		rq := request("chatty", out, hop.c)
		rq.Rewrite = func(res json.RawMessage) (json.RawMessage, error) {
			return append(res[:0:0], `{"rewritten":true}`...), nil
		}
		res, err := r.Relay(context.Background(), hop, rq)
		if err != nil || string(res) != `{"rewritten":true}` {
			t.Fatalf("Relay = %s, %v", res, err)
		}
		want := 2 // the log message and the progress
		if expose {
			want = 3
		}
		if len(out.events) != want || !out.streamed || len(hop.observed) != 3 || hop.awaited != 1 {
			t.Errorf("expose %v: events %q, streamed %v, observed %q, awaited %d", expose, out.events, out.streamed, hop.observed, hop.awaited)
		}
		if expose && !strings.Contains(out.events[1], "up+file:///a") {
			t.Errorf("the update relayed: %s", out.events[1])
		}
	}
}

// TestRelayStateless: a 2026-07-28 call hears no log message it did not
// ask for, no update (those go to its subscriptions/listen stream), and
// its upstream logs only when it asked.
func TestRelayStateless(t *testing.T) {
	for _, wants := range []bool{false, true} {
		r, hop := setup(t)
		hop.stateless, hop.expose = true, true
		out := &fakeOut{}
		rq := request("chatty", out, hop.c)
		rq.Stateless, rq.WantsLogs, rq.LogLevel = true, wants, "debug"
		if _, err := r.Relay(context.Background(), hop, rq); err != nil {
			t.Fatal(err)
		}
		want := []string{`"notifications/progress"`}
		if wants {
			want = []string{`"notifications/message"`, `"notifications/progress"`}
		}
		if len(out.events) != len(want) || hop.awaited != 0 || (hop.logs == 1) != wants {
			t.Fatalf("wants logs %v: events %q, awaited %d, logs enabled %d", wants, out.events, hop.awaited, hop.logs)
		}
		for i, w := range want {
			if !strings.Contains(out.events[i], w) {
				t.Errorf("event %d: %s, want %s", i, out.events[i], w)
			}
		}
	}
}

// TestRelayError: the upstream's JSON-RPC error is the client's.
func TestRelayError(t *testing.T) {
	r, hop := setup(t)
	_, err := r.Relay(context.Background(), hop, request("fail", &fakeOut{}, hop.c))
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("Relay error %v, want the upstream's -32602", err)
	}
}

// TestRelayLacksCapability: a 2026-07-28 caller that did not declare
// elicitation is told so when the upstream asks for it.
func TestRelayLacksCapability(t *testing.T) {
	r, hop := setup(t)
	hop.stateless = true
	rq := request("ask", &fakeOut{}, hop.c)
	rq.Stateless = true
	_, err := r.Relay(context.Background(), hop, rq)
	var ce *protocol.CapabilityError
	if !errors.As(err, &ce) || ce.Capability != "elicitation" {
		t.Errorf("Relay error %v, want a missing elicitation capability", err)
	}
}
