package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/testkit"
)

// slowUpstream is a Go SDK server with two tools: slow sends one progress
// notification per step, delay apart, then answers "done"; flood sends n
// progress notifications of size bytes each as fast as it can. Each call
// that ends early (cancelled) is counted.
type slowUpstream struct {
	url       string
	cancelled atomic.Int32
	finished  atomic.Int32
	notified  atomic.Int32 // progress notifications of slow sent
}

func startSlowUpstream(t *testing.T) *slowUpstream {
	t.Helper()
	u := &slowUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	type slowArgs struct {
		Steps   int `json:"steps"`
		DelayMS int `json:"delay_ms"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Sends a progress notification per step, slowly."},
		func(ctx context.Context, req *mcp.CallToolRequest, in slowArgs) (*mcp.CallToolResult, any, error) {
			for i := 1; i <= in.Steps; i++ {
				select {
				case <-time.After(time.Duration(in.DelayMS) * time.Millisecond):
				case <-ctx.Done():
					u.cancelled.Add(1)
					return nil, nil, ctx.Err()
				}
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("step %d", i),
				}); err != nil {
					u.cancelled.Add(1)
					return nil, nil, err
				}
				u.notified.Add(1)
			}
			u.finished.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	type floodArgs struct {
		N     int `json:"n"`
		Bytes int `json:"bytes"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "flood", Description: "Floods progress notifications."},
		func(ctx context.Context, req *mcp.CallToolRequest, in floodArgs) (*mcp.CallToolResult, any, error) {
			pad := strings.Repeat("f", in.Bytes)
			for i := 1; i <= in.N; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Message: pad,
				}); err != nil {
					return nil, nil, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "flooded"}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	u.url = srv.URL + "/mcp"
	return u
}

// sseEvent is one event of a raw SSE stream.
type sseEvent = testkit.SSEEvent

// readSSE returns the events of an SSE body as they arrive (testkit.ReadSSE).
var readSSE = testkit.ReadSSE

// next returns the next event of ch, failing the test after 10s.
func next(t *testing.T, ch <-chan sseEvent) (sseEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		return ev, ok
	case <-time.After(10 * time.Second):
		t.Fatal("no SSE event in 10s")
		return sseEvent{}, false
	}
}

// resumeGET sends a GET with Last-Event-ID.
func resumeGET(t *testing.T, ctx context.Context, url, sid, lastID string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// startCall posts a tools/call and returns its SSE events; cancel hangs
// up.
func startCall(t *testing.T, url, sid, body string) (<-chan sseEvent, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(post(t, url, sid, body).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("call: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return readSSE(resp.Body), cancel
}

const slowCall = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow__slow","arguments":{"steps":8,"delay_ms":150},"_meta":{"progressToken":"p"}}}`

// TestResumePOSTStreamOnAnotherReplica: a client whose connection to a
// long call's stream drops mid-way resumes it with Last-Event-ID on
// another replica (Redis store, the load balancer without affinity), and
// gets every remaining event and the result, none twice, while the call
// goes on on the first replica.
func TestResumePOSTStreamOnAnotherReplica(t *testing.T) {
	up := startSlowUpstream(t)
	store := redisStore(t)
	one := startGateway(t, []upstreamSpec{{name: "slow", url: up.url}}, store)
	two := startGateway(t, []upstreamSpec{{name: "slow", url: up.url}}, store)
	lb := testkit.StartLB(t, []string{strings.TrimSuffix(one, "/mcp"), strings.TrimSuffix(two, "/mcp")})

	// The Go SDK client, through the load balancer, whose connection to
	// the call's stream breaks after the third progress notification.
	cut := &cutTransport{after: 3}
	progressed := make(chan float64, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "resumer", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progressed <- req.Params.Progress
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: lb.URL + "/mcp", HTTPClient: &http.Client{Transport: cut}, MaxRetries: 5,
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cut.onCut = func() {
		// Whichever replica serves the call, the resume goes to the
		// other one.
		log := lb.Log()
		for i := len(log) - 1; i >= 0; i-- {
			if log[i].RPCMethod == "tools/call" {
				lb.Remove(log[i].Backend)
				break
			}
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow__slow", Arguments: map[string]any{"steps": 8, "delay_ms": 150}, Meta: mcp.Meta{"progressToken": "p"}})
	if err != nil {
		t.Fatalf("the resumed call failed: %v\nLB log: %+v", err, lb.Log())
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "done" {
		t.Fatalf("result %q", got)
	}
	if !cut.done.Load() {
		t.Fatal("the stream was never cut")
	}
	// The SDK hands notifications to their handler apart from the result:
	// the eight may come after it, and a duplicate after them, with
	// nothing to say that none is coming. quiet bounds the wait for one.
	const quiet = 100 * time.Millisecond
	var progress []float64
	timeout := time.After(5 * time.Second)
	for waiting := true; waiting; {
		var quieted <-chan time.Time // never, before the eighth
		if len(progress) >= 8 {
			quieted = time.After(quiet)
		}
		select {
		case p := <-progressed:
			progress = append(progress, p)
		case <-quieted:
			waiting = false
		case <-timeout:
			waiting = false
		}
	}
	if want := []float64{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(progress, want) {
		t.Errorf("progress %v, want %v: each once, in order", progress, want)
	}
	var callBackend, resumeBackend = -1, -1
	for _, e := range lb.Log() {
		switch {
		case e.RPCMethod == "tools/call":
			callBackend = e.Backend
		case e.Method == http.MethodGet && callBackend >= 0 && e.Backend != callBackend && e.Status == 200:
			resumeBackend = e.Backend
		}
	}
	if resumeBackend < 0 {
		t.Errorf("no GET on the other replica resumed the call: %+v", lb.Log())
	}
	if up.cancelled.Load() != 0 || up.finished.Load() != 1 {
		t.Errorf("upstream: %d cancelled, %d finished; the hang-up must not cancel the call", up.cancelled.Load(), up.finished.Load())
	}
}

// cutTransport breaks the first tools/call stream after `after` progress
// notifications, as a load balancer's idle timeout or a network change
// would.
type cutTransport struct {
	after int
	onCut func()
	done  atomic.Bool
	once  sync.Once
}

func (c *cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var isCall bool
	if req.Method == http.MethodPost && req.GetBody != nil {
		b, _ := req.GetBody()
		body, _ := io.ReadAll(b)
		isCall = strings.Contains(string(body), `"tools/call"`)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !isCall || c.done.Load() {
		return resp, err
	}
	cut := false
	c.once.Do(func() { cut = true })
	if cut {
		resp.Body = &cutBody{rc: resp.Body, c: c}
	}
	return resp, nil
}

type cutBody struct {
	rc   io.ReadCloser
	c    *cutTransport
	seen int
	buf  []byte
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.c.done.Load() {
		return 0, errors.New("connection reset (cut by the test)")
	}
	n, err := b.rc.Read(p)
	b.buf = append(b.buf, p[:n]...)
	// Pass on whole events only, and stop after the after-th progress.
	for {
		i := strings.Index(string(b.buf), "\n\n")
		if i < 0 {
			break
		}
		if strings.Contains(string(b.buf[:i]), "notifications/progress") {
			b.seen++
		}
		b.buf = b.buf[i+2:]
		if b.seen == b.c.after {
			b.c.done.Store(true)
			b.rc.Close()
			if b.c.onCut != nil {
				b.c.onCut()
			}
			return n - len(b.buf), nil
		}
	}
	return n, err
}

func (b *cutBody) Close() error { return b.rc.Close() }

// TestResumeRawPOSTStream: with raw HTTP, on the memory store, a call's
// stream is cut after two progress events; a GET with the last id
// replays the events that followed, then the rest as they come, then the
// response, and closes; every event has an id naming the call's stream.
func TestResumeRawPOSTStream(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		up := startSlowUpstream(t)
		url := startGateway(t, []upstreamSpec{{name: "slow", url: up.url}})
		testResumeRawPOSTStream(t, up, url, url)
	})
	t.Run("redis, another replica", func(t *testing.T) {
		up := startSlowUpstream(t)
		store := redisStore(t)
		one := startGateway(t, []upstreamSpec{{name: "slow", url: up.url}}, store)
		two := startGateway(t, []upstreamSpec{{name: "slow", url: up.url}}, store)
		testResumeRawPOSTStream(t, up, one, two)
	})
}

func testResumeRawPOSTStream(t *testing.T, up *slowUpstream, url, other string) {
	sid := initialize(t, url)
	events, hangUp := startCall(t, url, sid, slowCall)
	prime, _ := next(t, events)
	if prime.ID == "" || prime.Data != "" || !strings.HasPrefix(prime.ID, "p") {
		t.Fatalf("first event %+v, want a priming event: an id and no data", prime)
	}
	stream, _, _ := strings.Cut(prime.ID, ".")
	var last string
	for range 2 {
		ev, _ := next(t, events)
		if !strings.HasPrefix(ev.ID, stream+".") || !strings.Contains(ev.Data, "notifications/progress") {
			t.Fatalf("event %+v", ev)
		}
		last = ev.ID
	}
	hangUp()
	// Two more steps sent by the upstream once no client listens: the
	// resume replays what the log kept of them.
	sent := up.notified.Load()
	testkit.Eventually(t, 5*time.Second, func() bool { return up.notified.Load() >= sent+2 }, "the upstream did not go on after the hang-up")
	resp := resumeGET(t, context.Background(), other, sid, last)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("resume: %d %s", resp.StatusCode, b)
	}
	var got []string
	for ev := range readSSE(resp.Body) {
		if !strings.HasPrefix(ev.ID, stream+".") {
			t.Errorf("resumed event %+v has no id of the stream %s", ev, stream)
		}
		got = append(got, ev.Data)
	}
	if len(got) != 7 || !strings.Contains(got[6], `"result"`) || !strings.Contains(got[6], `"done"`) {
		t.Fatalf("resumed stream: %d events %q, want progress 3 to 8 and the result", len(got), got)
	}
	for i, d := range got[:6] {
		if !strings.Contains(d, fmt.Sprintf(`"progress":%d`, i+3)) {
			t.Errorf("resumed event %d: %s", i, d)
		}
	}
	if up.cancelled.Load() != 0 {
		t.Error("the hang-up cancelled the call")
	}
	// Resuming again after the response replays nothing more than that.
	resp = resumeGET(t, context.Background(), url, sid, last)
	n := 0
	for range readSSE(resp.Body) {
		n++
	}
	if n != 7 {
		t.Errorf("a second resume replayed %d events, want 7", n)
	}
}

// TestResumeErrors: an id of another session, an unknown one and an
// expired one get one same answer; one whose events were dropped to keep
// the log's bound gets a clear answer of its own; 2026-07-28 requests are
// not resumable and streams carry no ids.
func TestResumeErrors(t *testing.T) {
	up := startSlowUpstream(t)
	url := startGateway(t, []upstreamSpec{{name: "slow", url: up.url}}, func(c *config.Config) {
		c.Sessions.Events.PerStream = 5
		c.Sessions.Events.TTL = config.Duration(time.Second)
	})
	sid, other := initialize(t, url), initialize(t, url)
	events, _ := startCall(t, url, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow__slow","arguments":{"steps":8,"delay_ms":1},"_meta":{"progressToken":"p"}}}`)
	var ids []string
	for ev := range events {
		ids = append(ids, ev.ID)
	}
	if len(ids) != 10 {
		t.Fatalf("%d events, want the priming one, 8 progress and the result", len(ids))
	}
	answer := func(sid, id string) (int, string) {
		resp := resumeGET(t, context.Background(), url, sid, id)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	unknownStatus, unknown := answer(sid, "p0123456789abcdef.1")
	if unknownStatus != http.StatusBadRequest || !strings.Contains(unknown, `"code":-32600`) {
		t.Fatalf("unknown id: %d %s", unknownStatus, unknown)
	}
	for _, tc := range []struct{ name, sid, id string }{
		{"another session's id", other, ids[8]},
		{"malformed", sid, "x"},
		{"not the gateway's", sid, "z" + ids[8][1:]},
	} {
		if st, b := answer(tc.sid, tc.id); st != unknownStatus || b != unknown {
			t.Errorf("%s: %d %s, want %d %s", tc.name, st, b, unknownStatus, unknown)
		}
	}
	st, gone := answer(sid, ids[2])
	if st != http.StatusBadRequest || !strings.Contains(gone, "no longer kept") || gone == unknown {
		t.Errorf("past the bound: %d %s", st, gone)
	}
	if st, b := answer(sid, ids[8]); st != 200 || !strings.Contains(b, `"done"`) {
		t.Errorf("within the bound: %d %s", st, b)
	}
	// The log's TTL (1s) runs on the real clock: its end has no event.
	var st2 int
	var b2 string
	if !testkit.Poll(1500*time.Millisecond, func() bool { st2, b2 = answer(sid, ids[8]); return st2 == unknownStatus && b2 == unknown }) {
		t.Errorf("expired: %d %s, want %d %s", st2, b2, unknownStatus, unknown)
	}
}

// TestResumeGETStream: a session's GET stream carries ids; resumed with
// Last-Event-ID on another replica (Redis), it goes on as the session's
// GET stream there, under the same stream's ids, and a later resume on
// the first replica replays what the second sent after the client's last
// event.
func TestResumeGETStream(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	store := redisStore(t)
	_, one := startGatewayG(t, []upstreamSpec{spec(a)}, store)
	g2, two := startGatewayG(t, []upstreamSpec{spec(a)}, store)
	sid := initialize(t, one)

	ctx, cancel := context.WithCancel(context.Background())
	resp := resumeGET(t, ctx, one, sid, "")
	events := readSSE(resp.Body)
	prime, _ := next(t, events)
	if !strings.HasPrefix(prime.ID, "g") || prime.Data != "" {
		t.Fatalf("first event of a GET stream: %+v", prime)
	}
	stream, _, _ := strings.Cut(prime.ID, ".")
	cancel()

	// Resumed on replica two, from the priming event.
	ctx2, cancel2 := context.WithCancel(context.Background())
	resp = resumeGET(t, ctx2, two, sid, prime.ID)
	if resp.StatusCode != 200 {
		t.Fatalf("resume on replica two: %d", resp.StatusCode)
	}
	events = readSSE(resp.Body)
	next2 := *g2.Config()
	next2.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{Name: "alpha", Tools: config.Rules{Allow: []string{"echo"}}}}}}
	if err := next2.Validate(); err != nil {
		t.Fatal(err)
	}
	// The 200 came after the stream was registered (it is before its
	// headers are written): the reload's list_changed reaches it.
	if err := g2.Reload(&next2); err != nil {
		t.Fatal(err)
	}
	var got []sseEvent
	for len(got) < 3 {
		ev, ok := next(t, events)
		if !ok {
			t.Fatal("the resumed GET stream ended")
		}
		if !strings.HasPrefix(ev.ID, stream+".") || !strings.Contains(ev.Data, "list_changed") {
			t.Fatalf("event on the resumed GET stream: %+v", ev)
		}
		got = append(got, ev)
	}
	cancel2()

	// The client saw only the first; it resumes on replica one.
	resp = resumeGET(t, context.Background(), one, sid, got[0].ID)
	if resp.StatusCode != 200 {
		t.Fatalf("resume on replica one: %d", resp.StatusCode)
	}
	events = readSSE(resp.Body)
	for _, want := range got[1:] {
		ev, _ := next(t, events)
		if ev != want {
			t.Errorf("replayed %+v, want %+v", ev, want)
		}
	}
	resp.Body.Close()
}

// TestHangUpBound: a client that hangs up from resumable streams leaves
// its calls running only up to limits.detached_calls_per_principal;
// beyond it, a hang-up cancels the call, as notifications/cancelled
// always does.
func TestHangUpBound(t *testing.T) {
	up := startSlowUpstream(t)
	g, url := startGatewayG(t, []upstreamSpec{{name: "slow", url: up.url}}, func(c *config.Config) {
		c.Limits.DetachedCallsPerPrincipal = 2
	})
	sid := initialize(t, url)
	long := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow__slow","arguments":{"steps":40,"delay_ms":100},"_meta":{"progressToken":"p%d"}}}`, id, id)
	}
	for i := 1; i <= 3; i++ {
		events, hangUp := startCall(t, url, sid, long(i))
		next(t, events) // the priming event
		next(t, events) // a progress notification
		hangUp()
	}
	// Each hang-up is judged once: two calls held detached, one
	// cancelled. Once all three are, nothing else cancels a call.
	waitFor(t, func() bool {
		return up.cancelled.Load() >= 1 && metricValue(scrape(t, g), "mcpgw_detached_calls") == 2
	})
	if n := up.cancelled.Load(); n != 1 {
		t.Fatalf("%d calls cancelled, want 1: the third, over the bound of 2", n)
	}
	// notifications/cancelled still cancels a detached call.
	resp, _ := do(t, post(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d", resp.StatusCode)
	}
	waitFor(t, func() bool { return up.cancelled.Load() == 2 })
	// The bound is freed as calls end: the other one finishes (4s), then
	// a new hang-up leaves its call running again.
	waitFor(t, func() bool { return up.finished.Load() == 1 })
}

// TestEventLogFlood: an upstream flooding a call with notifications
// leaves at most the log's bounds in the memory store, and in Redis.
func TestEventLogFlood(t *testing.T) {
	up := startSlowUpstream(t)
	bounds := func(c *config.Config) {
		c.Sessions.Events.PerStream = 200
		c.Sessions.Events.BytesPerStream = 64 << 10
	}
	flood := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow__flood","arguments":{"n":3000,"bytes":1000},"_meta":{"progressToken":"p"}}}`
	t.Run("memory", func(t *testing.T) {
		g, url := startGatewayG(t, []upstreamSpec{{name: "slow", url: up.url}}, bounds)
		sid := initialize(t, url)
		events, _ := startCall(t, url, sid, flood)
		n := 0
		for range events {
			n++
		}
		if n != 3002 {
			t.Fatalf("%d events relayed, want 3002", n)
		}
		log := gateway.EventLogOf(g).(*session.MemoryEvents)
		if b := log.Bytes(); b > 64<<10 {
			t.Fatalf("the memory log holds %d bytes after a flood; bound 64 KiB", b)
		}
	})
	t.Run("redis", func(t *testing.T) {
		store := redisStore(t)
		_, url := startGatewayG(t, []upstreamSpec{{name: "slow", url: up.url}}, store, bounds)
		sid := initialize(t, url)
		events, _ := startCall(t, url, sid, flood)
		var stream string
		for ev := range events {
			if stream == "" {
				stream, _, _ = strings.Cut(ev.ID, ".")
			}
		}
		cfg := &config.Config{}
		store(cfg)
		rdb := redis.NewClient(&redis.Options{Addr: cfg.Sessions.Redis.Addrs[0]})
		defer rdb.Close()
		key := cfg.Sessions.Redis.KeyPrefix + "session:{" + sid + "}:ev:" + stream
		if n := rdb.XLen(context.Background(), key).Val(); n == 0 || n > 66 {
			t.Fatalf("XLEN %s = %d, want 1 to 66 (64 KiB of 1 KB events)", key, n)
		}
		if used := rdb.MemoryUsage(context.Background(), key).Val(); used > 256<<10 {
			t.Fatalf("MEMORY USAGE %s = %d", key, used)
		}
	})
}

// TestDrainMovesStreamsLosingNothing: a replica that drains ends its GET
// stream and the stream resuming a call each with a retry field; resumed
// with their last ids on another replica, they lose nothing: the call's
// events go on, each once, up to its result.
func TestDrainMovesStreamsLosingNothing(t *testing.T) {
	up := startSlowUpstream(t)
	store := redisStore(t)
	g1, one := startGatewayG(t, []upstreamSpec{{name: "slow", url: up.url}}, store)
	two := startGateway(t, []upstreamSpec{{name: "slow", url: up.url}}, store)
	sid := initialize(t, one)

	get := readSSE(resumeGET(t, context.Background(), one, sid, "").Body)
	getPrime, _ := next(t, get)

	// A call on replica two, cut after its first progress event, is
	// resumed on replica one.
	events, hangUp := startCall(t, two, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow__slow","arguments":{"steps":8,"delay_ms":200},"_meta":{"progressToken":"p"}}}`)
	next(t, events) // priming
	first, _ := next(t, events)
	hangUp()
	seen := []string{first.Data}
	resp := resumeGET(t, context.Background(), one, sid, first.ID)
	if resp.StatusCode != 200 {
		t.Fatalf("resume on replica one: %d", resp.StatusCode)
	}
	followed := readSSE(resp.Body)
	last := first.ID
	for range 2 {
		ev, _ := next(t, followed)
		seen = append(seen, ev.Data)
		last = ev.ID
	}

	gateway.DrainStreams(g1)
	for _, s := range []struct {
		name string
		ch   <-chan sseEvent
	}{{"GET stream", get}, {"resumed call", followed}} {
		var retry string
		for ev := range s.ch {
			if ev.Retry != "" {
				retry = ev.Retry
				continue
			}
			if s.name == "resumed call" {
				seen = append(seen, ev.Data)
				last = ev.ID
			}
		}
		if retry != "1000" {
			t.Errorf("%s: ended by the drain without retry: 1000 (got %q)", s.name, retry)
		}
	}

	// Both resume on replica two.
	resp = resumeGET(t, context.Background(), two, sid, last)
	if resp.StatusCode != 200 {
		t.Fatalf("resume of the call on replica two: %d", resp.StatusCode)
	}
	for ev := range readSSE(resp.Body) {
		seen = append(seen, ev.Data)
	}
	if len(seen) != 9 || !strings.Contains(seen[8], `"done"`) {
		t.Fatalf("the call's events across the drain: %d %q, want 8 progress and the result", len(seen), seen)
	}
	for i, d := range seen[:8] {
		if !strings.Contains(d, fmt.Sprintf(`"progress":%d`, i+1)) {
			t.Errorf("event %d: %s, want progress %d: each once, in order", i, d, i+1)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp = resumeGET(t, ctx, two, sid, getPrime.ID)
	if resp.StatusCode != 200 {
		t.Fatalf("resume of the GET stream on replica two: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

// TestResumeStreamsBounded: streams that resume a call count with the
// principal's GET streams against limits.streams_per_principal, so that
// a client cannot hold unbounded followers.
func TestResumeStreamsBounded(t *testing.T) {
	up := startSlowUpstream(t)
	url := startGateway(t, []upstreamSpec{{name: "slow", url: up.url}}, func(c *config.Config) {
		c.Limits.StreamsPerPrincipal = 1
	})
	sid := initialize(t, url)
	events, hangUp := startCall(t, url, sid, slowCall)
	prime, _ := next(t, events)
	hangUp()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := resumeGET(t, ctx, url, sid, prime.ID)
	if first.StatusCode != 200 {
		t.Fatalf("first resume: %d", first.StatusCode)
	}
	defer first.Body.Close()
	resp := resumeGET(t, ctx, url, sid, "")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "streams_per_principal") {
		t.Fatalf("a GET stream beside a resumed call over the limit of 1: %d %s", resp.StatusCode, b)
	}
}
