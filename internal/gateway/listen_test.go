package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

//lint:file-ignore SA1019 roots, sampling and logging are deprecated only from 2026-07-28; the 2025-11-25 sessions tested here use them

// Messages outside a request: what an upstream says on its session's GET
// stream reaches the client session it belongs to, through the replica
// that holds that client's GET stream.

// listenUpstream is a go-sdk server with two subscribable resources, which
// logs and asks for roots when the test says so.
type listenUpstream struct {
	srv *mcp.Server
	url string
}

func newListenUpstream(t *testing.T) *listenUpstream {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "up"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	for _, name := range []string{"a", "b"} {
		uri := "test://up/" + name
		srv.AddResource(&mcp.Resource{URI: uri, Name: name}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: name}}}, nil
		})
	}
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return &listenUpstream{srv: srv, url: hs.URL}
}

// listenClient is a go-sdk client session that records what reaches it
// outside its requests.
type listenClient struct {
	cs *mcp.ClientSession

	mu      sync.Mutex
	updated []string // notifications/resources/updated URIs
	logs    []string // notifications/message data
	changed int      // notifications/resources/list_changed
}

func (c *listenClient) seen(f func() []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), f()...)
}

func (c *listenClient) Updated() []string { return c.seen(func() []string { return c.updated }) }
func (c *listenClient) Logs() []string    { return c.seen(func() []string { return c.logs }) }

// connectListen connects a 2025-11-25 go-sdk client to url. With roots,
// the client declares roots and lists them, and sampling, answering with
// its first root; without, it declares no capability at all.
func connectListen(t *testing.T, url string, roots ...string) *listenClient {
	t.Helper()
	c := &listenClient{}
	opts := &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			c.mu.Lock()
			c.updated = append(c.updated, r.Params.URI)
			c.mu.Unlock()
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			c.mu.Lock()
			c.changed++
			c.mu.Unlock()
		},
		//lint:ignore SA1019 logging is deprecated only from 2026-07-28; the 2025-11-25 sessions the gateway serves still use it
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			c.mu.Lock()
			c.logs = append(c.logs, r.Params.Data.(string))
			c.mu.Unlock()
		},
	}
	if len(roots) == 0 {
		opts.Capabilities = &mcp.ClientCapabilities{}
	} else {
		opts.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled by " + roots[0]}}, nil
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "listen-test", Version: "0.0.1"}, opts)
	for _, r := range roots {
		//lint:ignore SA1019 roots are deprecated only from 2026-07-28; the 2025-11-25 sessions the gateway serves still use them
		client.AddRoots(&mcp.Root{URI: r, Name: r})
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: transport}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

// until calls try every testkit.PollInterval until it reports true, for
// up to 15s: an upstream sends on its GET stream only once the gateway
// opened it.
func until(t *testing.T, what string, try func() bool) {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, try, "timed out waiting for %s", what)
}

// askRoots asks every upstream session for its roots, until one client's
// answer arrives, and returns the answers and refusals by session.
func (u *listenUpstream) askRoots(t *testing.T) (roots []string, refused []error) {
	t.Helper()
	for ss := range u.srv.Sessions() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		start := time.Now()
		//lint:ignore SA1019 roots are deprecated only from 2026-07-28
		res, err := ss.ListRoots(ctx, nil)
		cancel()
		var we *sdkjsonrpc.Error
		switch {
		case err == nil:
			for _, r := range res.Roots {
				roots = append(roots, r.URI)
			}
		case errors.As(err, &we):
			// The gateway's answer: at once, not at a timeout.
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("roots/list refused after %v", d)
			}
			refused = append(refused, err)
		}
	}
	return roots, refused
}

// logAll logs msg on every upstream session.
func (u *listenUpstream) logAll(msg string) {
	for ss := range u.srv.Sessions() {
		//lint:ignore SA1019 logging is deprecated only from 2026-07-28
		_ = ss.Log(context.Background(), &mcp.LoggingMessageParams{Level: "info", Data: msg})
	}
}

// exerciseListen runs the scenario of the tests below against url (one
// replica, or a load balancer in front of several gs).
func exerciseListen(t *testing.T, u *listenUpstream, url string, gs ...*gateway.Gateway) {
	ctx := context.Background()
	alice := connectListen(t, url, "file:///alice")
	bob := connectListen(t, url, "file:///bob")
	carol := connectListen(t, url) // no roots, no capability at all

	// The gateway announces resources.subscribe: the upstream offers it.
	if r := alice.cs.InitializeResult().Capabilities.Resources; r == nil || !r.Subscribe {
		t.Fatalf("resources capability %+v", r)
	}
	if err := alice.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "up+test://up/a"}); err != nil {
		t.Fatal(err)
	}
	if err := bob.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "up+test://up/b"}); err != nil {
		t.Fatal(err)
	}
	// Updates reach the subscriber, with the URI in the gateway's
	// namespace, and no other session.
	until(t, "alice's update", func() bool {
		_ = u.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/a"})
		return len(alice.Updated()) > 0
	})
	until(t, "bob's update", func() bool {
		_ = u.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/b"})
		return len(bob.Updated()) > 0
	})
	// A misrouted update would come to a session that is not told about
	// it anyway: no event says none is coming. quiet bounds the wait.
	const quiet = 200 * time.Millisecond
	time.Sleep(quiet)
	for _, uri := range alice.Updated() {
		if uri != "up+test://up/a" {
			t.Errorf("alice got an update of %q", uri)
		}
	}
	for _, uri := range bob.Updated() {
		if uri != "up+test://up/b" {
			t.Errorf("bob got an update of %q", uri)
		}
	}
	if got := carol.Updated(); len(got) > 0 {
		t.Errorf("carol, subscribed to nothing, got updates of %v", got)
	}

	// Carol sets a log level: then her upstream session's stream opens
	// too, and its log messages reach her.
	//lint:ignore SA1019 logging is deprecated only from 2026-07-28
	if err := carol.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	until(t, "carol's log message", func() bool {
		u.logAll("hello")
		return len(carol.Logs()) > 0
	})
	if got := carol.Logs(); got[0] != "hello" {
		t.Errorf("carol's logs: %v", got)
	}

	// A roots/list of no tool call reaches the clients that declared
	// roots, and their answers (POSTed to any replica) reach the
	// upstream; carol declared none, so the upstream hears -32601 at once.
	var roots []string
	var refused []error
	until(t, "every client's roots or refusal", func() bool {
		roots, refused = u.askRoots(t)
		return len(roots) == 2 && len(refused) == 1
	})
	if !(contains(roots, "file:///alice") && contains(roots, "file:///bob")) {
		t.Errorf("roots %v", roots)
	}
	if !strings.Contains(refused[0].Error(), "did not declare") {
		t.Errorf("carol's refusal: %v", refused[0])
	}
	// So does sampling, outside any call.
	var sampled []string
	for ss := range u.srv.Sessions() {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		//lint:ignore SA1019 sampling is deprecated only from 2026-07-28
		res, err := ss.CreateMessage(sctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		cancel()
		if err == nil {
			sampled = append(sampled, res.Content.(*mcp.TextContent).Text)
		} else if !strings.Contains(err.Error(), "did not declare") {
			t.Errorf("sampling refused otherwise than at once: %v", err)
		}
	}
	if len(sampled) != 2 || !contains(sampled, "sampled by file:///alice") {
		t.Errorf("sampled: %v", sampled)
	}

	// The upstream's ping is answered by the gateway.
	for ss := range u.srv.Sessions() {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if err := ss.Ping(pctx, nil); err != nil {
			t.Errorf("upstream ping: %v", err)
		}
		cancel()
	}

	// The gateway does not watch this upstream (upstreams[].watch is off
	// in these tests): its list_changed, on each session's stream, reaches
	// the client, and the next list is fresh on the replica that relayed
	// it (others keep theirs up to server.list_cache_ttl).
	if _, err := alice.cs.ListResources(ctx, nil); err != nil { // cached now
		t.Fatal(err)
	}
	u.srv.AddResource(&mcp.Resource{URI: "test://up/late", Name: "late"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	until(t, "alice's resources/list_changed", func() bool {
		alice.mu.Lock()
		defer alice.mu.Unlock()
		return alice.changed > 0
	})
	if len(gs) == 1 {
		res, err := alice.cs.ListResources(ctx, nil)
		if err != nil || len(res.Resources) != 3 {
			t.Errorf("resources after list_changed: %v %+v", err, res)
		}
	}

	// A message the gateway itself sends a session, from any replica,
	// reaches that session's GET stream and no other.
	before := len(alice.Logs())
	for i, g := range gs {
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"gateway %d"}}`, i)
		if err := gateway.ServerOf(g).NotifySession(ctx, carol.cs.ID(), []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	until(t, "the gateway's messages", func() bool {
		n := 0
		for _, l := range carol.Logs() {
			if strings.HasPrefix(l, "gateway ") {
				n++
			}
		}
		return n == len(gs)
	})
	if got := alice.Logs(); len(got) != before {
		t.Errorf("alice got carol's messages: %v", got[before:])
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestListenOneReplica: the memory store, one replica.
func TestListenOneReplica(t *testing.T) {
	u := newListenUpstream(t)
	g, url := startGatewayG(t, []upstreamSpec{{name: "up", url: u.url}})
	exerciseListen(t, u, url, g)
}

// TestListenAcrossReplicas: three replicas on one Redis behind a
// round-robin load balancer with no affinity: a client's POSTs
// (resources/subscribe, logging/setLevel, its answers to roots/list) land
// on other replicas than its GET stream, and still everything arrives.
func TestListenAcrossReplicas(t *testing.T) {
	u := newListenUpstream(t)
	store := redisStore(t)
	var backends []string
	var gs []*gateway.Gateway
	for range 3 {
		g, url := startGatewayG(t, []upstreamSpec{{name: "up", url: u.url}}, store)
		gs = append(gs, g)
		backends = append(backends, strings.TrimSuffix(url, "/mcp"))
	}
	lb := testkit.StartLB(t, backends)
	exerciseListen(t, u, lb.URL+"/mcp", gs...)
	// Some subscribe landed on another replica than its session's GET
	// stream: the wake-up crossed replicas.
	// And some answer to roots/list (a POST with no method) did too: it
	// reached its upstream from a replica that holds nothing of the
	// request.
	gets := map[string]int{}
	crossed, answered := false, false
	log := lb.Log()
	for _, r := range log {
		if r.Method == http.MethodGet && r.Status == http.StatusOK {
			gets[r.SessionID] = r.Backend
		}
	}
	for _, r := range log {
		b, ok := gets[r.SessionID]
		if !ok || r.Backend == b || r.Method != http.MethodPost {
			continue
		}
		switch r.RPCMethod {
		case "resources/subscribe", "logging/setLevel":
			crossed = true
		case "":
			answered = answered || r.Status == http.StatusAccepted
		}
	}
	if !crossed || !answered {
		t.Errorf("subscribe away from its GET stream: %v, an answer away from it: %v; the test proved nothing across replicas", crossed, answered)
	}
}

// waitUpstreamStreams waits until g holds n upstream streams for its
// clients' GET streams (mcpgw_upstream_streams_open).
func waitUpstreamStreams(t *testing.T, g *gateway.Gateway, n int) {
	t.Helper()
	want := fmt.Sprintf("mcpgw_upstream_streams_open %d\n", n)
	waitFor(t, func() bool {
		rec := httptest.NewRecorder()
		g.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return strings.Contains(rec.Body.String(), want)
	})
}

// TestListenStopsWhenTheUpstreamIsGone: a reload that takes the upstream
// from the session's tenant ends the relay: nothing the upstream says
// afterwards reaches the client, and its stream closes.
func TestListenStopsWhenTheUpstreamIsGone(t *testing.T) {
	u := newListenUpstream(t)
	other := testkit.NewUpstream(t, "other")
	g, url := startGatewayG(t, []upstreamSpec{{name: "up", url: u.url}, spec(other)})
	alice := connectListen(t, url, "file:///alice")
	waitUpstreamStreams(t, g, 2) // roots: both upstreams are heard
	//lint:ignore SA1019 logging is deprecated only from 2026-07-28
	if err := alice.cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	until(t, "a log message", func() bool {
		u.logAll("before")
		return len(alice.Logs()) > 0
	})

	next := *g.Config()
	next.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{Name: "other"}}}}
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(&next); err != nil {
		t.Fatal(err)
	}
	u.logAll("after")            // ends the relay
	waitUpstreamStreams(t, g, 1) // other's
	u.logAll("after")
	// A message that got through would come to alice unannounced: no
	// event says none is coming. quiet bounds the wait for one. ("before"
	// messages of the loop above may still be arriving.)
	const quiet = 200 * time.Millisecond
	time.Sleep(quiet)
	for _, got := range alice.Logs() {
		if strings.Contains(got, "after") {
			t.Errorf("a message after the upstream was taken from the tenant: %v", got)
		}
	}
}
