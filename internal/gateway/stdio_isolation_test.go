package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// stdioPeer is a client of the gateway that records what reaches it of
// what the stdio server sends outside of responses.
type stdioPeer struct {
	cs *mcp.ClientSession

	mu       sync.Mutex
	asked    []string // elicitation/create messages
	updated  []string // notifications/resources/updated URIs
	progress chan struct{}
}

func (p *stdioPeer) Asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

func (p *stdioPeer) Updated() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.updated...)
}

func connectStdioPeer(t *testing.T, url, token, answer string) *stdioPeer {
	t.Helper()
	p := &stdioPeer{progress: make(chan struct{}, 16)}
	p.cs = testkit.Connect(t, url, &testkit.ConnectOptions{
		Header: http.Header{"Authorization": {"Bearer " + token}},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			p.mu.Lock()
			p.asked = append(p.asked, r.Params.Message)
			p.mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": answer}}, nil
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			p.mu.Lock()
			p.updated = append(p.updated, r.Params.URI)
			p.mu.Unlock()
		},
		ProgressHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case p.progress <- struct{}{}:
			default:
			}
		},
	})
	return p
}

func (p *stdioPeer) call(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	r, err := p.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return text(t, r)
}

// blockCall starts fs__block on p and returns once it is in flight on
// the server (its first progress notification arrived); stop ends it.
func (p *stdioPeer) blockCall(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = p.cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__block", Meta: mcp.Meta{"progressToken": "b"}})
	}()
	select {
	case <-p.progress:
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("fs__block did not start")
	}
	return func() {
		cancel()
		<-done
	}
}

// TestStdioSharedProcessRoutesByOwner: two principals on one stdio process
// (two tenants with isolation: shared; two users of one tenant with the
// default isolation: tenant). What the process sends outside of a
// response reaches only the session it belongs to: an elicitation/create
// during a call reaches its caller and no one else; with two sessions'
// calls in flight no one can tell whose it is, and the process hears
// -32601; notifications/resources/updated reaches the sessions that
// subscribed the URI, not the session whose call caused it; the process
// is subscribed once for all the sessions, and unsubscribed with the
// last.
func TestStdioSharedProcessRoutesByOwner(t *testing.T) {
	for _, tc := range []struct {
		name      string
		isolation string
		other     [2]string // the other principal: subject, tenant
	}{
		{"two tenants, shared", config.IsolationShared, [2]string{"bob", "globex"}},
		{"two users of one tenant", config.IsolationTenant, [2]string{"carol", "acme"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab := newLabIssuer(t)
			bin := testkit.StdioServer(t)
			_, url := startGatewayG(t, nil, labAuth(lab), func(c *config.Config) {
				c.Upstreams = append(c.Upstreams, config.Upstream{Name: "fs", Command: []string{bin},
					Stdio: &config.UpstreamStdio{Isolation: tc.isolation, StopGrace: config.Duration(time.Second)}})
			})
			alice := connectStdioPeer(t, url, labToken(t, lab, url, "alice", "acme"), "alice's answer")
			other := connectStdioPeer(t, url, labToken(t, lab, url, tc.other[0], tc.other[1]), "the other's answer")
			pa, po := alice.call(t, "fs__pid", nil), other.call(t, "fs__pid", nil)
			if pa != po {
				t.Fatalf("alice and %s on processes %s and %s, want one", tc.other[0], pa, po)
			}

			// The caller is asked, and its answer is the one the call
			// continues with.
			if got := alice.call(t, "fs__elicit", map[string]any{"text": "approve the transfer of 100"}); got != "accept: alice's answer" {
				t.Errorf("alice's elicit = %q", got)
			}
			if got := alice.Asked(); len(got) != 1 || got[0] != "approve the transfer of 100" {
				t.Errorf("alice was asked %q", got)
			}
			// The other's call in flight: whose the request is, no one
			// can tell; the process is refused with -32601.
			stop := other.blockCall(t)
			got := alice.call(t, "fs__elicit", map[string]any{"text": "approve the transfer of 200"})
			stop()
			if !strings.HasPrefix(got, "error -32601:") {
				t.Errorf("elicit with two sessions' calls in flight = %q, want the process refused with -32601", got)
			}
			if got := other.Asked(); len(got) != 0 {
				t.Errorf("%s was asked %q", tc.other[0], got)
			}

			// resources/updated reaches the subscribers only.
			ctx := context.Background()
			if err := alice.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "fs+test://a"}); err != nil {
				t.Fatal(err)
			}
			if err := other.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "fs+test://b"}); err != nil {
				t.Fatal(err)
			}
			if got := other.call(t, "fs__subscribed", nil); got != "test://a,test://b 2" {
				t.Errorf("the process's subscriptions: %q", got)
			}
			// The other's call causes an update of alice's URI: it
			// reaches alice (on her stream), not the caller.
			other.call(t, "fs__updated", map[string]any{"uri": "test://a"})
			alice.call(t, "fs__updated", map[string]any{"uri": "test://a"})
			deadline := time.Now().Add(10 * time.Second)
			for len(alice.Updated()) == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if got := alice.Updated(); len(got) == 0 || got[0] != "fs+test://a" {
				t.Errorf("alice's updates: %q", got)
			}
			if got := other.Updated(); len(got) != 0 {
				t.Errorf("%s, not subscribed to test://a, got updates of %q", tc.other[0], got)
			}

			// A second subscriber of test://a: the process is not
			// subscribed again; it is unsubscribed once both left.
			if err := other.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "fs+test://a"}); err != nil {
				t.Fatal(err)
			}
			if got := alice.call(t, "fs__subscribed", nil); got != "test://a,test://b 2" {
				t.Errorf("the process's subscriptions after a second subscriber: %q", got)
			}
			if err := alice.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "fs+test://a"}); err != nil {
				t.Fatal(err)
			}
			if got := alice.call(t, "fs__subscribed", nil); got != "test://a,test://b 2" {
				t.Errorf("the process's subscriptions with one subscriber left: %q", got)
			}
			if err := other.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "fs+test://a"}); err != nil {
				t.Fatal(err)
			}
			if got := alice.call(t, "fs__subscribed", nil); got != "test://b 2" {
				t.Errorf("the process's subscriptions with none left: %q", got)
			}
		})
	}
}
