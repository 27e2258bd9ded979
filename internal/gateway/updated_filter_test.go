package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
)

// TestUpdatedFollowsTheTenantRules: a resources/updated an upstream sends
// on a session's GET stream reaches the client only while the tenant's
// rules in force let it see the resource. The client subscribed to two
// resources; a reload then hides one from its tenant: its updates stop,
// the other's still arrive, in the gateway's namespace.
func TestUpdatedFollowsTheTenantRules(t *testing.T) {
	ctx := context.Background()
	u := newListenUpstream(t)
	g, url := startGatewayG(t, []upstreamSpec{{name: "up", url: u.url}})
	alice := connectListen(t, url) // no roots: the subscriptions open the stream
	for _, uri := range []string{"up+test://up/a", "up+test://up/b"} {
		if err := alice.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	until(t, "b's update while b is visible", func() bool {
		_ = u.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/b"})
		return len(alice.Updated()) > 0
	})

	next := *g.Config()
	next.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{
		{Name: "up", Resources: config.Rules{Deny: []string{"test://up/b"}}},
	}}}
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(&next); err != nil {
		t.Fatal(err)
	}
	// b's updates, then a's: the stream delivers in order, so once a's
	// arrives, any b sent before it would have too.
	seen := len(alice.Updated())
	until(t, "a's update after the reload", func() bool {
		_ = u.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/b"})
		_ = u.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/a"})
		got := alice.Updated()[seen:]
		return len(got) > 0 && got[len(got)-1] == "up+test://up/a"
	})
	// Skip what was in flight at the reload: b's updates sent before it.
	got := alice.Updated()[seen:]
	first := 0
	for i, uri := range got {
		if uri == "up+test://up/a" {
			first = i
			break
		}
	}
	for _, uri := range got[first:] {
		if uri != "up+test://up/a" {
			t.Errorf("after the reload the client heard of %q", uri)
		}
	}
}

// TestUpdatedNeedsTheSessionsSubscription: an upstream that sends a
// session updates of a resource the session did not subscribe to is not
// believed. The client subscribes to a only; the upstream, every time it
// is asked to forge, rewrites a's update into one of b (a resource the
// tenant may see) on the session's GET stream. The client hears of a, in
// order after the forged ones, and never of b; once it unsubscribed from
// a, it hears of a no more, though the upstream still sends it.
func TestUpdatedNeedsTheSessionsSubscription(t *testing.T) {
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
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sdk.ServeHTTP(&forger{ResponseWriter: w}, r)
	}))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	_, url := startGatewayG(t, []upstreamSpec{{name: "up", url: hs.URL}})
	alice := connectListen(t, url)
	if err := alice.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "up+test://up/a"}); err != nil {
		t.Fatal(err)
	}
	forged := &mcp.ResourceUpdatedNotificationParams{URI: "test://up/a", Meta: mcp.Meta{"forge": true}}
	until(t, "a's update after forged ones", func() bool {
		_ = srv.ResourceUpdated(ctx, forged)
		_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/a"})
		return len(alice.Updated()) > 0
	})
	for _, uri := range alice.Updated() {
		if uri != "up+test://up/a" {
			t.Fatalf("the client heard of %q, which it did not subscribe to", uri)
		}
	}

	// Unsubscribed, then subscribed to b: a's updates, real ones, are no
	// longer the session's, b's are.
	if err := alice.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "up+test://up/a"}); err != nil {
		t.Fatal(err)
	}
	if err := alice.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "up+test://up/b"}); err != nil {
		t.Fatal(err)
	}
	seen := len(alice.Updated())
	// The upstream (the SDK) no longer sends a's updates to the session
	// itself: the forger sends them, as b's, only when asked, so a is
	// forged from b here.
	until(t, "b's update", func() bool {
		_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/b", Meta: mcp.Meta{"unforge": true}})
		_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://up/b"})
		return len(alice.Updated()) > seen
	})
	for _, uri := range alice.Updated()[seen:] {
		if uri != "up+test://up/b" {
			t.Fatalf("after unsubscribing, the client heard of %q", uri)
		}
	}
}

// forger rewrites, in what an upstream writes, updates marked "forge" into
// updates of test://up/b, and those marked "unforge" into updates of
// test://up/a: a hostile upstream's updates of resources the session did
// not subscribe to.
type forger struct{ http.ResponseWriter }

func (f *forger) Write(p []byte) (int, error) {
	switch {
	case bytes.Contains(p, []byte(`"unforge"`)):
		q := bytes.ReplaceAll(p, []byte("test://up/b"), []byte("test://up/a"))
		if _, err := f.ResponseWriter.Write(q); err != nil {
			return 0, err
		}
		return len(p), nil
	case bytes.Contains(p, []byte(`"forge"`)):
		q := bytes.ReplaceAll(p, []byte("test://up/a"), []byte("test://up/b"))
		if _, err := f.ResponseWriter.Write(q); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return f.ResponseWriter.Write(p)
}

func (f *forger) Flush() { f.ResponseWriter.(http.Flusher).Flush() }

// TestSubscriptionsAreBounded: a session holds at most 128 subscriptions
// of one upstream; the next is refused before it reaches the upstream,
// with a message that says what to do, and one unsubscription makes room.
func TestSubscriptionsAreBounded(t *testing.T) {
	ctx := context.Background()
	u := newListenUpstream(t)
	for i := range 130 {
		uri := fmt.Sprintf("test://up/r%d", i)
		u.srv.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "x"}}}, nil
		})
	}
	_, url := startGatewayG(t, []upstreamSpec{{name: "up", url: u.url}})
	alice := connectListen(t, url)
	for i := range 128 {
		if err := alice.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: fmt.Sprintf("up+test://up/r%d", i)}); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	err := alice.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "up+test://up/r128"})
	if err == nil || !strings.Contains(err.Error(), "at most 128 resources") {
		t.Fatalf("subscription past the bound: %v", err)
	}
	// Subscribing again to one held is no new subscription.
	if err := alice.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "up+test://up/r0"}); err != nil {
		t.Fatal(err)
	}
	if err := alice.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "up+test://up/r0"}); err != nil {
		t.Fatal(err)
	}
	if err := alice.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "up+test://up/r128"}); err != nil {
		t.Fatalf("subscription after an unsubscription: %v", err)
	}
}
