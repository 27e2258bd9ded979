package listen

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/bridge"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// fakeSession is a session with one upstream session per upstream.
type fakeSession struct {
	mu   sync.Mutex
	ups  []Upstream
	us   map[string]session.Upstream
	reqs chan string
}

func (f *fakeSession) Upstreams() []Upstream { return f.ups }
func (f *fakeSession) Current(name string) (Upstream, bool) {
	for _, up := range f.ups {
		if up.Name == name {
			return up, true
		}
	}
	return Upstream{}, false
}
func (f *fakeSession) Version() any { return 1 }
func (f *fakeSession) Entry(name string) (session.Upstream, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	us, ok := f.us[name]
	return us, ok
}
func (f *fakeSession) Reload(context.Context)                         {}
func (f *fakeSession) Reopen(context.Context, Upstream, string) error { return nil }
func (f *fakeSession) Holds(Upstream, string) bool                    { return false }
func (f *fakeSession) Stale(Upstream, catalog.Kind)                   {}
func (f *fakeSession) Updated(context.Context, Upstream, *jsonrpc.Message, func(string) bool) []byte {
	return nil
}
func (f *fakeSession) Note(_ context.Context, _ Upstream, _ session.Upstream, _ *jsonrpc.Message, raw []byte) []byte {
	return raw
}
func (f *fakeSession) Request(_ context.Context, _ Upstream, _ session.Upstream, msg *jsonrpc.Message, _ bridge.Out) {
	f.reqs <- msg.Method
}

// sdkUpstream is a go-sdk server over Streamable HTTP, and a client of
// it with one open session that set its log level.
func sdkUpstream(t *testing.T) (*mcp.Server, *upstream.Client, session.Upstream) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "u", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			ss.Close()
		}
	})
	c := upstream.New(config.Upstream{Name: "u", URL: hs.URL, Transport: config.TransportHTTP}, upstream.Options{})
	res, err := c.OpenAs(t.Context(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Call(t.Context(), res.Session, jsonrpc.StringID("lvl"), "logging/setLevel", json.RawMessage(`{"level":"debug"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Result(); err != nil {
		t.Fatal(err)
	}
	resp.Close()
	return srv, c, res.Session
}

func newHub(bus session.Bus) (*Hub, func()) {
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	hb := New(Options{Bus: bus, Logger: slog.New(slog.DiscardHandler), Go: func(f func(context.Context)) bool {
		wg.Go(func() { f(ctx) })
		return true
	}})
	return hb, func() { cancel(); wg.Wait() }
}

// TestListenRelaysTheUpstreamStream: a session that set a log level
// upstream (Listen) has that upstream's GET stream opened for its own GET
// stream: a log message the upstream sends outside any request reaches
// it, and stop closes the upstream stream and gives its slot back.
func TestListenRelaysTheUpstreamStream(t *testing.T) {
	srv, c, us := sdkUpstream(t)
	us.Listen = true
	fs := &fakeSession{ups: []Upstream{{Name: "u", Client: c}}, us: map[string]session.Upstream{"u": us}, reqs: make(chan string, 1)}
	bus := session.NewMemoryBus(session.BusOptions{})
	hb, closeHub := newHub(bus)
	defer closeHub()
	lim := &config.Limits{UpstreamStreams: 4, UpstreamStreamsPerPrincipal: 4, UpstreamStreamsPerTenant: 4}
	msgs, shape, stop := hb.Listen(t.Context(), fs, Client{SessionID: "s1", Who: &bridge.Caller{Principal: "p", Tenant: "t"}, Limits: lim})
	hb.Await(t.Context(), "s1", "u") // the upstream answered the stream's GET
	if hb.slots.Held() != 1 {
		t.Fatalf("%d streams held", hb.slots.Held())
	}
	for ss := range srv.Sessions() {
		//lint:ignore SA1019 logging is deprecated only from 2026-07-28; the 2025-11-25 sessions the gateway serves still use it
		if err := ss.Log(t.Context(), &mcp.LoggingMessageParams{Level: "info", Data: "outside any request"}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case m := <-msgs:
		if out := shape(m); !strings.Contains(string(out), "outside any request") {
			t.Errorf("relayed %s", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the log message did not arrive")
	}
	stop()
	if hb.slots.Held() != 0 {
		t.Errorf("%d streams held after stop", hb.slots.Held())
	}
}

// TestListenNeedsSomethingToHear: a session that set nothing upstream,
// and one whose only reason is roots on a stdio upstream, open no stream
// (and cost no slot); neither does a session past its share of the pool.
func TestListenNeedsSomethingToHear(t *testing.T) {
	_, c, us := sdkUpstream(t)
	bus := session.NewMemoryBus(session.BusOptions{})
	hb, closeHub := newHub(bus)
	defer closeHub()
	lim := &config.Limits{UpstreamStreams: 4, UpstreamStreamsPerPrincipal: 4, UpstreamStreamsPerTenant: 4}
	for _, tc := range []struct {
		name  string
		up    Upstream
		us    session.Upstream
		roots bool
		lim   *config.Limits
	}{
		{"nothing set", Upstream{Name: "u", Client: c}, us, false, lim},
		{"roots on stdio", Upstream{Name: "u", Client: c, Stdio: true}, us, true, lim},
		{"no session yet", Upstream{Name: "u", Client: c}, session.Upstream{Listen: true}, false, lim},
		{"past the share", Upstream{Name: "u", Client: c}, session.Upstream{SessionID: us.SessionID, ProtocolVersion: us.ProtocolVersion, Listen: true}, false,
			&config.Limits{UpstreamStreams: 4, UpstreamStreamsPerPrincipal: 0, UpstreamStreamsPerTenant: 4}},
	} {
		fs := &fakeSession{ups: []Upstream{tc.up}, us: map[string]session.Upstream{"u": tc.us}}
		_, _, stop := hb.Listen(t.Context(), fs, Client{SessionID: "s-" + tc.name, Who: &bridge.Caller{Principal: "p", Tenant: "t"}, Roots: tc.roots, Limits: tc.lim})
		if hb.slots.Held() != 0 {
			t.Errorf("%s: a stream opened", tc.name)
		}
		stop()
	}
}
