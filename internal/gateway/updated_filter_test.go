package gateway_test

import (
	"context"
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
