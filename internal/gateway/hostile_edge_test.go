package gateway_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

// The hostile client at the HTTP edge: bodies, sessions, streams, batches
// and client capabilities, each pushed past its bound through the public
// surface, asserting the refusal and what the gateway holds.

// limitCount returns mcpgw_limit_rejections_total{limit} summed over
// tenants, scraped from the admin /metrics.
func limitCount(t *testing.T, g *gateway.Gateway, limit string) int {
	t.Helper()
	rec := httptest.NewRecorder()
	g.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	n := 0
	sc := bufio.NewScanner(rec.Body)
	sc.Buffer(nil, 1<<20)
	prefix := `mcpgw_limit_rejections_total{limit="` + limit + `"`
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, prefix) {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			n += int(v)
		}
	}
	return n
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// wantRPCError checks a JSON-RPC error answer: HTTP status, code, and a
// message containing text.
func wantRPCError(t *testing.T, what string, r *testkit.HostileResponse, status int, code int64, text string) {
	t.Helper()
	var m struct {
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if r.Status != status || json.Unmarshal(r.Body, &m) != nil || m.Error == nil || m.Error.Code != code || !strings.Contains(m.Error.Message, text) {
		t.Fatalf("%s: got %d %s, want %d, code %d, message with %q", what, r.Status, r.Body, status, code, text)
	}
}

// TestSlowBodiesAreCutAtReadBodyTimeout: 100 connections announce a body
// of almost 4 MiB and send a byte every 100ms. Each is answered 408 and
// closed at server.read_body_timeout, and while they wait the gateway
// holds no more than what they sent (not 100 × 4 MiB).
func TestSlowBodiesAreCutAtReadBodyTimeout(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	const timeout = 1500 * time.Millisecond
	g, url := startGatewayG(t, []upstreamSpec{spec(a)}, func(c *config.Config) {
		c.Server.ReadBodyTimeout = config.Duration(timeout)
	})
	hc := testkit.NewHostileClient(t, url)
	sid := initialize(t, url)
	const conns, announced = 100, 4<<20 - 1
	before := heapInUse()
	start := time.Now()
	var slow []*testkit.SlowConn
	for range conns {
		sc, err := hc.SlowBody(sid, announced, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		slow = append(slow, sc)
	}
	time.Sleep(timeout / 2)
	if grew := heapInUse() - before; grew > 32<<20 {
		t.Errorf("the heap grew by %d MiB for %d slow bodies (announced %d MiB each)", grew>>20, conns, announced>>20)
	}
	for i, sc := range slow {
		select {
		case <-sc.Done():
		case <-time.After(timeout + 5*time.Second):
			t.Fatalf("connection %d still open %s after it started", i, time.Since(start))
		}
		status, sent, err := sc.Result()
		if status != http.StatusRequestTimeout || err != io.EOF {
			t.Fatalf("connection %d: status %d, %v after %d bytes; want 408 and the server closing", i, status, err, sent)
		}
	}
	if d := time.Since(start); d < timeout {
		t.Errorf("cut after %s, before the %s deadline", d, timeout)
	}
	if n := limitCount(t, g, "read_body_timeout"); n != conns {
		t.Errorf("read_body_timeout rejections = %d, want %d", n, conns)
	}
	// The session is unharmed, and a body over max_body_bytes is refused
	// from its Content-Length, before it is read.
	postJSON(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	big, err := hc.SlowBody(sid, 4<<20+1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-big.Done():
	case <-time.After(timeout / 2):
		t.Fatal("an oversized body was not refused at once")
	}
	if status, _, _ := big.Result(); status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d, want 413", status)
	}
	if n := limitCount(t, g, "body_bytes"); n != 1 {
		t.Errorf("body_bytes rejections = %d, want 1", n)
	}
}

// TestReadBodyTimeoutSparesStreamedAnswers: the deadline covers the body
// only. A call whose streamed answer lasts longer than it, and a GET
// stream, go on.
func TestReadBodyTimeoutSparesStreamedAnswers(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	const timeout = 300 * time.Millisecond
	url := startGateway(t, []upstreamSpec{spec(a)}, func(c *config.Config) {
		c.Server.ReadBodyTimeout = config.Duration(timeout)
	})
	hc := testkit.NewHostileClient(t, url)
	sid := initialize(t, url)
	hc.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	ctx := t.Context()
	resp, err := hc.Do(ctx, http.MethodPost, sid, []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__gate","_meta":{"progressToken":"p"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	time.Sleep(3 * timeout)
	a.Release()
	b, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(b), "released") {
		t.Fatalf("a streamed answer outliving read_body_timeout: %v %s", err, b)
	}
}

// TestRefusedInitializeOpensNoUpstreamSession: with max_sessions 30, one
// principal's share is 3 (a tenth): its fourth and fifth initialize get
// 429 with Retry-After, and no upstream hears of them: the record is
// stored before any upstream is contacted.
func TestRefusedInitializeOpensNoUpstreamSession(t *testing.T) {
	a, b := testkit.NewUpstream(t, "alpha"), testkit.NewUpstream(t, "beta")
	var auditLog syncBuffer
	g, url := startGatewayWith(t, gateway.Options{Audit: audit.New(&auditLog)}, []upstreamSpec{spec(a), spec(b)}, func(c *config.Config) {
		c.Sessions.MaxSessions = 30
	})
	hc := testkit.NewHostileClient(t, url)
	ok := 0
	for i, r := range hc.Initializes(t.Context(), 5, 1) {
		if r.Status == http.StatusOK {
			ok++
			continue
		}
		wantRPCError(t, fmt.Sprint("initialize ", i), r, http.StatusTooManyRequests, -32600, "sessions_per_principal (3)")
		if r.Header.Get("Retry-After") == "" || r.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("refused initialize: Retry-After %q, Mcp-Session-Id %q", r.Header.Get("Retry-After"), r.Header.Get("Mcp-Session-Id"))
		}
	}
	if ok != 3 {
		t.Fatalf("%d initializes succeeded, want 3", ok)
	}
	for _, u := range []*testkit.Upstream{a, b} {
		if n := u.Count("initialize"); n != 3 {
			t.Errorf("%s got %d initializes for 3 sessions", u.Name, n)
		}
	}
	if n := limitCount(t, g, "sessions_per_principal"); n != 2 {
		t.Errorf("sessions_per_principal rejections = %d, want 2", n)
	}
	if n := strings.Count(auditLog.String(), `"reason":"sessions_per_principal"`); n != 2 {
		t.Errorf("%d audit records of sessions_per_principal, want 2:\n%s", n, auditLog.String())
	}
}

// TestSessionCapsPerPrincipal: one principal's initializes beyond
// sessions.max_per_principal get 429 with Retry-After, naming the limit,
// and contact no upstream; another principal of the tenant still gets in.
// In both stores.
func TestSessionCapsPerPrincipal(t *testing.T) {
	for _, store := range []string{config.StoreMemory, config.StoreRedis} {
		t.Run(store, func(t *testing.T) {
			a := testkit.NewUpstream(t, "alpha")
			lab := newLabIssuer(t)
			edits := []func(*config.Config){labAuth(lab), func(c *config.Config) { c.Sessions.MaxPerPrincipal = 2 }}
			if store == config.StoreRedis {
				edits = append(edits, redisStore(t))
			}
			g, url := startGatewayG(t, []upstreamSpec{spec(a)}, edits...)
			hc := testkit.NewHostileClient(t, url)
			hc.Token = labToken(t, lab, url, "mallory", "acme")
			rs := hc.Initializes(t.Context(), 4, 1)
			for _, r := range rs[2:] {
				wantRPCError(t, "initialize over the cap", r, http.StatusTooManyRequests, -32600, "sessions_per_principal (2)")
				if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
					t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
				}
			}
			if n := a.Count("initialize"); n != 2 {
				t.Errorf("the upstream got %d initializes for 2 sessions", n)
			}
			other := testkit.NewHostileClient(t, url)
			other.Token = labToken(t, lab, url, "alice", "acme")
			if r, err := other.Post(t.Context(), "", testkit.InitializeBody("2025-11-25", nil, nil)); err != nil || r.Status != http.StatusOK {
				t.Fatalf("another principal: %v %v", err, r)
			}
			if n := limitCount(t, g, "sessions_per_principal"); n != 2 {
				t.Errorf("sessions_per_principal rejections = %d, want 2", n)
			}
		})
	}
}

// labAuth trusts lab as the only issuer, with tenants acme and globex.
func labAuth(lab *labIssuer) func(*config.Config) {
	return func(c *config.Config) {
		c.Auth = config.Auth{Issuers: []config.Issuer{{Name: "lab", IssuerURL: lab.url, JWKSURL: lab.url + "/jwks", TenantClaim: "org.tenant"}}}
		c.Tenants = []config.Tenant{{ID: "acme"}, {ID: "globex"}}
	}
}

func labToken(t *testing.T, lab *labIssuer, aud, sub, tenant string) string {
	now := time.Now()
	return lab.sign(t, jwt.MapClaims{"iss": lab.url, "sub": sub, "aud": aud, "org": map[string]any{"tenant": tenant},
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
}

// TestClientParamsAreBounded: an initialize whose clientInfo or
// capabilities exceed their limits gets -32602 naming the limit and opens
// nothing; so does a 2026-07-28 request whose _meta client capabilities
// do.
func TestClientParamsAreBounded(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	g, url := startGatewayG(t, []upstreamSpec{spec(a)})
	hc := testkit.NewHostileClient(t, url)
	ctx := t.Context()
	big := func(n int) []byte { return []byte(`{"name":"` + strings.Repeat("x", n) + `"}`) }
	r, err := hc.Post(ctx, "", testkit.InitializeBody("2025-11-25", big(8<<10), nil))
	if err != nil {
		t.Fatal(err)
	}
	wantRPCError(t, "clientInfo", r, http.StatusOK, -32602, "limits.client_info_bytes (8192 bytes)")
	r, err = hc.Post(ctx, "", testkit.InitializeBody("2025-11-25", nil, []byte(`{"experimental":`+string(big(64<<10))+`}`)))
	if err != nil {
		t.Fatal(err)
	}
	wantRPCError(t, "capabilities", r, http.StatusOK, -32602, "limits.client_capabilities_bytes (65536 bytes)")
	if n := a.Count("initialize"); n != 0 {
		t.Errorf("refused initializes opened %d upstream sessions", n)
	}
	// Just within both: accepted.
	if r, _ := hc.Post(ctx, "", testkit.InitializeBody("2025-11-25", big(8<<10-20), nil)); r.Status != http.StatusOK {
		t.Errorf("clientInfo within the limit: %s", r)
	}

	st := testkit.NewHostileClient(t, url)
	st.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	st.Header.Set("Mcp-Method", "tools/list")
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"experimental":` + string(big(64<<10)) + `}}}}`
	r, err = st.Post(ctx, "", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	wantRPCError(t, "stateless _meta capabilities", r, http.StatusOK, -32602, "limits.client_capabilities_bytes")
	if n := limitCount(t, g, "client_capabilities_bytes"); n != 2 {
		t.Errorf("client_capabilities_bytes rejections = %d, want 2", n)
	}
	if n := limitCount(t, g, "client_info_bytes"); n != 1 {
		t.Errorf("client_info_bytes rejections = %d, want 1", n)
	}
}

// TestStreamCapsPerPrincipalAndTenant: GET streams and
// subscriptions/listen count together against limits.streams_per_principal
// and limits.streams_per_tenant; beyond them a stream gets 429 with
// Retry-After naming the limit, and a closed stream frees its place.
func TestStreamCapsPerPrincipalAndTenant(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	lab := newLabIssuer(t)
	var auditLog syncBuffer
	g, url := startGatewayWith(t, gateway.Options{Audit: audit.New(&auditLog)}, []upstreamSpec{spec(a)}, labAuth(lab), func(c *config.Config) {
		c.Limits.StreamsPerPrincipal = 2
		c.Limits.StreamsPerTenant = 3
	})
	ctx := t.Context()
	client := func(sub string) *testkit.HostileClient {
		hc := testkit.NewHostileClient(t, url)
		hc.Token = labToken(t, lab, url, sub, "acme")
		return hc
	}
	session := func(hc *testkit.HostileClient) string {
		r, err := hc.Post(ctx, "", testkit.InitializeBody("2025-11-25", nil, nil))
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("initialize: %v %v", err, r)
		}
		return r.Header.Get("Mcp-Session-Id")
	}
	var mu sync.Mutex
	var open []*http.Response
	t.Cleanup(func() {
		for _, r := range open {
			r.Body.Close()
		}
	})
	get := func(hc *testkit.HostileClient, sid string) *http.Response {
		resp, err := hc.Do(ctx, http.MethodGet, sid, nil)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		open = append(open, resp)
		mu.Unlock()
		return resp
	}
	refused := func(what string, resp *http.Response, limit string) {
		t.Helper()
		b, _ := io.ReadAll(resp.Body)
		wantRPCError(t, what, &testkit.HostileResponse{Status: resp.StatusCode, Body: b}, http.StatusTooManyRequests, -32600, limit)
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", what)
		}
	}

	mallory := client("mallory")
	s1, s2, s3 := session(mallory), session(mallory), session(mallory)
	if r := get(mallory, s1); r.StatusCode != 200 {
		t.Fatalf("first stream: %d", r.StatusCode)
	}
	// A 2026-07-28 listen stream counts too.
	listen := testkit.NewHostileClient(t, url)
	listen.Token = mallory.Token
	listen.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	listen.Header.Set("Mcp-Method", "subscriptions/listen")
	lr, err := listen.Do(ctx, http.MethodPost, "", []byte(`{"jsonrpc":"2.0","id":"l1","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true}}}`))
	if err != nil || lr.StatusCode != 200 {
		t.Fatalf("listen: %v %v", err, lr)
	}
	open = append(open, lr)
	refused("third stream of one principal", get(mallory, s2), "streams_per_principal (2)")
	// Replacing a session's stream is no new stream.
	if r := get(mallory, s1); r.StatusCode != 200 {
		t.Fatalf("replacing stream: %d", r.StatusCode)
	}
	alice := client("alice")
	if r := get(alice, session(alice)); r.StatusCode != 200 {
		t.Fatalf("alice's stream: %d", r.StatusCode)
	}
	bob := client("bob")
	refused("fourth stream of the tenant", get(bob, session(bob)), "streams_per_tenant (3)")
	globex := testkit.NewHostileClient(t, url)
	globex.Token = labToken(t, lab, url, "bob", "globex")
	if r := get(globex, session(globex)); r.StatusCode != 200 {
		t.Fatalf("another tenant's stream: %d", r.StatusCode)
	}
	// Closing the listen stream frees a place for mallory.
	lr.Body.Close()
	waitFor(t, func() bool {
		r := get(mallory, s3)
		if r.StatusCode == 200 {
			return true
		}
		r.Body.Close()
		return false
	})
	if n := limitCount(t, g, "streams_per_principal"); n < 1 {
		t.Errorf("streams_per_principal rejections = %d", n)
	}
	if n := limitCount(t, g, "streams_per_tenant"); n != 1 {
		t.Errorf("streams_per_tenant rejections = %d, want 1", n)
	}
	if !strings.Contains(auditLog.String(), `"reason":"streams_per_tenant"`) {
		t.Errorf("no audit record of streams_per_tenant:\n%s", auditLog.String())
	}
	if n := a.Count(""); n != 0 {
		t.Errorf("streams reached the upstream: %d requests", n)
	}
}

// batchSession opens a 2025-03-26 session, the only revision with batches.
func batchSession(t *testing.T, url string) string {
	t.Helper()
	resp, body := do(t, post(t, url, "", strings.Replace(initBody, "2025-11-25", "2025-03-26", 1)))
	if resp.StatusCode != 200 {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	return resp.Header.Get("Mcp-Session-Id")
}

// TestBatchAmplificationIsBounded: a batch of 80,000 tools/list is refused
// whole, at once, with nothing sent upstream; a batch within
// limits.batch_messages is answered, one JSON array.
func TestBatchAmplificationIsBounded(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	g, url := startGatewayG(t, []upstreamSpec{spec(a)})
	sid := batchSession(t, url)
	hc := testkit.NewHostileClient(t, url)
	hc.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	before := a.Count("tools/list")
	start := time.Now()
	r, err := hc.Post(t.Context(), sid, testkit.Batch(list, 80_000))
	if err != nil {
		t.Fatal(err)
	}
	wantRPCError(t, "80,000-message batch", r, http.StatusBadRequest, -32600, "exceeds limits.batch_messages (50)")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusing the batch took %s", d)
	}
	if n := a.Count("tools/list") - before; n != 0 {
		t.Errorf("a refused batch made %d upstream lists", n)
	}
	if n := limitCount(t, g, "batch_messages"); n != 1 {
		t.Errorf("batch_messages rejections = %d", n)
	}
	r, err = hc.Post(t.Context(), sid, testkit.Batch(list, 50))
	if err != nil {
		t.Fatal(err)
	}
	var answers []json.RawMessage
	if r.Status != 200 || json.Unmarshal(r.Body, &answers) != nil || len(answers) != 50 {
		t.Fatalf("a batch of 50: %d, %d answers", r.Status, len(answers))
	}
}

// TestBatchIsHeldToRequestTimeout: a batch of calls that each block is
// one request: it ends within server.request_timeout, not five times it,
// and every call in it is answered with the timeout.
func TestBatchIsHeldToRequestTimeout(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	const timeout = time.Second
	url := startGateway(t, []upstreamSpec{spec(a)}, func(c *config.Config) {
		c.Server.RequestTimeout = config.Duration(timeout)
	})
	sid := batchSession(t, url)
	hc := testkit.NewHostileClient(t, url)
	hc.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	var msgs []string
	for i := range 5 {
		msgs = append(msgs, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"alpha__block"}}`, i))
	}
	start := time.Now()
	r, err := hc.Post(t.Context(), sid, []byte("["+strings.Join(msgs, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > timeout+timeout/2 {
		t.Errorf("the batch took %s, request_timeout is %s", d, timeout)
	}
	var answers []struct {
		ID    int `json:"id"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if r.Status != 200 || json.Unmarshal(r.Body, &answers) != nil || len(answers) != 5 {
		t.Fatalf("answer: %s", r)
	}
	// The first call is cut by the deadline (an upstream error); the rest
	// are not served at all.
	for i, ans := range answers {
		if ans.ID != i || ans.Error == nil || i > 0 && ans.Error.Message != "Request timed out" {
			t.Errorf("answer %d: id %d, %+v", i, ans.ID, ans.Error)
		}
	}
}

// TestSlowBodyWithoutTokenIsCut: the body deadline starts before
// authentication. A request with no token is answered 401 at once, and
// the body it then trickles, which net/http reads to discard, cannot hold
// the connection past server.read_body_timeout.
func TestSlowBodyWithoutTokenIsCut(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	lab := newLabIssuer(t)
	const timeout = time.Second
	_, url := startGatewayG(t, []upstreamSpec{spec(a)}, labAuth(lab), func(c *config.Config) {
		c.Server.ReadBodyTimeout = config.Duration(timeout)
	})
	hc := testkit.NewHostileClient(t, url) // no token
	start := time.Now()
	sc, err := hc.SlowBody("", 64<<10, 50*time.Millisecond) // under the 256 KiB net/http discards
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sc.Done():
	case <-time.After(timeout + 5*time.Second):
		t.Fatalf("an unauthenticated slow body held its connection for %s", time.Since(start))
	}
	// The server closes with body bytes unread, which the client may see
	// as a reset rather than an EOF.
	if status, sent, err := sc.Result(); status != http.StatusUnauthorized || err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("status %d, %v after %d bytes; want 401 and the server closing", status, err, sent)
	}
}
