package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/testkit"
)

// TestOneSessionEveryReplica drives one go-sdk client session through the
// load balancer, so that each of its requests lands on another replica:
// initialize, lists across both upstreams, calls on both, a progress
// stream, and DELETE, which every replica then honours.
func TestOneSessionEveryReplica(t *testing.T) {
	c := startCluster(t)
	type step struct {
		progress float64
		message  string
	}
	var (
		mu    sync.Mutex
		steps []step
	)
	cs := c.connect(t, &testkit.ConnectOptions{
		ProgressHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if req.Params.ProgressToken == "p1" {
				steps = append(steps, step{req.Params.Progress, req.Params.Message})
			}
		},
	})
	sid := cs.ID()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	var want []string
	for _, up := range []string{"alpha", "beta"} {
		for _, tool := range testkit.UpstreamTools {
			want = append(want, up+"__"+tool)
		}
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}

	// Calls on both upstreams, enough of them to go round the replicas
	// twice.
	for i := range 6 {
		up := []string{"alpha", "beta"}[i%2]
		mustEcho(t, cs, up, fmt.Sprint("hello-", i))
	}

	// A progress stream, relayed event by event through a replica and the
	// LB.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name: "alpha__progress", Arguments: map[string]any{"steps": 4}, Meta: mcp.Meta{"progressToken": "p1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "done" {
		t.Errorf("alpha__progress = %+v", res.Content[0])
	}
	wantSteps := []step{{1, "step 1"}, {2, "step 2"}, {3, "step 3"}, {4, "step 4"}}
	// The SDK may run the handler just after the call returns.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(steps)
		mu.Unlock()
		if len(got) >= len(wantSteps) || time.Now().After(deadline) {
			if diff := cmp.Diff(wantSteps, got, cmp.AllowUnexported(step{})); diff != "" {
				t.Errorf("progress mismatch (-want +got):\n%s", diff)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := cs.ListPrompts(ctx, nil); err != nil {
		t.Errorf("prompts/list: %v", err)
	}

	if err := cs.Close(); err != nil {
		t.Fatalf("closing the session (DELETE): %v", err)
	}

	// Every request of the session went through the LB, each to another
	// replica than the one before, and none failed.
	log := c.lb.Log()
	for i, e := range log {
		if e.Err != "" || e.Status >= 500 || e.Status == 0 && !e.ClientGone {
			t.Errorf("request %d %+v failed", i, e)
		}
		if i > 0 && e.SessionID != sid {
			t.Errorf("request %d %+v did not carry the session id", i, e)
		}
		if i > 0 && e.Backend == log[i-1].Backend {
			t.Errorf("requests %d and %d both went to replica %d", i-1, i, e.Backend)
		}
	}
	for i, n := range c.lb.Requests() {
		if n < 4 {
			t.Errorf("replica %d served %d requests, want at least 4 (counts %v)", i, n, c.lb.Requests())
		}
	}
	seen := map[int]bool{}
	for _, e := range callsSince(c.lb, 0) {
		seen[e.Backend] = true
	}
	if len(seen) != replicas {
		t.Errorf("tools/call requests reached replicas %v, want all %d", seen, replicas)
	}
	if last := log[len(log)-1]; last.Method != http.MethodDelete || last.Status != http.StatusNoContent || last.SessionID != sid {
		t.Errorf("last request = %+v, want the session's DELETE answered 204", last)
	}

	// The DELETE, served by one replica, ended the session for all.
	token := c.token(t, "acme-app")
	for i, p := range c.replicas {
		r := send(t, http.MethodPost, p.Endpoint, token, sid, `{"jsonrpc":"2.0","id":9,"method":"ping"}`)
		if r.status != http.StatusNotFound {
			t.Errorf("replica %d after DELETE: %d %s, want 404", i, r.status, r.body)
		}
	}
	if keys := c.sessionKeys(t); len(keys) != 0 {
		t.Errorf("session keys left in Redis after DELETE: %v", keys)
	}
}

// TestReplicaKilledMidRun kills one replica (SIGKILL) while a call is in
// flight on each replica: only the call on the killed one fails, and the
// session goes on on the others.
func TestReplicaKilledMidRun(t *testing.T) {
	c := startCluster(t)
	waiting := make(chan string, 10)
	cs := c.connect(t, &testkit.ConnectOptions{
		ProgressHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if req.Params.Message == "waiting" {
				waiting <- fmt.Sprint(req.Params.ProgressToken)
			}
		},
	})
	// Every replica serves both upstreams once, so that the calls below
	// need no catalog fetch (see TestConcurrentCallsAcrossReplicas).
	for _, up := range []string{"alpha", "beta"} {
		for i := range replicas {
			mustEcho(t, cs, up, fmt.Sprint("before-", i))
		}
	}

	// One gate call in flight on each replica.
	from := len(c.lb.Log())
	type outcome struct {
		token string
		text  string
		err   error
	}
	results := make(chan outcome, replicas)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range replicas {
		token := fmt.Sprint("gate-", i)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__gate", Meta: mcp.Meta{"progressToken": token}})
			o := outcome{token: token, err: err}
			if err == nil && len(res.Content) > 0 {
				if tc, ok := res.Content[0].(*mcp.TextContent); ok {
					o.text = tc.Text
				}
			}
			results <- o
		}()
	}
	for range replicas {
		select {
		case <-waiting:
		case o := <-results:
			t.Fatalf("gate call %s returned before Release: %q %v; LB log: %+v", o.token, o.text, o.err, c.lb.Log()[from:])
		case <-time.After(10 * time.Second):
			t.Fatalf("gate calls did not all start; LB log: %+v", c.lb.Log()[from:])
		}
	}
	inFlight := map[int]int{}
	for _, e := range callsSince(c.lb, from) {
		if e.Done {
			t.Fatalf("a gate call ended before Release: %+v", e)
		}
		inFlight[e.Backend]++
	}
	if diff := cmp.Diff(map[int]int{0: 1, 1: 1, 2: 1}, inFlight); diff != "" {
		t.Fatalf("gate calls per replica mismatch (-want +got):\n%s", diff)
	}

	const victim = 1
	before := c.lb.Requests()[victim]
	c.kill(t, victim)
	c.alpha.Release()

	var failed, released int
	for range replicas {
		select {
		case o := <-results:
			switch {
			case o.err != nil:
				failed++
				t.Logf("%s failed, as a call in flight on the killed replica may: %v", o.token, o.err)
			case o.text == "released":
				released++
			default:
				t.Errorf("%s = %q", o.token, o.text)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("gate calls did not return after Release")
		}
	}
	// The call on the killed replica cannot succeed: its answer died with
	// the process. Every other one must.
	if failed != 1 || released != replicas-1 {
		t.Errorf("%d gate calls failed, %d released: want only the one on the killed replica to fail", failed, released)
	}
	for _, e := range callsSince(c.lb, from)[:replicas] {
		switch {
		case e.Backend == victim && !strings.Contains(e.Err, "broke off"):
			t.Errorf("the call on the killed replica did not break off mid-response: %+v", e)
		case e.Backend != victim && e.Err != "":
			t.Errorf("a call on surviving replica %d failed: %+v", e.Backend, e)
		}
	}

	// The session goes on, on the survivors, across both upstreams.
	mark := len(c.lb.Log())
	for i := range 6 {
		mustEcho(t, cs, []string{"alpha", "beta"}[i%2], fmt.Sprint("after-", i))
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Errorf("tools/list after the kill: %v", err)
	}
	if n := c.lb.Requests()[victim]; n != before {
		t.Errorf("the LB sent %d requests to the removed replica", n-before)
	}
	seen := map[int]bool{}
	for _, e := range c.lb.Log()[mark:] {
		seen[e.Backend] = true
		if e.Err != "" || e.Status >= 400 {
			t.Errorf("request after the kill failed: %+v", e)
		}
	}
	if !seen[0] || !seen[2] || len(seen) != 2 {
		t.Errorf("requests after the kill went to replicas %v, want 0 and 2", seen)
	}
	c.assertAlive(t)
}

// TestRedisDownAndBack stops the shared Redis under live replicas: requests
// that need session state get fast, clean 503s and /readyz turns 503; when
// Redis returns (empty), service resumes without restarting anything.
func TestRedisDownAndBack(t *testing.T) {
	c := startCluster(t)
	cs := c.connect(t, nil)
	mustEcho(t, cs, "alpha", "up")
	sid := cs.ID()
	token := c.token(t, "acme-app")
	c.waitReadyz(t, http.StatusOK, 5*time.Second)

	goroutinesBefore := make([]int, len(c.replicas))
	for i, p := range c.replicas {
		goroutinesBefore[i] = goroutines(t, p)
	}
	c.redis.Stop()
	alphaBefore := len(c.alpha.Requests())

	for i, p := range c.replicas {
		for _, tc := range []struct {
			name string
			sid  string
			body string
		}{
			{name: "tools/call", sid: sid, body: echoCall(2, "alpha__echo", "down")},
			{name: "ping", sid: sid, body: `{"jsonrpc":"2.0","id":3,"method":"ping"}`},
			{name: "initialize", body: initBody},
		} {
			r := send(t, http.MethodPost, p.Endpoint, token, tc.sid, tc.body)
			if r.status != http.StatusServiceUnavailable {
				t.Errorf("replica %d, %s with Redis down: %d %s, want 503", i, tc.name, r.status, r.body)
				continue
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("replica %d, %s: Content-Type %q", i, tc.name, ct)
			}
			if code, msg := rpcError(t, r.body); code != -32603 || !strings.Contains(msg, "session store") {
				t.Errorf("replica %d, %s: error %d %q", i, tc.name, code, msg)
			}
			if id := r.header.Get("Mcp-Session-Id"); id != "" {
				t.Errorf("replica %d, %s handed out session id %q it could not store", i, tc.name, id)
			}
			if r.took > 2*time.Second {
				t.Errorf("replica %d, %s took %v to fail", i, tc.name, r.took)
			}
		}
		r := send(t, http.MethodDelete, p.Endpoint, token, sid, "")
		if r.status != http.StatusServiceUnavailable {
			t.Errorf("replica %d, DELETE with Redis down: %d %s, want 503", i, r.status, r.body)
		}
	}
	// Through the LB, the client session sees a transient failure.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := callText(ctx, cs, "alpha__echo", map[string]any{"text": "down"}); err == nil {
		t.Error("a call through the LB succeeded with Redis down")
	}
	// A failed initialize contacted no upstream (the record is stored
	// before upstream sessions are opened), and no session-state request
	// reached an upstream.
	var inits, deletes int
	for _, r := range c.alpha.Requests()[alphaBefore:] {
		switch {
		case r.RPCMethod == "initialize":
			inits++
		case r.Method == http.MethodDelete:
			deletes++
		case r.RPCMethod == "tools/call":
			t.Errorf("a tools/call reached the upstream with Redis down")
		}
	}
	if inits != 0 || deletes != 0 {
		t.Errorf("with Redis down, alpha saw %d initialize and %d DELETE requests, want none", inits, deletes)
	}
	for i, p := range c.replicas {
		start := time.Now()
		if got := readyz(t, p); got != http.StatusServiceUnavailable {
			t.Errorf("replica %d /readyz with Redis down: %d, want 503", i, got)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("replica %d /readyz took %v", i, d)
		}
	}
	c.assertAlive(t)

	// Redis returns, empty: the gateways reconnect by themselves.
	c.redis.Start()
	c.waitReadyz(t, http.StatusOK, 10*time.Second)
	for i, p := range c.replicas {
		r := send(t, http.MethodPost, p.Endpoint, token, sid, `{"jsonrpc":"2.0","id":4,"method":"ping"}`)
		if r.status != http.StatusNotFound {
			t.Errorf("replica %d, the session from before the restart: %d %s, want 404 (Redis came back empty)", i, r.status, r.body)
		}
	}
	cs2 := c.connect(t, nil)
	for i := range 2 * replicas {
		mustEcho(t, cs2, []string{"alpha", "beta"}[i%2], fmt.Sprint("back-", i))
	}
	if err := cs2.Close(); err != nil {
		t.Errorf("closing the new session: %v", err)
	}
	c.assertAlive(t)
	// No goroutine leaked through the outage: each replica settles back to
	// about where it was (connections come and go, so allow some slack).
	for i, p := range c.replicas {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := goroutines(t, p)
			if n <= goroutinesBefore[i]+10 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("replica %d: %d goroutines after the outage, %d before", i, n, goroutinesBefore[i])
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// goroutines reads go_goroutines from a replica's /metrics.
func goroutines(t *testing.T, p *testkit.Process) int {
	t.Helper()
	resp, err := http.Get("http://" + p.AdminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err == nil {
				return n
			}
		}
	}
	t.Fatalf("no go_goroutines in /metrics of %s", p.AdminAddr)
	return 0
}

// TestSessionBindingAcrossReplicas presents a session opened on one replica
// to another: with another subject's token it does not exist, with the
// owner's it works.
func TestSessionBindingAcrossReplicas(t *testing.T) {
	c := startCluster(t)
	owner := c.token(t, "acme-app")
	other := c.token(t, "acme-other") // same tenant, another subject
	globex := c.token(t, "globex-app")

	one, two, three := c.replicas[0].Endpoint, c.replicas[1].Endpoint, c.replicas[2].Endpoint
	sid := initialize(t, one, owner)

	for _, tc := range []struct {
		name   string
		url    string
		token  string
		method string
		body   string
	}{
		{name: "other subject, tools/call", url: two, token: other, method: http.MethodPost, body: echoCall(2, "alpha__echo", "x")},
		{name: "other subject, ping", url: three, token: other, method: http.MethodPost, body: `{"jsonrpc":"2.0","id":3,"method":"ping"}`},
		{name: "other subject, DELETE", url: two, token: other, method: http.MethodDelete},
		{name: "other tenant, tools/call", url: two, token: globex, method: http.MethodPost, body: echoCall(4, "alpha__echo", "x")},
		{name: "other subject, on the creating replica", url: one, token: other, method: http.MethodPost, body: `{"jsonrpc":"2.0","id":5,"method":"ping"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, tc.method, tc.url, tc.token, sid, tc.body)
			if r.status != http.StatusNotFound {
				t.Fatalf("%d %s, want 404", r.status, r.body)
			}
			if code, _ := rpcError(t, r.body); code != -32001 {
				t.Errorf("error code %d, want -32001 (session not found)", code)
			}
		})
	}
	if r := send(t, http.MethodPost, two, "", sid, `{"jsonrpc":"2.0","id":6,"method":"ping"}`); r.status != http.StatusUnauthorized {
		t.Errorf("no token: %d %s, want 401", r.status, r.body)
	}

	// The owner, on the other replicas: the session is there, untouched by
	// the DELETE attempt.
	r := send(t, http.MethodPost, two, owner, sid, echoCall(7, "alpha__echo", "mine"))
	if r.status != http.StatusOK || !strings.Contains(r.body, "alpha:mine") {
		t.Errorf("owner on replica 2: %d %s", r.status, r.body)
	}
	if r := send(t, http.MethodPost, three, owner, sid, `{"jsonrpc":"2.0","id":8,"method":"ping"}`); r.status != http.StatusOK || r.body != `{"jsonrpc":"2.0","id":8,"result":{}}` {
		t.Errorf("owner on replica 3: %d %s", r.status, r.body)
	}
	if r := send(t, http.MethodDelete, three, owner, sid, ""); r.status != http.StatusNoContent {
		t.Errorf("owner's DELETE on replica 3: %d %s", r.status, r.body)
	}
	if r := send(t, http.MethodPost, one, owner, sid, `{"jsonrpc":"2.0","id":9,"method":"ping"}`); r.status != http.StatusNotFound {
		t.Errorf("after the owner's DELETE, replica 1: %d %s", r.status, r.body)
	}
}

// TestUpstreamRestartAcrossReplicas restarts an upstream under a session
// served by every replica: one replica re-initializes it, and the others
// use the upstream session it stored.
func TestUpstreamRestartAcrossReplicas(t *testing.T) {
	c := startCluster(t)
	cs := c.connect(t, nil)
	for i := range replicas {
		mustEcho(t, cs, "alpha", fmt.Sprint("before-", i))
	}
	if n := initializes(c.alpha); n != 1 {
		t.Fatalf("alpha saw %d initialize requests before the restart, want 1 (opened once, shared)", n)
	}

	c.alpha.Restart()
	// At once: the restart closed the replicas' keep-alive connections to
	// alpha, and the first call must not be lost on one of them (see
	// internal/upstream's replayable).
	from := len(c.lb.Log())
	mustEcho(t, cs, "alpha", "first-after")
	if n := initializes(c.alpha); n != 2 {
		t.Errorf("alpha saw %d initialize requests after the first call, want 2", n)
	}
	// It ran once: on the new upstream session (the one the last
	// notifications/initialized opened), and nowhere else but on the
	// forgotten one, which alpha refused.
	var fresh string
	for _, r := range c.alpha.Requests() {
		if r.RPCMethod == "notifications/initialized" {
			fresh = r.Header.Get("Mcp-Session-Id")
		}
	}
	received, ran := 0, 0
	for _, r := range c.alpha.Requests() {
		if r.RPCMethod == "tools/call" && strings.Contains(string(r.Body), `"first-after"`) {
			received++
			if r.Header.Get("Mcp-Session-Id") == fresh {
				ran++
			}
		}
	}
	if received != 2 || ran != 1 {
		t.Errorf("alpha received the first call after its restart %d times and ran it %d times, want 2 and 1", received, ran)
	}
	for i := range 2 * replicas {
		mustEcho(t, cs, "alpha", fmt.Sprint("after-", i))
	}
	if n := initializes(c.alpha); n != 2 {
		t.Errorf("alpha saw %d initialize requests, want 2: one re-initialization, stored for every replica", n)
	}
	seen := map[int]bool{}
	for _, e := range callsSince(c.lb, from) {
		seen[e.Backend] = true
	}
	if len(seen) != replicas {
		t.Errorf("calls after the restart reached replicas %v, want all %d", seen, replicas)
	}
	// Beta was not restarted: its upstream session is the first one still.
	mustEcho(t, cs, "beta", "still")
	if n := initializes(c.beta); n != 1 {
		t.Errorf("beta saw %d initialize requests, want 1", n)
	}
}

// TestConcurrentCallsAcrossReplicas has every replica serve calls of one
// session at the same time. Replicas share the session's upstream sessions,
// so the requests a gateway sends upstream on its own (the tools/list that
// routes a call when the catalog is cold or expired) need ids unique across
// replicas, not only within one process: on one upstream session, an
// upstream rejects (the go-sdk answers 400 "duplicate in-flight request
// ID"), or worse mixes up, two requests in flight with one id.
func TestConcurrentCallsAcrossReplicas(t *testing.T) {
	// A catalog that expires at once: every call lists the upstream's tools
	// first, with an id of the gateway's own.
	c := startCluster(t, func(o *clusterOptions) { o.listCacheTTL = "1ms" })
	token := c.token(t, "acme-app")
	sid := initialize(t, c.endpoint, token)
	// Warm everything but the catalogs (token verified, connections open)
	// so that the replicas' calls below reach the upstream together.
	for i, p := range c.replicas {
		if r := send(t, http.MethodPost, p.Endpoint, token, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.status != http.StatusOK {
			t.Fatalf("ping on replica %d: %d %s", i, r.status, r.body)
		}
	}

	const perReplica = 30
	start := make(chan struct{})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
	)
	for i, p := range c.replicas {
		wg.Go(func() {
			<-start
			for j := range perReplica {
				id := 100 + i*perReplica + j
				text := fmt.Sprint("c", id)
				r, err := do(http.MethodPost, p.Endpoint, token, sid, echoCall(id, "alpha__echo", text))
				if err != nil || r.status != http.StatusOK || !strings.Contains(r.body, `"text":"alpha:`+text+`"`) {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("replica %d, call %d: %v %d %s", i, id, err, r.status, strings.TrimSpace(r.body)))
					mu.Unlock()
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d concurrent calls failed:\n%s", len(failures), replicas*perReplica, strings.Join(failures, "\n"))
	}
}
