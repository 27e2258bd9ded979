package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

// The concurrency queue is shared by the tenants: each waits in at most
// its share, and a full queue makes room for a lighter tenant's request
// by refusing the heaviest tenant's newest waiter.

// queueEnv is a gateway in front of alpha, whose concurrency is cc, for
// the tenants acme and globex of a real IDP.
type queueEnv struct {
	g     *gateway.Gateway
	alpha *testkit.Upstream
	acme  *mcp.ClientSession
	other *mcp.ClientSession // another principal of acme's
	glob  *mcp.ClientSession
	// waiting gets the progress of acme's gate call: the upstream holds
	// the call (and the gateway its slot) once it says "waiting".
	waiting chan string
}

func newQueueEnv(t *testing.T, cc config.Concurrency) *queueEnv {
	idp := testkit.StartIDP(t, idpClients)
	e := &queueEnv{alpha: testkit.NewUpstream(t, "alpha"), waiting: make(chan string, 1)}
	var url string
	e.g, url = startGatewayG(t, []upstreamSpec{spec(e.alpha)}, func(c *config.Config) {
		c.Auth = config.Auth{
			Issuers:        []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}},
			RequiredScopes: []string{"mcp"},
		}
		c.Tenants = []config.Tenant{{ID: "acme"}, {ID: "globex"}}
		c.Upstreams[0].Concurrency = &cc
	})
	bearer := func(client string) http.Header {
		return http.Header{"Authorization": {"Bearer " + idp.Token(t, client, url, "mcp")}}
	}
	e.acme = testkit.Connect(t, url, &testkit.ConnectOptions{Header: bearer("acme-app"),
		ProgressHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case e.waiting <- req.Params.Message:
			default:
			}
		}})
	e.glob = testkit.Connect(t, url, &testkit.ConnectOptions{Header: bearer("globex-app")})
	e.other = testkit.Connect(t, url, &testkit.ConnectOptions{Header: bearer("acme-other")})
	return e
}

// callResult is how one tools/call ended: its text, whether it is a tool
// error, or the JSON-RPC error.
type callResult struct {
	text  string
	isErr bool
	err   error
}

// goCall calls a tool in a goroutine; the result arrives on the channel.
func goCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, meta mcp.Meta) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
		r := callResult{err: err}
		if err == nil {
			r.isErr = res.IsError
			if len(res.Content) > 0 {
				if tc, ok := res.Content[0].(*mcp.TextContent); ok {
					r.text = tc.Text
				}
			}
		}
		ch <- r
	}()
	return ch
}

// holdSlot starts acme's gate call and returns once alpha holds it.
func (e *queueEnv) holdSlot(t *testing.T) <-chan callResult {
	t.Helper()
	gate := goCall(t, e.acme, "alpha__gate", nil, mcp.Meta{"progressToken": "gate"})
	select {
	case msg := <-e.waiting:
		if msg != "waiting" {
			t.Fatalf("gate progress %q", msg)
		}
	case r := <-gate:
		t.Fatalf("gate call ended before release: %+v", r)
	case <-time.After(10 * time.Second):
		t.Fatal("the gate call did not reach alpha")
	}
	return gate
}

// firstOf returns the first result of chans to arrive, with its index.
func firstOf(t *testing.T, chans []<-chan callResult, taken map[int]bool) (int, callResult) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		for i, ch := range chans {
			if taken[i] {
				continue
			}
			select {
			case r := <-ch:
				taken[i] = true
				return i, r
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatal("no call ended in 10s")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestConcurrencyQueueShare: acme floods alpha's queue while its one slot
// is taken: two of its calls wait (its share, half of the queue of 3) and
// the others are refused at once with the concurrency refusal. globex's
// call then still finds room: it waits and is served in its turn, after
// acme's earlier waiters.
func TestConcurrencyQueueShare(t *testing.T) {
	e := newQueueEnv(t, config.Concurrency{MaxInFlight: 1, Queue: new(3), QueuePerPrincipal: 3, QueueTimeout: config.Duration(time.Minute)})
	gate := e.holdSlot(t)

	const flood = 5
	var acme []<-chan callResult
	for i := range flood {
		acme = append(acme, goCall(t, e.acme, "alpha__echo", map[string]any{"text": "a" + string(rune('0'+i))}, nil))
	}
	const over = `Upstream "alpha" is busy (1 requests in flight, 2 of this tenant's requests waiting). Retry after 60s.`
	taken := map[int]bool{}
	for range flood - 2 {
		_, r := firstOf(t, acme, taken)
		if r.err != nil || !r.isErr || r.text != over {
			t.Fatalf("acme's call over its share: %+v, want %q", r, over)
		}
	}

	glob := goCall(t, e.glob, "alpha__echo", map[string]any{"text": "g"}, nil)
	// globex's call is waiting once acme's next one finds the queue full
	// (before, it finds acme's share taken). Each probe is refused at
	// once; a wrongly refused globex call would show on glob.
	deadline := time.Now().Add(10 * time.Second)
	for {
		txt, isErr := call(t, e.acme, "alpha__echo", map[string]any{"text": "probe"})
		if !isErr {
			t.Fatalf("acme's probe was served: %q", txt)
		}
		if strings.Contains(txt, "1 requests in flight, queue full") {
			break
		}
		if txt != over {
			t.Fatalf("acme's probe: %q", txt)
		}
		select {
		case r := <-glob:
			t.Fatalf("globex's call ended while the slot was taken: %+v", r)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("globex's call is not waiting after 10s")
		}
	}

	e.alpha.Release()
	if r := <-gate; r.err != nil || r.text != "released" {
		t.Fatalf("gate call: %+v", r)
	}
	for range 2 {
		i, r := firstOf(t, acme, taken)
		if r.err != nil || r.isErr || !strings.HasPrefix(r.text, "alpha:a") {
			t.Errorf("acme's waiter %d: %+v", i, r)
		}
	}
	if r := <-glob; r.err != nil || r.isErr || r.text != "alpha:g" {
		t.Errorf("globex's waiter: %+v", r)
	}
	m := scrape(t, e.g)
	if n := metricValue(m, `mcpgw_budget_refusals_total{budget="concurrency",name="alpha",tenant="acme"}`); n < flood-2+1 {
		t.Errorf("acme's concurrency refusals %v, want at least %d", n, flood-2+1)
	}
	if n := metricValue(m, `mcpgw_budget_refusals_total{budget="concurrency",name="alpha",tenant="globex"}`); n != 0 {
		t.Errorf("globex's concurrency refusals %v, want 0", n)
	}
}

// TestConcurrencyQueueEviction: acme may hold the whole queue (its share
// is the queue), and its next call is refused at once; globex's call then
// takes the place of acme's newest waiter, which is refused, and is
// served after acme's older waiter.
func TestConcurrencyQueueEviction(t *testing.T) {
	e := newQueueEnv(t, config.Concurrency{MaxInFlight: 1, Queue: new(2), QueuePerTenant: 2, QueuePerPrincipal: 2, QueueTimeout: config.Duration(time.Minute)})
	gate := e.holdSlot(t)

	var acme []<-chan callResult
	for i := range 3 {
		acme = append(acme, goCall(t, e.acme, "alpha__echo", map[string]any{"text": "a" + string(rune('0'+i))}, nil))
	}
	const full = `Upstream "alpha" is busy (1 requests in flight, queue full). Retry after 60s.`
	taken := map[int]bool{}
	if _, r := firstOf(t, acme, taken); r.err != nil || !r.isErr || r.text != full {
		t.Fatalf("acme's third call: %+v, want %q", r, full)
	}

	glob := goCall(t, e.glob, "alpha__echo", map[string]any{"text": "g"}, nil)
	if _, r := firstOf(t, acme, taken); r.err != nil || !r.isErr || r.text != full {
		t.Fatalf("acme's waiter that made room: %+v, want %q", r, full)
	}
	e.alpha.Release()
	if r := <-gate; r.err != nil || r.text != "released" {
		t.Fatalf("gate call: %+v", r)
	}
	if _, r := firstOf(t, acme, taken); r.err != nil || r.isErr || !strings.HasPrefix(r.text, "alpha:a") {
		t.Errorf("acme's older waiter: %+v", r)
	}
	if r := <-glob; r.err != nil || r.isErr || r.text != "alpha:g" {
		t.Errorf("globex's waiter: %+v", r)
	}
	if n := metricValue(scrape(t, e.g), `mcpgw_budget_refusals_total{budget="concurrency",name="alpha",tenant="acme"}`); n != 2 {
		t.Errorf("acme's concurrency refusals %v, want 2", n)
	}
}

// TestConcurrencyQueuePrincipalShare: within its tenant's share, one
// principal waits in at most its own (by default half the tenant's): with
// a queue of 4, acme may hold 2 waiters and each of its principals 1. Two
// calls of acme-app: one waits, the other is refused at once; then two of
// acme-other: likewise, so acme-other found room beside acme-app's waiter.
// Both waiters are served once the slot is free.
func TestConcurrencyQueuePrincipalShare(t *testing.T) {
	e := newQueueEnv(t, config.Concurrency{MaxInFlight: 1, Queue: new(4), QueueTimeout: config.Duration(time.Minute)})
	gate := e.holdSlot(t)
	const over = `Upstream "alpha" is busy (1 requests in flight, 1 of this principal's requests waiting). Retry after 60s.`
	const tenantOver = `Upstream "alpha" is busy (1 requests in flight, 2 of this tenant's requests waiting). Retry after 60s.`
	var waiters []<-chan callResult
	for _, cs := range []*mcp.ClientSession{e.acme, e.other} {
		pair := []<-chan callResult{
			goCall(t, cs, "alpha__echo", map[string]any{"text": "1"}, nil),
			goCall(t, cs, "alpha__echo", map[string]any{"text": "2"}, nil),
		}
		// The one refused ends at once; the other waits for the slot.
		// acme-other's second finds acme's share (2) taken as well,
		// which is said first.
		i, r := firstOf(t, pair, map[int]bool{})
		if r.err != nil || !r.isErr || (r.text != over && (cs == e.acme || r.text != tenantOver)) {
			t.Fatalf("a principal's second waiter: %+v, want %q", r, over)
		}
		waiters = append(waiters, pair[1-i])
	}
	e.alpha.Release()
	if r := <-gate; r.err != nil || r.text != "released" {
		t.Fatalf("gate call: %+v", r)
	}
	for i, ch := range waiters {
		if r := <-ch; r.err != nil || r.isErr || !strings.HasPrefix(r.text, "alpha:") {
			t.Errorf("waiter %d: %+v", i, r)
		}
	}
}
