package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

// Budgets through the public surface: three replicas behind a round-robin
// load balancer on one Redis, a real Go SDK client, and the refusals as a
// caller (and its model) sees them.

// call calls a tool and returns its text and whether it is a tool error;
// a JSON-RPC error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return text(t, res), res.IsError
}

// TestBudgetsAcrossReplicas: a rate limit and a quota held across three
// replicas, the refusals a model can act on, and a quota reset at the next
// day.
func TestBudgetsAcrossReplicas(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	store := redisStore(t)
	const rate = 10
	var day atomic.Int64 // days added to the clock of every replica
	now := func() time.Time { return time.Now().Add(time.Duration(day.Load()) * 24 * time.Hour) }
	var auditLog syncBuffer
	budgets := func(c *config.Config) {
		store(c)
		c.Budgets.RateLimits = []config.RateLimit{{Name: "echo-rate", Tools: []string{"echo"}, Requests: rate}}
		c.Budgets.Quotas = []config.Quota{{Name: "headers-daily", Tools: []string{"headers"}, Calls: 5}}
	}
	var gs []*gateway.Gateway
	var backends []string
	for range 3 {
		g, u := startGatewayWith(t, gateway.Options{Now: now, Audit: audit.New(&auditLog)}, []upstreamSpec{spec(a)}, budgets)
		gs = append(gs, g)
		backends = append(backends, strings.TrimSuffix(u, "/mcp"))
	}
	lb := testkit.StartLB(t, backends)
	cs := testkit.Connect(t, lb.URL+"/mcp", nil)

	// The rate: as many calls as the client can make for a while; the
	// replicas together let through the burst and then `rate` a second,
	// within 2 calls.
	ok, refused := 0, 0
	var refusal string
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond {
		txt, isErr := call(t, cs, "alpha__echo", map[string]any{"text": "x"})
		if isErr {
			refused++
			refusal = txt
		} else {
			ok++
		}
	}
	elapsed := time.Since(start).Seconds()
	// Never more than the limit lets through; at least the burst (a
	// loaded machine may not make calls as fast as the rate allows).
	want := rate + rate*elapsed
	if float64(ok) > want+2 || ok < rate {
		t.Errorf("%d calls let through in %.2fs across 3 replicas, want at most %.1f + 2 (burst %d + %d/s) and at least the burst", ok, elapsed, want, rate, rate)
	}
	if refused == 0 {
		t.Fatal("no call refused")
	}
	if !strings.HasPrefix(refusal, `Rate limit "echo-rate" exceeded (10 requests per 1s per tenant, tools echo). Retry after `) {
		t.Errorf("refusal text %q", refusal)
	}
	for i, n := range lb.Requests() {
		if n < ok/3 {
			t.Errorf("replica %d served %d requests: the balancer did not spread them", i, n)
		}
	}
	// Other tools are not counted by that rule.
	if _, isErr := call(t, cs, "alpha__meta", nil); isErr {
		t.Error("meta refused by echo's rate")
	}

	// The quota: 5 calls of headers a day for the tenant, whichever
	// replica serves them.
	for i := range 5 {
		if txt, isErr := call(t, cs, "alpha__headers", nil); isErr {
			t.Fatalf("call %d of the quota: %s", i, txt)
		}
	}
	txt, isErr := call(t, cs, "alpha__headers", nil)
	if !isErr || !strings.HasPrefix(txt, `Quota "headers-daily" exhausted (5 tool calls per day per tenant, tools headers, resets `) {
		t.Fatalf("the 6th call: %v %q", isErr, txt)
	}
	used := 0.0
	for _, g := range gs {
		used = max(used, metricValue(scrape(t, g), `mcpgw_quota_used{quota="headers-daily",tenant="default"}`))
	}
	if used != 5 {
		t.Errorf("mcpgw_quota_used = %v, want 5", used)
	}
	refusals := 0.0
	for _, g := range gs {
		refusals += max(0, metricValue(scrape(t, g), `mcpgw_budget_refusals_total{budget="quota",name="headers-daily",tenant="default"}`))
	}
	if refusals != 1 {
		t.Errorf("quota refusals counted %v, want 1", refusals)
	}
	if !strings.Contains(auditLog.String(), `"reason":"quota headers-daily"`) || !strings.Contains(auditLog.String(), `"reason":"rate_limit echo-rate"`) {
		t.Errorf("the refusals are not in the audit log:\n%s", auditLog.String())
	}
	// The next day, the quota starts afresh.
	day.Add(1)
	if txt, isErr := call(t, cs, "alpha__headers", nil); isErr {
		t.Fatalf("the next day: %s", txt)
	}
}

// TestEdgeRateLimit: a rule that names no upstream or tool counts every
// HTTP request, and a flood is answered 429 with Retry-After before its
// body is read.
func TestEdgeRateLimit(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	var auditLog syncBuffer
	g, url := startGatewayWith(t, gateway.Options{Audit: audit.New(&auditLog)}, []upstreamSpec{spec(a)}, func(c *config.Config) {
		c.Budgets.RateLimits = []config.RateLimit{{Name: "per-user", Per: []string{"principal"}, Requests: 3, Interval: config.Duration(time.Minute)}}
	})
	sid := initialize(t, url) // two requests: initialize, initialized
	postJSON(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	// A body the gateway would refuse, were it read.
	resp, body := do(t, post(t, url, sid, strings.Repeat("x", 1<<20)))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "20" {
		t.Fatalf("4th request: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if _, code := rpcError(t, body); code != -31429 || !strings.Contains(body, `Rate limit \"per-user\" exceeded`) {
		t.Errorf("4th request: %s", body)
	}
	if n := metricValue(scrape(t, g), `mcpgw_budget_refusals_total{budget="rate_limit",name="per-user",tenant="default"}`); n != 1 {
		t.Errorf("refusals counted %v, want 1", n)
	}
	if !strings.Contains(auditLog.String(), `"event":"limit_exceeded"`) || !strings.Contains(auditLog.String(), `"reason":"rate_limit per-user"`) {
		t.Errorf("audit log:\n%s", auditLog.String())
	}
}

// TestConcurrencyBound: one call in flight to an upstream, one queued for
// at most the queue timeout, the next refused at once; another upstream is
// not held up.
func TestConcurrencyBound(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	b := testkit.NewUpstream(t, "beta")
	g, url := startGatewayG(t, []upstreamSpec{spec(a), spec(b)}, func(c *config.Config) {
		c.Upstreams[0].Concurrency = &config.Concurrency{MaxInFlight: 1, Queue: new(1), QueueTimeout: config.Duration(300 * time.Millisecond)}
	})
	cs := testkit.Connect(t, url, nil)
	var wg sync.WaitGroup
	var gated string
	wg.Go(func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__gate"})
		if err == nil && len(res.Content) > 0 {
			gated = res.Content[0].(*mcp.TextContent).Text
		}
	})
	waitFor(t, func() bool { return a.Count("tools/call") == 1 })

	var queued string
	var queuedFor time.Duration
	var qwg sync.WaitGroup
	qwg.Go(func() {
		start := time.Now()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "q"}})
		queuedFor = time.Since(start)
		if err == nil && res.IsError {
			queued = res.Content[0].(*mcp.TextContent).Text
		}
	})
	time.Sleep(100 * time.Millisecond) // the second call is waiting
	start := time.Now()
	txt, isErr := call(t, cs, "alpha__echo", map[string]any{"text": "r"})
	if !isErr || !strings.Contains(txt, `Upstream "alpha" is busy (1 requests in flight, queue full)`) || time.Since(start) > 250*time.Millisecond {
		t.Errorf("third call, after %v: %v %q", time.Since(start), isErr, txt)
	}
	if txt, isErr := call(t, cs, "beta__echo", map[string]any{"text": "b"}); isErr || txt != "beta:b" {
		t.Errorf("beta while alpha is full: %v %q", isErr, txt)
	}
	qwg.Wait() // the queued call gave up; the gate call still holds its slot
	if !strings.Contains(queued, "waited 300ms") || queuedFor < 250*time.Millisecond {
		t.Errorf("queued call, after %v: %q", queuedFor, queued)
	}
	a.Release()
	wg.Wait()
	if gated != "released" {
		t.Errorf("gate call: %q", gated)
	}
	if txt, isErr := call(t, cs, "alpha__echo", map[string]any{"text": "s"}); isErr || txt != "alpha:s" {
		t.Errorf("alpha once free: %v %q", isErr, txt)
	}
	if n := metricValue(scrape(t, g), `mcpgw_budget_refusals_total{budget="concurrency",name="alpha",tenant="default"}`); n != 2 {
		t.Errorf("concurrency refusals %v, want 2", n)
	}
}

// TestCircuitBreaker: an upstream that keeps failing is cut off (calls
// fail at once, lists leave it out, /readyz says so) while the other
// upstream serves throughout, and it is let back in once it recovers.
func TestCircuitBreaker(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	b := testkit.NewUpstream(t, "beta")
	var down atomic.Bool
	var hits atomic.Int32
	target, _ := url.Parse(a.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if down.Load() {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		r.URL.Path = target.Path
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	g, gwURL := startGatewayG(t, []upstreamSpec{{name: "alpha", url: front.URL + "/mcp"}, spec(b)}, func(c *config.Config) {
		c.Upstreams[0].CircuitBreaker = &config.CircuitBreaker{Failures: 2, OpenFor: config.Duration(400 * time.Millisecond)}
	})
	cs := testkit.Connect(t, gwURL, nil)
	tools := func() string {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			if strings.HasSuffix(tl.Name, "__echo") {
				names = append(names, tl.Name)
			}
		}
		return strings.Join(names, " ")
	}
	if got := tools(); got != "alpha__echo beta__echo" {
		t.Fatalf("tools before: %s", got)
	}
	down.Store(true)
	for i := range 2 {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "x"}})
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			t.Fatalf("failing call %d: %v", i, err)
		}
	}
	before := hits.Load()
	txt, isErr := call(t, cs, "alpha__echo", map[string]any{"text": "x"})
	if !isErr || !strings.HasPrefix(txt, `Upstream "alpha" is unavailable (circuit open after 2 consecutive failures). Retry after 1s.`) {
		t.Fatalf("call with the circuit open: %v %q", isErr, txt)
	}
	if got := tools(); got != "beta__echo" {
		t.Errorf("tools with alpha's circuit open: %s", got)
	}
	if hits.Load() != before {
		t.Errorf("alpha was reached %d times while its circuit was open", hits.Load()-before)
	}
	rec := httptest.NewRecorder()
	g.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "upstream alpha: circuit open") {
		t.Errorf("/readyz: %d %s", rec.Code, rec.Body.String())
	}
	if v := metricValue(scrape(t, g), `mcpgw_circuit_open{upstream="alpha"}`); v != 1 {
		t.Errorf("mcpgw_circuit_open = %v", v)
	}
	if txt, isErr := call(t, cs, "beta__echo", map[string]any{"text": "b"}); isErr || txt != "beta:b" {
		t.Errorf("beta with alpha's circuit open: %v %q", isErr, txt)
	}

	down.Store(false)
	time.Sleep(450 * time.Millisecond)
	if txt, isErr := call(t, cs, "alpha__echo", map[string]any{"text": "y"}); isErr || txt != "alpha:y" {
		t.Fatalf("the probe once alpha is back: %v %q", isErr, txt)
	}
	if got := tools(); got != "alpha__echo beta__echo" {
		t.Errorf("tools after: %s", got)
	}
	if v := metricValue(scrape(t, g), `mcpgw_circuit_open{upstream="alpha"}`); v != 0 {
		t.Errorf("mcpgw_circuit_open after = %v", v)
	}
}

// TestBudgetStoreDown: with the budgets' Redis stopped, a rate limit fails
// open (the call is served) and a quota fails closed (it is refused with a
// clear text), fast; both count again once Redis is back.
func TestBudgetStoreDown(t *testing.T) {
	r := testkit.StartRedis(t)
	a := testkit.NewUpstream(t, "alpha")
	b := testkit.NewUpstream(t, "beta")
	url := startGateway(t, []upstreamSpec{spec(a), spec(b)}, func(c *config.Config) {
		c.Budgets.Redis = &config.Redis{Addrs: []string{r.Addr}, Timeout: config.Duration(200 * time.Millisecond)}
		c.Budgets.RateLimits = []config.RateLimit{{Name: "calls", Upstreams: []string{"*"}, Requests: 1000}}
		c.Budgets.Quotas = []config.Quota{{Name: "alpha-daily", Upstreams: []string{"alpha"}, Calls: 1000}}
	})
	cs := testkit.Connect(t, url, nil)
	if txt, isErr := call(t, cs, "alpha__echo", map[string]any{"text": "1"}); isErr {
		t.Fatalf("with Redis up: %s", txt)
	}
	if n, err := r.Do("DBSIZE"); err != nil || n.(int64) < 2 {
		t.Fatalf("budget keys in Redis: %v %v", n, err)
	}
	r.Stop()
	start := time.Now()
	if txt, isErr := call(t, cs, "beta__echo", map[string]any{"text": "2"}); isErr || txt != "beta:2" {
		t.Errorf("rate limit with Redis down (fail open): %v %q", isErr, txt)
	}
	txt, isErr := call(t, cs, "alpha__echo", map[string]any{"text": "3"})
	if !isErr || !strings.HasPrefix(txt, `Quota "alpha-daily" could not be checked (the budget store is unavailable), and it refuses calls then. Retry after 1s.`) {
		t.Errorf("quota with Redis down (fail closed): %v %q", isErr, txt)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("two calls with Redis down took %v", d)
	}
	r.Start()
	waitFor(t, func() bool {
		_, isErr := call(t, cs, "alpha__echo", map[string]any{"text": "4"})
		return !isErr
	})
}

// TestBudgetErrorForOtherMethods: a method other than tools/call over a
// budget gets a JSON-RPC error whose data names the budget and the retry.
func TestBudgetErrorForOtherMethods(t *testing.T) {
	a := testkit.NewUpstreamWith(t, "alpha", testkit.UpstreamOptions{JSONResponse: true})
	url := startGateway(t, []upstreamSpec{spec(a)}, func(c *config.Config) {
		c.Budgets.RateLimits = []config.RateLimit{{Name: "alpha-calls", Upstreams: []string{"alpha"}, Requests: 1, Interval: config.Duration(time.Minute)}}
	})
	sid := initialize(t, url)
	get := `{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"alpha__greet","arguments":{"who":"x"}}}`
	if body := postJSON(t, url, sid, get); !strings.Contains(body, `"result"`) {
		t.Fatalf("first prompts/get: %s", body)
	}
	body := postJSON(t, url, sid, get)
	want := `{"jsonrpc":"2.0","id":2,"error":{"code":-31429,"message":"Rate limit \"alpha-calls\" exceeded (1 requests per 1m0s per tenant, upstreams alpha). Retry after 60s.","data":{"budget":"rate_limit","name":"alpha-calls","retryAfterSeconds":60}}}`
	if body != want {
		t.Errorf("second prompts/get:\n got %s\nwant %s", body, want)
	}
	// Lists are not routed to one upstream: no rule of an upstream counts
	// them.
	if body := postJSON(t, url, sid, `{"jsonrpc":"2.0","id":3,"method":"prompts/list"}`); !strings.Contains(body, "alpha__greet") {
		t.Errorf("prompts/list: %s", body)
	}
}
