package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestStatelessResourceSubscriptions: a 2026-07-28 client's
// subscriptions/listen with resourceSubscriptions is agreed for the
// resources of a 2025-11-25 upstream that offers subscriptions, and gets
// their updates, with the gateway's URIs, tagged with its subscription,
// and nothing of another resource; a URI the tenant may not see, or of no
// upstream, is not agreed. Closing the stream ends the upstream
// subscription. Task notifications asked for without the Tasks extension
// are refused with -32021.
func TestStatelessResourceSubscriptions(t *testing.T) {
	subscribed, unsubscribed := make(chan string, 256), make(chan struct{}, 4)
	srv := mcp.NewServer(&mcp.Implementation{Name: "up"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			subscribed <- r.Params.URI
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	for _, name := range []string{"a", "b", "secret"} {
		uri := "test://up/" + name
		srv.AddResource(&mcp.Resource{URI: uri, Name: name}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: name}}}, nil
		})
	}
	hs := newSDKServer(t, srv, func() { unsubscribed <- struct{}{} })
	url := startGateway(t, []upstreamSpec{{name: "up", url: hs}}, func(c *config.Config) {
		c.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{Name: "up", Resources: config.Rules{Deny: []string{"test://up/secret"}}}}}}
	})
	// The tenant's resources, as a 2026-07-28 client sees them.
	if resp, body := do(t, post2026(t, url, 1, "resources/list", "")); resp.StatusCode != 200 || !strings.Contains(body, `"up+test://up/a"`) {
		t.Fatalf("resources/list: %d %s", resp.StatusCode, body)
	}

	// Task notifications without the extension: -32021.
	resp, body := do(t, post2026(t, url, 2, "subscriptions/listen", `"notifications":{"taskIds":["task-1"]}`))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "-32021") || !strings.Contains(body, "io.modelcontextprotocol/tasks") {
		t.Errorf("taskIds without the extension: %d %s", resp.StatusCode, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	req := post2026(t, url, 42, "subscriptions/listen",
		`"notifications":{"resourceSubscriptions":["up+test://up/a","up+test://up/secret","up+test://up/none","other://x"]}`).WithContext(ctx)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := testkit.ReadSSE(resp.Body)
	next := func() string {
		t.Helper()
		select {
		case e := <-events:
			return e.Data
		case <-time.After(5 * time.Second):
			t.Fatal("no event on the subscription")
			return ""
		}
	}
	validate := schemaValidator(t)
	ack := next()
	validate("SubscriptionsAcknowledgedNotification", ack)
	// up+test://up/none is the upstream's to judge, as a resources/read
	// of it would be: this one accepts any subscription.
	if !strings.Contains(ack, `"up+test://up/a"`) || strings.Contains(ack, "secret") || strings.Contains(ack, "other://") ||
		!strings.Contains(ack, `"io.modelcontextprotocol/subscriptionId":42`) {
		t.Fatalf("acknowledgment: %s", ack)
	}
	for range 2 {
		select {
		case got := <-subscribed:
			if got != "test://up/a" && got != "test://up/none" {
				t.Fatalf("the upstream was subscribed to %s", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the upstream was not subscribed")
		}
	}
	for _, uri := range []string{"test://up/b", "test://up/secret", "test://up/a"} {
		_ = srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
	}
	ev := next()
	validate("ResourceUpdatedNotification", ev)
	if !strings.Contains(ev, `"uri":"up+test://up/a"`) || !strings.Contains(ev, `"io.modelcontextprotocol/subscriptionId":42`) {
		t.Errorf("update: %s", ev)
	}
	select {
	case e := <-events:
		t.Errorf("an update not subscribed to: %s", e.Data)
	case <-time.After(300 * time.Millisecond):
	}

	// Closing the stream ends the upstream session it subscribed on.
	cancel()
	select {
	case <-unsubscribed:
	case <-time.After(5 * time.Second):
		t.Error("the upstream session of the subscription was not ended")
	}

	// A client asking for more resources than a listen may hold is agreed
	// the bound's worth, and the upstream subscribed to no more.
	var many []string
	for i := range 200 {
		many = append(many, fmt.Sprintf("%q", fmt.Sprintf("up+test://up/n%d", i)))
	}
	for len(subscribed) > 0 {
		<-subscribed
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	resp2, err := http.DefaultClient.Do(post2026(t, url, 43, "subscriptions/listen",
		`"notifications":{"resourceSubscriptions":[`+strings.Join(many, ",")+`]}`).WithContext(ctx2))
	if err != nil {
		t.Fatal(err)
	}
	ack2 := <-testkit.ReadSSE(resp2.Body)
	if n := strings.Count(ack2.Data, "up+test://up/n"); n != 64 {
		t.Errorf("%d resources agreed of 200, want the bound, 64", n)
	}
}

// newSDKServer serves srv over Streamable HTTP and returns its URL; ended
// is called when a client deletes its session.
func newSDKServer(t *testing.T, srv *mcp.Server, ended func()) string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			defer ended()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs.URL
}

// TestStatelessResourceSubscriptionsModern: a 2026-07-28 client's
// subscriptions/listen for resources of a 2026-07-28 upstream is passed on
// as the upstream's own subscriptions/listen, with the upstream's URIs:
// what the upstream agrees to is agreed, the tenant's hidden resource is
// not asked for, and the updates reach the client with the gateway's URIs
// and its subscription id, nothing of another resource.
func TestStatelessResourceSubscriptionsModern(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "up"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	for _, name := range []string{"a", "b", "secret"} {
		uri := "test://up/" + name
		srv.AddResource(&mcp.Resource{URI: uri, Name: name}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: name}}}, nil
		})
	}
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	url := startGateway(t, []upstreamSpec{{name: "up", url: hs.URL}}, func(c *config.Config) {
		c.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{Name: "up", Resources: config.Rules{Deny: []string{"test://up/secret"}}}}}}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(post2026(t, url, 7, "subscriptions/listen",
		`"notifications":{"resourceSubscriptions":["up+test://up/a","up+test://up/secret"]}`).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	events := testkit.ReadSSE(resp.Body)
	next := func() string {
		t.Helper()
		select {
		case e := <-events:
			return e.Data
		case <-time.After(5 * time.Second):
			t.Fatal("no event on the subscription")
			return ""
		}
	}
	validate := schemaValidator(t)
	ack := next()
	validate("SubscriptionsAcknowledgedNotification", ack)
	if !strings.Contains(ack, `"up+test://up/a"`) || strings.Contains(ack, "secret") || !strings.Contains(ack, `"io.modelcontextprotocol/subscriptionId":7`) {
		t.Fatalf("acknowledgment: %s", ack)
	}
	for _, uri := range []string{"test://up/b", "test://up/secret", "test://up/a"} {
		_ = srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
	}
	ev := next()
	validate("ResourceUpdatedNotification", ev)
	if !strings.Contains(ev, `"uri":"up+test://up/a"`) || !strings.Contains(ev, `"io.modelcontextprotocol/subscriptionId":7`) {
		t.Errorf("update: %s", ev)
	}
	select {
	case e := <-events:
		t.Errorf("an update not subscribed to: %s", e.Data)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestSessionSubscriptionsOfModernUpstream: a 2025-11-25 session
// subscribes to resources of a 2026-07-28 upstream, which has no
// resources/subscribe: the gateway keeps the subscriptions and, from the
// replica holding the session's GET stream, asks the upstream for their
// updates on a subscriptions/listen of its own, opened again whenever
// they change. The client hears of what it subscribed to, with the
// gateway's URIs, and of nothing else.
func TestSessionSubscriptionsOfModernUpstream(t *testing.T) {
	ctx := context.Background()
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
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	url := startGateway(t, []upstreamSpec{{name: "up", url: hs.URL}})
	alice := connectListen(t, url)
	if caps := alice.cs.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.Subscribe {
		t.Fatalf("the gateway offers no subscriptions: %+v", caps.Resources)
	}
	if err := alice.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "up+test://up/a"}); err != nil {
		t.Fatal(err)
	}
	until(t, "a's update", func() bool {
		_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/b"})
		_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/a"})
		return len(alice.Updated()) > 0
	})
	for _, uri := range alice.Updated() {
		if uri != "up+test://up/a" {
			t.Fatalf("the client heard of %q", uri)
		}
	}
	// Subscribed to b, unsubscribed from a: the upstream's listen is
	// opened again, for b alone.
	if err := alice.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "up+test://up/b"}); err != nil {
		t.Fatal(err)
	}
	if err := alice.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "up+test://up/a"}); err != nil {
		t.Fatal(err)
	}
	seen := len(alice.Updated())
	until(t, "b's update", func() bool {
		_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/a"})
		_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/b"})
		got := alice.Updated()[seen:]
		return len(got) > 0 && got[len(got)-1] == "up+test://up/b"
	})
	// a's updates sent before the listen was opened again may have come:
	// none after the first of b's.
	got := alice.Updated()[seen:]
	first := slices.Index(got, "up+test://up/b")
	for _, uri := range got[first:] {
		if uri != "up+test://up/b" {
			t.Fatalf("after unsubscribing, the client heard of %q", uri)
		}
	}
}
