package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestConcurrencyQueueZero: "queue: 0" written in the config file means
// that none wait: with the upstream's one slot taken, a call is refused at
// once, not after queue_timeout (the default used to replace the 0 with
// max_in_flight). So is a call held back by its tenant's per_tenant share.
func TestConcurrencyQueueZero(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	b := testkit.NewUpstream(t, "beta")
	parsed, err := config.Parse("zero.yaml", []byte(`
auth: {anonymous: true}
upstreams:
  - name: alpha
    url: `+a.URL+`
    concurrency: {max_in_flight: 1, queue: 0, queue_timeout: 1h}
  - name: beta
    url: `+b.URL+`
    concurrency: {max_in_flight: 2, per_tenant: 1, queue: 0, queue_timeout: 1h}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range parsed.Upstreams {
		if u.Concurrency.Queue == nil || u.Concurrency.QueueSize() != 0 {
			t.Fatalf("%s: queue %d after defaults, want 0", u.Name, u.Concurrency.QueueSize())
		}
	}
	url := startGateway(t, []upstreamSpec{spec(a), spec(b)}, func(c *config.Config) {
		c.Upstreams[0].Concurrency = parsed.Upstreams[0].Concurrency
		c.Upstreams[1].Concurrency = parsed.Upstreams[1].Concurrency
	})
	waiting := make(chan string, 2)
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{
		ProgressHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			waiting <- req.Params.Message
		},
	})
	gates := []<-chan callResult{
		goCall(t, cs, "alpha__gate", nil, mcp.Meta{"progressToken": "a"}),
		goCall(t, cs, "beta__gate", nil, mcp.Meta{"progressToken": "b"}),
	}
	for range gates {
		select {
		case <-waiting:
		case <-time.After(10 * time.Second):
			t.Fatal("a gate call did not reach its upstream")
		}
	}

	for _, c := range []struct{ tool, want string }{
		{"alpha__echo", `Upstream "alpha" is busy (1 requests in flight, none may wait). Retry after 3600s.`},
		{"beta__echo", `Upstream "beta" is busy (1 requests of this tenant in flight, none may wait). Retry after 3600s.`},
	} {
		// Had it waited, it would wait for an hour: the call's own
		// deadline (goCall's) fails the test first.
		if r := <-goCall(t, cs, c.tool, map[string]any{"text": "x"}, nil); r.err != nil || !r.isErr || r.text != c.want {
			t.Errorf("%s with no slot free: %+v, want %q", c.tool, r, c.want)
		}
	}
	a.Release()
	b.Release()
	for _, g := range gates {
		if r := <-g; r.err != nil || r.text != "released" {
			t.Errorf("gate call: %+v", r)
		}
	}
}
