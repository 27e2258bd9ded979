package gateway_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/testkit"
)

// Hostile clients answering requests for input they were not asked, and
// the goroutines the gateway starts beyond a request: each has an owner
// that bounds it and that Close waits for.

// unsolicited reads mcpgw_limit_rejections_total{limit="unsolicited_answer"}
// summed over the gateways' admin /metrics.
func unsolicited(t *testing.T, gs ...*gateway.Gateway) int {
	t.Helper()
	n := 0
	for _, g := range gs {
		rec := httptest.NewRecorder()
		g.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if strings.HasPrefix(line, "mcpgw_limit_rejections_total{") && strings.Contains(line, `limit="unsolicited_answer"`) {
				v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				if err != nil {
					t.Fatalf("metric line %q", line)
				}
				n += int(v)
			}
		}
	}
	return n
}

// mailboxKeys lists the Redis keys of the store edit configures that
// belong to requests for input (mailboxes, markers).
func mailboxKeys(t *testing.T, store func(*config.Config)) []string {
	t.Helper()
	var c config.Config
	store(&c)
	rdb := redis.NewClient(&redis.Options{Addr: c.Sessions.Redis.Addrs[0]})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), c.Sessions.Redis.KeyPrefix+"*mrtr*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// answerBody is a JSON-RPC response to the gateway's request id.
func answerBody(id, name string) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Quote(id) + `,"result":{"action":"accept","content":{"name":"` + name + `"}}}`
}

// postAnswer POSTs a response in session sid; the answer is always a bare
// 202, whether or not the gateway asked for it.
func postAnswer(t *testing.T, url, token, sid, body string) {
	t.Helper()
	resp, out := do(t, authedPost(t, url, token, sid, body))
	if resp.StatusCode != http.StatusAccepted || out != "" {
		t.Fatalf("POST %s: %d %q, want a bare 202", body, resp.StatusCode, out)
	}
}

// TestUnsolicitedAnswersLeaveNoMailbox: responses with ids of the form the
// gateway gives its requests for input, to requests it never sent, get
// 202 and leave nothing in the store, in either store; each is counted.
func TestUnsolicitedAnswersLeaveNoMailbox(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	for _, name := range []string{"memory", "redis"} {
		t.Run(name, func(t *testing.T) {
			var edits []func(*config.Config)
			var store func(*config.Config)
			if name == "redis" {
				store = redisStore(t)
				edits = append(edits, store)
			}
			g, url := startGatewayG(t, []upstreamSpec{spec(a)}, edits...)
			sid := initialize(t, url)
			key := base64.RawURLEncoding.EncodeToString([]byte("input-1"))
			var boxes []string
			for i := range 100 {
				box := session.NewID()
				boxes = append(boxes, box)
				body := answerBody("mcpgw.in."+box+"."+key, "Mallory")
				if i%2 == 1 {
					body = `{"jsonrpc":"2.0","id":"mcpgw.in.` + box + "." + key + `","error":{"code":-1,"message":"no"}}`
				}
				postAnswer(t, url, "", sid, body)
			}
			for _, id := range []string{"mcpgw.in.zz", "mcpgw.in." + session.NewID(), "mcpgw.in." + session.NewID() + ".%%", "elsewhere"} {
				postAnswer(t, url, "", sid, answerBody(id, "Mallory"))
			}
			postAnswer(t, url, "", sid, `{"jsonrpc":"2.0","id":7,"result":{}}`)
			if n := unsolicited(t, g); n != 105 {
				t.Errorf("unsolicited_answer counted %d times, want 105", n)
			}
			if store != nil {
				if keys := mailboxKeys(t, store); len(keys) != 0 {
					t.Errorf("unsolicited answers left %d keys in Redis: %q", len(keys), keys[:min(len(keys), 3)])
				}
				return
			}
			mb := gateway.StoreOf(g).(session.Mailbox)
			for _, box := range boxes {
				if b, err := mb.Take(context.Background(), "mrtr-answer:"+box, 0); !errors.Is(err, session.ErrNotFound) {
					t.Fatalf("mailbox %s holds %q (%v)", box, b, err)
				}
			}
		})
	}
}

// inputLabAuth runs a gateway as the resource server of the lab issuer, with
// an audience that every replica accepts.
func inputLabAuth(lab *labIssuer) func(*config.Config) {
	return func(c *config.Config) {
		c.Auth = config.Auth{Issuers: []config.Issuer{{
			Name: "lab", IssuerURL: lab.url, JWKSURL: lab.url + "/jwks", TenantClaim: "org.tenant", Audiences: []string{"mcpgw-hostile"},
		}}}
		c.Tenants = []config.Tenant{{ID: "acme"}}
	}
}

// inputLabToken is a token of the lab issuer for subject sub of tenant acme.
func inputLabToken(t *testing.T, lab *labIssuer, sub string) string {
	now := time.Now()
	return lab.sign(t, jwt.MapClaims{"iss": lab.url, "sub": sub, "aud": "mcpgw-hostile", "org": map[string]any{"tenant": "acme"},
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
}

// initElicit opens a 2025-11-25 session that declares elicitation.
func initElicit(t *testing.T, url, token string) string {
	t.Helper()
	const body = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"0"}}}`
	resp, out := do(t, authedPost(t, url, token, "", body))
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, out)
	}
	postAnswer(t, url, token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

// sseData sends the data of each event of an SSE body, until it ends.
func sseData(body io.Reader) <-chan string {
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				ch <- d
			}
		}
	}()
	return ch
}

func nextData(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case d, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10s")
	}
	return ""
}

// TestAnswerOnlyFromTheAskedSession: a 2026-07-28 upstream asks a
// 2025-11-25 session client for input. Another principal's answer, and an
// answer from another session of the same principal, with the real id,
// are ignored (202, counted, not relayed); the asked session's answer
// completes the call; a second answer to the same request is ignored. With
// Redis the call is on one replica and every answer goes to the other.
func TestAnswerOnlyFromTheAskedSession(t *testing.T) {
	m := testkit.NewUpstreamWith(t, "modern", testkit.UpstreamOptions{Stateless: true})
	lab := newLabIssuer(t)
	for _, name := range []string{"memory", "redis"} {
		t.Run(name, func(t *testing.T) {
			edits := []func(*config.Config){inputLabAuth(lab)}
			var store func(*config.Config)
			if name == "redis" {
				store = redisStore(t)
				edits = append(edits, store)
			}
			g1, one := startGatewayG(t, []upstreamSpec{spec(m)}, edits...)
			gs, two := []*gateway.Gateway{g1}, one
			if store != nil {
				var g2 *gateway.Gateway
				g2, two = startGatewayG(t, []upstreamSpec{spec(m)}, edits...)
				gs = append(gs, g2)
			}
			alice, bob := inputLabToken(t, lab, "alice"), inputLabToken(t, lab, "bob")
			sid := initElicit(t, one, alice)
			calls := m.Count("tools/call")

			req := authedPost(t, one, alice, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"modern__ask"}}`)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("call: %d %s", resp.StatusCode, ct)
			}
			events := sseData(resp.Body)
			var ask struct {
				ID     string `json:"id"`
				Method string `json:"method"`
			}
			if d := nextData(t, events); json.Unmarshal([]byte(d), &ask) != nil || ask.Method != "elicitation/create" || !strings.HasPrefix(ask.ID, "mcpgw.in.") {
				t.Fatalf("first event %s, want the request for input", d)
			}

			// Bob, and Alice's other session, answer with the real id.
			postAnswer(t, two, bob, initElicit(t, two, bob), answerBody(ask.ID, "Mallory"))
			postAnswer(t, two, alice, initElicit(t, two, alice), answerBody(ask.ID, "Eve"))
			// Both were judged before their 202: dropped, never posted to
			// the call's mailbox, so nothing can retry the call with them.
			if n := unsolicited(t, gs...); n != 2 {
				t.Fatalf("unsolicited_answer counted %d times after the foreign answers, want 2", n)
			}
			if n := m.Count("tools/call"); n != calls+1 {
				t.Fatalf("the upstream saw %d retries after foreign answers, want none", n-calls-1)
			}
			// The asked session's answer, on the other replica, is the one.
			postAnswer(t, two, alice, sid, answerBody(ask.ID, "Ada"))
			if d := nextData(t, events); !strings.Contains(d, `"id":1`) || !strings.Contains(d, "modern:hello Ada") {
				t.Fatalf("final event %s", d)
			}
			if n := m.Count("tools/call"); n != calls+2 {
				t.Fatalf("the upstream saw %d tools/call for the call, want 2 (the first and Ada's retry)", n-calls)
			}
			postAnswer(t, two, alice, sid, answerBody(ask.ID, "Ada again"))
			if n := unsolicited(t, gs...); n != 3 {
				t.Errorf("unsolicited_answer counted %d times, want 3 (another principal, another session, a duplicate)", n)
			}
			if store != nil {
				if keys := mailboxKeys(t, store); len(keys) != 0 {
					t.Errorf("%d keys left in Redis: %q", len(keys), keys)
				}
			}
		})
	}
}

// TestTooManyInputRequestsRefused: a 2026-07-28 upstream that asks a
// session client for more inputs at once than one mailbox holds
// (sessions.mailbox_messages) gets the call failed at once, before
// anything is asked of the client or kept in the store.
func TestTooManyInputRequestsRefused(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "greedy", Version: "0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "many"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		asks := mcp.InputRequestMap{}
		for i := range 100 {
			asks[fmt.Sprint("k", i)] = &mcp.ElicitParams{Message: "?", RequestedSchema: &jsonschema.Schema{Type: "object"}}
		}
		return &mcp.CallToolResult{InputRequests: asks, RequestState: "s"}, nil, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(up.Close)
	url := startGateway(t, []upstreamSpec{{name: "greedy", url: up.URL}})
	sid := initElicit(t, url, "")
	start := time.Now()
	resp, body := do(t, post(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greedy__many"}}`))
	if resp.StatusCode != 200 || !strings.Contains(body, "asked for 100 inputs at once, more than the gateway relays (64)") || strings.Contains(body, "elicitation/create") {
		t.Errorf("call: %d %s", resp.StatusCode, body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refused after %v", d)
	}
}

// gatewayGoroutines returns the stacks of the goroutines running the
// gateway's own code (not its tests' or testkit's).
func gatewayGoroutines() []string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, pkg := range []string{"internal/transport.", "internal/dispatch.", "internal/bridge.", "internal/catalog.", "internal/session.", "internal/upstream.", "internal/gateway.(*Gateway)", "internal/auth."} {
			if strings.Contains(g, "github.com/mcpgw/gateway/"+pkg) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// noGatewayGoroutines fails unless, within a few seconds, no goroutine
// runs the gateway's code.
func noGatewayGoroutines(t *testing.T) {
	t.Helper()
	// Nothing signals a goroutine's end but its absence from the stacks.
	var left []string
	if !testkit.Poll(5*time.Second, func() bool { left = gatewayGoroutines(); return len(left) == 0 }) {
		t.Fatalf("%d goroutines of the gateway left after Close; first:\n%s", len(left), left[0])
	}
}

// deleteCounter is a minimal 2025-11-25 upstream that issues sessions and
// counts the DELETEs that end them, how many at once, and its open
// connections.
type deleteCounter struct {
	deletes, inflight, maxInflight atomic.Int64
	conns, maxConns                atomic.Int64
	ids                            atomic.Int64
	// ended, if not nil, is closed by the want-th DELETE.
	want  int64
	ended chan struct{}
}

func (d *deleteCounter) start(t *testing.T) string {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(d.serve))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			raiseTo(&d.maxConns, d.conns.Add(1))
		case http.StateClosed, http.StateHijacked:
			d.conns.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func raiseTo(max *atomic.Int64, v int64) {
	for {
		m := max.Load()
		if v <= m || max.CompareAndSwap(m, v) {
			return
		}
	}
}

func (d *deleteCounter) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodDelete:
		raiseTo(&d.maxInflight, d.inflight.Add(1))
		time.Sleep(5 * time.Millisecond) // simulated latency: DELETEs overlap
		d.inflight.Add(-1)
		if d.deletes.Add(1) == d.want && d.ended != nil {
			close(d.ended)
		}
		return
	case http.MethodPost:
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &msg)
	if msg.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch msg.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", d.ids.Add(1)))
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"d","version":"0"}}}`, msg.ID)
	case "tools/list":
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, msg.ID)
	default:
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, msg.ID)
	}
}

// TestMassExpiryIsBounded: 2,000 sessions expire in the memory store at
// once. Their upstream sessions are all ended, by at most 8 DELETEs at a
// time (the router's expiry workers) over a bounded number of upstream
// connections, with the gateway's goroutines staying within a fixed
// bound of the count before the expiry and returning to it after; after
// Close, no goroutine of the gateway is left.
func TestMassExpiryIsBounded(t *testing.T) {
	const sessions = 2000
	d := &deleteCounter{want: sessions, ended: make(chan struct{})}
	g, url := startGatewayG(t, []upstreamSpec{{name: "d", url: d.start(t)}}, func(c *config.Config) {
		c.Sessions.IdleTTL = config.Duration(6 * time.Second)
		c.Sessions.MaxPerPrincipal, c.Sessions.MaxPerTenant = sessions, sessions
	})
	var wg sync.WaitGroup
	var next atomic.Int64
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= sessions {
				resp, err := http.DefaultClient.Do(post(t, url, "", initBody))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("initialize: %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	http.DefaultClient.CloseIdleConnections()
	// The closed connections' goroutines end on their own, signalling
	// nothing: give them a moment before the count the bounds are from.
	const settle = 50 * time.Millisecond
	time.Sleep(settle)
	base := runtime.NumGoroutine()
	baseConns := d.conns.Load()
	if n := d.deletes.Load(); n > 0 {
		t.Logf("creating the sessions took %v: %d expired before the rest were made", time.Since(start), n)
	}

	// 8 workers, each ending one session's one upstream session at a time
	// over one connection (2 goroutines on the client side): what the
	// expiry may add, with room for the store's and the runtime's own.
	const bound = 8*4 + 20
	// The count is sampled every millisecond until the last DELETE.
	var peak int
	sample := time.NewTicker(time.Millisecond)
	defer sample.Stop()
	timeout := time.After(30 * time.Second)
	for ended := false; !ended; {
		peak = max(peak, runtime.NumGoroutine())
		select {
		case <-d.ended:
			ended = true
		case <-sample.C:
		case <-timeout:
			t.Fatalf("%d of %d upstream sessions ended after 30s", d.deletes.Load(), sessions)
		}
	}
	t.Logf("goroutines: %d before the expiry, peak %d; DELETEs at once: %d; upstream connections: %d before, peak %d",
		base, peak, d.maxInflight.Load(), baseConns, d.maxConns.Load())
	if peak-base > bound {
		t.Errorf("the expiry took %d goroutines above the %d before it, more than %d", peak-base, base, bound)
	}
	if n := d.maxInflight.Load(); n > 8 {
		t.Errorf("%d DELETEs upstream at once, want at most 8", n)
	}
	if n := d.maxConns.Load(); n > baseConns+8+2 {
		t.Errorf("%d upstream connections at once, want at most %d", n, baseConns+8+2)
	}
	// Back to where it was once the work is done.
	testkit.Poll(5*time.Second, func() bool { return runtime.NumGoroutine() <= base+4 })
	if n := runtime.NumGoroutine(); n > base+4 {
		t.Errorf("%d goroutines after the expiry, %d before", n, base)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	noGatewayGoroutines(t)
}

// TestCloseEndsParkedCalls: a parked call's pump (a 2026-07-28 client was
// answered input_required, and never retries) holds its upstream call
// open until the upstream's timeout; Close ends it at once and leaves no
// goroutine of the gateway behind.
func TestCloseEndsParkedCalls(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	g, url := startGatewayG(t, []upstreamSpec{{name: "alpha", url: a.URL, timeout: time.Minute}})
	withCaps := func(r *http.Request) {
		r.Header.Set("Mcp-Name", "alpha__ask")
		b, _ := io.ReadAll(r.Body)
		b = []byte(strings.Replace(string(b), `clientCapabilities":{}`, `clientCapabilities":{"elicitation":{}}`, 1))
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(string(b))), int64(len(b))
	}
	for i := range 5 {
		resp, body := do(t, post2026(t, url, i, "tools/call", `"name":"alpha__ask"`, withCaps))
		if resp.StatusCode != 200 || !strings.Contains(body, "input_required") {
			t.Fatalf("call: %d %s", resp.StatusCode, body)
		}
	}
	pumps := 0
	for _, g := range gatewayGoroutines() {
		if strings.Contains(g, "pumpInput") {
			pumps++
		}
	}
	if pumps != 5 {
		t.Fatalf("%d pumps with 5 parked calls", pumps)
	}
	start := time.Now()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Close took %v", d)
	}
	noGatewayGoroutines(t)
}

// TestRunStopsItsConfigWatch: Run with a config file watches it; once Run
// returns, the watch (and everything else of the gateway) is gone.
func TestRunStopsItsConfigWatch(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := "auth:\n  anonymous: true\nupstreams:\n  - name: alpha\n    url: " + a.URL + "\n    watch: false\ntelemetry:\n  audit:\n    output: \"off\"\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.PublicURL = "http://" + ln.Addr().String() + "/mcp"
	cfg.Server.DrainDelay = new(config.Duration)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- gateway.Run(ctx, cfg, gateway.Options{Listener: ln, Logger: testLogger(t), Getenv: func(string) string { return "" }},
			func(addr string) { ready <- addr })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run not ready in 10s")
	}
	// The watch is a goroutine Run starts, which says nothing when it runs.
	watching := testkit.Poll(5*time.Second, func() bool {
		return slices.ContainsFunc(gatewayGoroutines(), func(g string) bool { return strings.Contains(g, "watchConfig") })
	})
	if !watching {
		t.Error("no config watch running")
	}
	initialize(t, cfg.Server.PublicURL)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return in 15s")
	}
	noGatewayGoroutines(t)
}
