package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// Bridging between the revisions: session clients and stateless clients,
// to upstreams of either era, and requests for input across them.

// TestSessionClientToModernUpstream: a 2025-11-25 session client reaches a
// 2026-07-28 upstream (the SDK in stateless mode). The gateway learns the
// upstream's era with server/discover, never initializes it, and fills in
// each request's _meta from the client's session.
func TestSessionClientToModernUpstream(t *testing.T) {
	m := testkit.NewUpstreamWith(t, "modern", testkit.UpstreamOptions{Stateless: true, Tools: append(slices.Clone(testkit.UpstreamTools), "region")})
	url := startGateway(t, []upstreamSpec{spec(m)})
	cs := testkit.Connect(t, url, nil)
	ctx := context.Background()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != len(testkit.UpstreamTools)+1 {
		t.Errorf("got %d tools, want %d", len(tools.Tools), len(testkit.UpstreamTools)+1)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "modern__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "modern:hi" {
		t.Errorf("echo = %q", got)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "modern__meta", Meta: mcp.Meta{"x-custom": "kept"}})
	if err != nil {
		t.Fatal(err)
	}
	meta := res.StructuredContent.(map[string]any)["meta"].(map[string]any)
	if meta["io.modelcontextprotocol/protocolVersion"] != "2026-07-28" || meta["x-custom"] != "kept" {
		t.Errorf("upstream saw _meta %v", meta)
	}
	if info, _ := meta["io.modelcontextprotocol/clientInfo"].(map[string]any); info["name"] != "testkit" {
		t.Errorf("clientInfo upstream = %v, want the session client's", meta["io.modelcontextprotocol/clientInfo"])
	}
	if _, ok := meta["io.modelcontextprotocol/clientCapabilities"].(map[string]any); !ok {
		t.Errorf("no clientCapabilities upstream: %v", meta)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "modern+test://modern/readme"})
	if err != nil || rr.Contents[0].Text != "readme of modern" {
		t.Fatalf("read: %v %+v", err, rr)
	}
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "modern__greet", Arguments: map[string]string{"who": "you"}})
	if err != nil || len(pr.Messages) != 1 {
		t.Fatalf("prompt: %v %+v", err, pr)
	}
	// The upstream checks the Mcp-Param-* headers its tool's x-mcp-header
	// annotations call for: the gateway sends them as a client would.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "modern__region", Arguments: map[string]any{"region": "Zürich", "text": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "modern:Zürich:x" {
		t.Errorf("region = %q (error %v)", got, res.IsError)
	}

	var discovers int
	for _, r := range m.Requests() {
		switch r.RPCMethod {
		case "initialize", "notifications/initialized":
			t.Errorf("a 2026-07-28 upstream got %s", r.RPCMethod)
		case "server/discover":
			discovers++
		}
		if r.Method != "POST" {
			continue
		}
		if r.Header.Get("Mcp-Session-Id") != "" || r.Header.Get("Mcp-Protocol-Version") != "2026-07-28" || r.Header.Get("Mcp-Method") != r.RPCMethod {
			t.Errorf("%s: headers %v", r.RPCMethod, r.Header)
		}
		if r.RPCMethod == "tools/call" && r.Header.Get("Mcp-Name") == "" {
			t.Errorf("tools/call without Mcp-Name")
		}
		if r.Header.Get("Mcp-Name") == "region" && r.Header.Get("Mcp-Param-Region") != "=?base64?WsO8cmljaA==?=" {
			t.Errorf("Mcp-Param-Region = %q", r.Header.Get("Mcp-Param-Region"))
		}
	}
	if discovers != 1 {
		t.Errorf("upstream saw %d server/discover, want 1 (the era is remembered)", discovers)
	}
}

// TestStatelessClientToModernUpstream: both ends speak 2026-07-28; the
// client's own _meta goes through, and so does the upstream's
// input_required.
func TestStatelessClientToModernUpstream(t *testing.T) {
	m := testkit.NewUpstreamWith(t, "modern", testkit.UpstreamOptions{Stateless: true})
	url := startGateway(t, []upstreamSpec{spec(m)})
	var asked atomic.Int32
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{ProtocolVersion: "2026-07-28", ElicitationHandler: elicitName(&asked)})
	ctx := context.Background()
	// input_required and its retry pass through, requestState and all.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "modern__ask"})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "modern:hello Ada" || asked.Load() != 1 {
		t.Errorf("ask = %q after %d elicitations", got, asked.Load())
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "modern__echo", Arguments: map[string]any{"text": "both"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "modern:both" {
		t.Errorf("echo = %q", got)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "modern__meta"})
	if err != nil {
		t.Fatal(err)
	}
	meta := res.StructuredContent.(map[string]any)["meta"].(map[string]any)
	if info, _ := meta["io.modelcontextprotocol/clientInfo"].(map[string]any); info["name"] != "testkit" {
		t.Errorf("upstream saw _meta %v", meta)
	}
}

// elicitName answers elicitation/create with the name Ada, counting calls.
func elicitName(n *atomic.Int32) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		n.Add(1)
		if !strings.Contains(req.Params.Message, "name") {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
	}
}

// TestInputRequiredFromLegacyElicitation: a 2026-07-28 client calls a tool
// of a 2025-11-25 upstream that asks for input with elicitation/create. The
// client gets input_required, answers, retries with inputResponses and
// requestState, and gets the tool's result: the SDK's client does the
// round trip itself.
func TestInputRequiredFromLegacyElicitation(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	url := startGateway(t, []upstreamSpec{spec(a)})
	var asked atomic.Int32
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{ProtocolVersion: "2026-07-28", ElicitationHandler: elicitName(&asked)})
	for i := range 3 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__ask"})
		if err != nil {
			t.Fatal(err)
		}
		if got := text(t, res); got != "alpha:hello Ada" {
			t.Fatalf("call %d: ask = %q", i, got)
		}
	}
	if asked.Load() != 3 {
		t.Errorf("the client was asked %d times, want 3", asked.Load())
	}
}

// TestInputRequiredRaw does the round trip by hand: the input_required
// result is valid against the revision's schema, a requestState is good
// for one retry of the same call only, and a bad one is -32602.
func TestInputRequiredRaw(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	url := startGateway(t, []upstreamSpec{spec(a)})
	validate := schemaValidator(t)
	call := askCaller(t, url, func(body string) { validate("CallToolResultResponse", body) })
	first := call(1, "")
	res, _ := first["result"].(map[string]any)
	if res["resultType"] != "input_required" {
		t.Fatalf("first answer: %v", first)
	}
	state := res["requestState"].(string)
	var key string
	for k, v := range res["inputRequests"].(map[string]any) {
		key = k
		if v.(map[string]any)["method"] != "elicitation/create" {
			t.Errorf("input request %v", v)
		}
	}
	answer := func(name string) string {
		return `,"inputResponses":{"` + key + `":{"action":"accept","content":{"name":"` + name + `"}}}`
	}
	if e, _ := call(2, answer("Bob")+`,"requestState":"mcpgw1.00000000000000000000000000000000"`)["error"].(map[string]any); e == nil || e["code"].(float64) != -32602 {
		t.Errorf("unknown state: %v", e)
	}
	// A retry that leaves the answer out is asked again.
	again := call(3, `,"requestState":"`+state+`"`)
	res, _ = again["result"].(map[string]any)
	if res["resultType"] != "input_required" {
		t.Fatalf("retry without the answer: %v", again)
	}
	state = res["requestState"].(string)
	done := call(4, answer("Bob")+`,"requestState":"`+state+`"`)
	res, _ = done["result"].(map[string]any)
	if res["resultType"] != "complete" || !strings.Contains(mustJSON(t, res["content"]), "alpha:hello Bob") {
		t.Fatalf("final answer: %v", done)
	}
	// The state was used up by the retry that used it.
	if e, _ := call(5, answer("Eve")+`,"requestState":"`+state+`"`)["error"].(map[string]any); e == nil || e["code"].(float64) != -32602 {
		t.Errorf("replayed state: %v", e)
	}
}

// askCaller returns a function that calls alpha__ask as a 2026-07-28
// client that declares elicitation, with extra appended to the params
// (inputResponses, requestState), and returns the JSON-RPC answer (the
// last event of a stream). onResult, if set, sees the body of every
// answer that has a result.
func askCaller(t *testing.T, url string, onResult func(body string)) func(id int, extra string) map[string]any {
	withCaps := func(r *http.Request) {
		r.Header.Set("Mcp-Name", "alpha__ask")
		b, _ := io.ReadAll(r.Body)
		b = []byte(strings.Replace(string(b), `clientCapabilities":{}`, `clientCapabilities":{"elicitation":{}}`, 1))
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(string(b))), int64(len(b))
	}
	return func(id int, extra string) map[string]any {
		t.Helper()
		resp, body := do(t, post2026(t, url, id, "tools/call", `"name":"alpha__ask"`+extra, withCaps))
		if d := lastData(body); d != "" {
			body = d
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		// -32602 is 400 in this revision (see TestStatelessErrorStatus).
		want := 200
		if e, _ := m["error"].(map[string]any); e != nil && e["code"] == -32602.0 {
			want = 400
		}
		if resp.StatusCode != want {
			t.Fatalf("status %d, want %d: %s", resp.StatusCode, want, body)
		}
		if m["result"] != nil && onResult != nil {
			onResult(body)
		}
		return m
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSessionClientElicitationForwarded: a 2025-11-25 client that can
// answer elicitation gets the upstream's request on its call's stream and
// its answer reaches the upstream.
func TestSessionClientElicitationForwarded(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	url := startGateway(t, []upstreamSpec{spec(a)})
	var asked atomic.Int32
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{ElicitationHandler: elicitName(&asked)})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__ask"})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "alpha:hello Ada" || asked.Load() != 1 {
		t.Fatalf("ask = %q after %d elicitations", got, asked.Load())
	}
}

// TestElicitationWithoutCapability: a client that did not declare
// elicitation never sees the request; the upstream gets a refusal at once
// (no hang until its timeout), whatever the client's revision. A
// 2025-11-25 client gets the upstream's answer to that refusal; a
// 2026-07-28 client MissingRequiredClientCapabilityError with HTTP 400
// (2026-07-28 basic/index, "Per-request protocol fields").
func TestElicitationWithoutCapability(t *testing.T) {
	// The gateway announces to an upstream what its client declared, and
	// the SDK's servers then do not ask: this one asks anyway.
	a := testkit.NewUpstreamWith(t, "alpha", testkit.UpstreamOptions{AssumeCapable: true})
	url := startGateway(t, []upstreamSpec{spec(a)})
	cs := testkit.Connect(t, url, nil)
	start := time.Now()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__ask"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(t, res), "cannot ask") || time.Since(start) > 5*time.Second {
		t.Errorf("2025-11-25: %v %q after %v", res.IsError, text(t, res), time.Since(start))
	}

	validate := schemaValidator(t)
	start = time.Now()
	resp, body := do(t, post2026(t, url, 7, "tools/call", `"name":"alpha__ask"`, func(r *http.Request) { r.Header.Set("Mcp-Name", "alpha__ask") }))
	if resp.StatusCode != 400 || time.Since(start) > 5*time.Second {
		t.Fatalf("2026-07-28: %d after %v: %s", resp.StatusCode, time.Since(start), body)
	}
	validate("MissingRequiredClientCapabilityError", body)
	var m struct {
		ID    int
		Error struct {
			Code int
			Data struct {
				RequiredCapabilities map[string]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	if m.ID != 7 || m.Error.Code != -32021 || len(m.Error.Data.RequiredCapabilities) != 1 || string(m.Error.Data.RequiredCapabilities["elicitation"]) != "{}" {
		t.Errorf("2026-07-28: %s", body)
	}
	// The SDK's client sees the error.
	cs = testkit.Connect(t, url, &testkit.ConnectOptions{ProtocolVersion: "2026-07-28"})
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__ask"}); err == nil || !strings.Contains(err.Error(), "elicitation") {
		t.Errorf("2026-07-28 SDK client: %v", err)
	}
}

// TestInputRequiredAcrossReplicas: the stateless client's requests go round
// robin over two replicas sharing Redis, so the retry lands on the replica
// that did not park the upstream call.
func TestInputRequiredAcrossReplicas(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	store := redisStore(t)
	one := startGateway(t, []upstreamSpec{spec(a)}, store)
	two := startGateway(t, []upstreamSpec{spec(a)}, store)
	lb := testkit.StartLB(t, []string{strings.TrimSuffix(one, "/mcp"), strings.TrimSuffix(two, "/mcp")})
	var asked atomic.Int32
	cs := testkit.Connect(t, lb.URL+"/mcp", &testkit.ConnectOptions{ProtocolVersion: "2026-07-28", ElicitationHandler: elicitName(&asked)})
	for i := range 4 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__ask"})
		if err != nil {
			t.Fatal(err)
		}
		if got := text(t, res); got != "alpha:hello Ada" {
			t.Fatalf("call %d: ask = %q", i, got)
		}
	}
	// Each call is two tools/call requests, the first and its retry; round
	// robin puts them on different replicas.
	var calls []int
	for _, r := range lb.Log() {
		if r.RPCMethod == "tools/call" {
			calls = append(calls, r.Backend)
		}
	}
	if len(calls) != 8 {
		t.Fatalf("%d tools/call requests through the LB, want 8", len(calls))
	}
	for i := 0; i < len(calls); i += 2 {
		if calls[i] == calls[i+1] {
			t.Errorf("call %d and its retry both went to replica %d", i/2, calls[i])
		}
	}
	// One upstream session for the principal, shared by both replicas.
	if n := a.Count("initialize"); n != 1 {
		t.Errorf("upstream saw %d initialize requests, want 1", n)
	}
}

// TestModernInputRequiredToSessionClient: the reverse direction. A
// 2026-07-28 upstream answers input_required; a 2025-11-25 session client
// gets the input request on its call's stream, and its answer (POSTed,
// here to the other replica) goes back upstream in the retry.
func TestModernInputRequiredToSessionClient(t *testing.T) {
	m := testkit.NewUpstreamWith(t, "modern", testkit.UpstreamOptions{Stateless: true})
	store := redisStore(t)
	one := startGateway(t, []upstreamSpec{spec(m)}, store)
	two := startGateway(t, []upstreamSpec{spec(m)}, store)
	lb := testkit.StartLB(t, []string{strings.TrimSuffix(one, "/mcp"), strings.TrimSuffix(two, "/mcp")})
	var asked atomic.Int32
	cs := testkit.Connect(t, lb.URL+"/mcp", &testkit.ConnectOptions{ElicitationHandler: elicitName(&asked)})
	for i := range 2 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "modern__ask"})
		if err != nil {
			t.Fatal(err)
		}
		if got := text(t, res); got != "modern:hello Ada" {
			t.Fatalf("call %d: ask = %q", i, got)
		}
	}
	if asked.Load() != 2 {
		t.Errorf("the client was asked %d times, want 2", asked.Load())
	}
	// Each answer went to the replica that was not waiting for it.
	var last, crossed int
	for _, r := range lb.Log() {
		switch {
		case r.RPCMethod == "tools/call":
			last = r.Backend
		case r.Method == "POST" && r.RPCMethod == "" && r.Backend != last:
			crossed++
		}
	}
	if crossed != 2 {
		t.Errorf("%d answers crossed replicas, want 2", crossed)
	}
	// Each call went upstream twice: first, then the retry with the answer.
	var calls []string
	for _, r := range m.Requests() {
		if r.RPCMethod == "tools/call" {
			calls = append(calls, string(r.Body))
		}
	}
	if len(calls) != 4 || !strings.Contains(calls[1], `"requestState":"asked"`) || !strings.Contains(calls[1], `"inputResponses":{"name":`) {
		t.Errorf("upstream calls: %q", calls)
	}
	// A client without the capability: the upstream, which must not ask,
	// is told so by the capabilities in _meta.
	plain := testkit.Connect(t, one, nil)
	res, err := plain.CallTool(context.Background(), &mcp.CallToolParams{Name: "modern__meta"})
	if err != nil {
		t.Fatal(err)
	}
	meta := res.StructuredContent.(map[string]any)["meta"].(map[string]any)
	if caps := meta["io.modelcontextprotocol/clientCapabilities"].(map[string]any); caps["elicitation"] != nil {
		t.Errorf("capabilities upstream: %v", caps)
	}
}

// TestDeniedByNameAlone: a call the tenant's rules deny by its name gets
// the answer an unknown tool gets, at the same cost: each asks for the
// upstream's list once (the catalog is cold), neither calls the tool, and
// neither re-lists afterwards (issue 13: hidden and unknown must be
// indistinguishable).
func TestDeniedByNameAlone(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	url := startGateway(t, []upstreamSpec{spec(a)}, func(c *config.Config) {
		c.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{
			Name: "alpha", Tools: config.Rules{Deny: []string{"fail"}},
		}}}}
	})
	for i, name := range []string{"alpha__fail", "alpha__nosuch", "alpha__fail", "alpha__nosuch"} {
		resp, body := do(t, post2026(t, url, i+1, "tools/call", `"name":"`+name+`"`,
			func(r *http.Request) { r.Header.Set("Mcp-Name", name) }))
		if resp.StatusCode != 400 || !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, "Unknown tool: "+name) {
			t.Fatalf("call %s: %d %s", name, resp.StatusCode, body)
		}
	}
	lists := 0
	for _, r := range a.Requests() {
		switch r.RPCMethod {
		case "tools/list":
			lists++
		case "tools/call":
			t.Errorf("the upstream got tools/call for a hidden or unknown name")
		}
	}
	if lists != 1 {
		t.Errorf("the upstream got %d tools/list for hidden and unknown names, want 1 (the cold catalog)", lists)
	}
}

// TestUpstreamListChanges: with upstreams[].watch, a tool an upstream adds
// reaches the gateway's cache and its clients at once, long before the
// list cache expires, for an upstream of either revision.
func TestUpstreamListChanges(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		name := map[bool]string{false: "legacy", true: "modern"}[stateless]
		t.Run(name, func(t *testing.T) {
			u := testkit.NewUpstreamWith(t, name, testkit.UpstreamOptions{Stateless: stateless, Tools: []string{"echo"}})
			sp := spec(u)
			sp.watch = true
			url := startGateway(t, []upstreamSpec{sp}, func(c *config.Config) { c.Server.ListCacheTTL = config.Duration(time.Hour) })
			changed := make(chan struct{}, 10)
			cs := testkit.Connect(t, url, &testkit.ConnectOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				changed <- struct{}{}
			}})
			ctx := context.Background()
			if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) != 1 {
				t.Fatalf("tools: %v %v", tools, err)
			}
			// Wait for the watch to be up: it is when the upstream got its
			// GET or listen request.
			deadline := time.Now().Add(5 * time.Second)
			for !watching(u) {
				if time.Now().After(deadline) {
					t.Fatal("the gateway never opened its watch stream")
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The upstream has the GET once it arrives, and its stream
			// for notifications a moment later: a change in between has
			// no notification. Adding the same tool again sends another.
			told := false
			for range 10 {
				u.AddTool("late")
				select {
				case <-changed:
					told = true
				case <-time.After(500 * time.Millisecond):
					continue
				}
				break
			}
			if !told {
				t.Fatal("the client was not told that the tools changed")
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 2 {
				t.Fatalf("tools after the change: %v %v", tools, err)
			}
		})
	}
}

func watching(u *testkit.Upstream) bool {
	for _, r := range u.Requests() {
		if r.Method == http.MethodGet || r.RPCMethod == "subscriptions/listen" {
			return true
		}
	}
	return false
}

// TestSetLevelSkipsModernUpstreams: logging/setLevel, which 2026-07-28
// removed, reaches the legacy upstream and not the modern one.
func TestSetLevelSkipsModernUpstreams(t *testing.T) {
	l := testkit.NewUpstream(t, "legacy")
	m := testkit.NewUpstreamWith(t, "modern", testkit.UpstreamOptions{Stateless: true})
	url := startGateway(t, []upstreamSpec{spec(l), spec(m)})
	cs := testkit.Connect(t, url, nil)
	//lint:ignore SA1019 logging is deprecated only from 2026-07-28; the 2025-11-25 sessions the gateway serves still use it
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	if nl, nm := l.Count("logging/setLevel"), m.Count("logging/setLevel"); nl != 1 || nm != 0 {
		t.Errorf("logging/setLevel: legacy got %d, modern %d; want 1 and 0", nl, nm)
	}
}

// TestElicitationModeNeedsItsCapability: an elicitation's mode needs its
// own sub-capability (2025-11-25 client/elicitation, "Capabilities"; an
// empty elicitation object is form mode only). A 2026-07-28 client that
// lacks it gets -32021 naming it; one that has it gets input_required.
func TestElicitationModeNeedsItsCapability(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "modes"}, nil)
	for _, mode := range []string{"form", "url"} {
		srv.AddTool(&mcp.Tool{Name: mode, InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			p := &mcp.ElicitParams{Mode: mode, Message: "Sign in"}
			if mode == "url" {
				p.URL, p.ElicitationID = "https://example.com/sign-in", "e1"
			} else {
				p.RequestedSchema = map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}
			}
			if _, err := req.Session.Elicit(ctx, p); err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "cannot ask: " + err.Error()}}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "asked"}}}, nil
		})
	}
	// An upstream that asks whatever its client declared (the SDK's
	// servers check, and the gateway announces what the client declared).
	up := httptest.NewServer(testkit.AssumeCapable(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
	t.Cleanup(up.Close)
	url := startGateway(t, []upstreamSpec{{name: "modes", url: up.URL}})
	validate := schemaValidator(t)
	id := 0
	for _, tc := range []struct {
		tool, caps string
		required   string // data.requiredCapabilities, "" for an input_required result
	}{
		{"form", `{"elicitation":{}}`, ""},
		{"form", `{"elicitation":{"form":{}}}`, ""},
		{"form", `{"elicitation":{"url":{}}}`, `{"elicitation":{"form":{}}}`},
		{"url", `{"elicitation":{}}`, `{"elicitation":{"url":{}}}`},
		{"url", `{"elicitation":{"form":{}}}`, `{"elicitation":{"url":{}}}`},
		{"url", `{"elicitation":{"url":{}}}`, ""},
		{"url", `{}`, `{"elicitation":{}}`},
	} {
		// Ids differ: a parked call is still in flight upstream under its
		// client's id.
		id++
		req := post2026(t, url, id, "tools/call", `"name":"modes__`+tc.tool+`"`, func(r *http.Request) {
			r.Header.Set("Mcp-Name", "modes__"+tc.tool)
			b, _ := io.ReadAll(r.Body)
			b = []byte(strings.Replace(string(b), `clientCapabilities":{}`, `clientCapabilities":`+tc.caps, 1))
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(string(b))), int64(len(b))
		})
		resp, body := do(t, req)
		if d := lastData(body); d != "" {
			body = d
		}
		if tc.required == "" {
			if resp.StatusCode != 200 || !strings.Contains(body, `"resultType":"input_required"`) {
				t.Errorf("%s with %s: %d %s", tc.tool, tc.caps, resp.StatusCode, body)
			}
			continue
		}
		var m struct {
			Error struct {
				Code int
				Data struct{ RequiredCapabilities json.RawMessage }
			}
		}
		_ = json.Unmarshal([]byte(body), &m)
		if resp.StatusCode != 400 || m.Error.Code != -32021 || string(m.Error.Data.RequiredCapabilities) != tc.required {
			t.Errorf("%s with %s: %d %s, want 400, -32021 requiring %s", tc.tool, tc.caps, resp.StatusCode, body, tc.required)
			continue
		}
		validate("MissingRequiredClientCapabilityError", body)
	}
	// A session client that declared form mode only is not sent a URL
	// elicitation: the upstream is refused at once.
	var asked atomic.Int32
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{ElicitationHandler: elicitName(&asked)})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "modes__url"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(t, res), "did not declare the capability") || asked.Load() != 0 {
		t.Errorf("session client, URL mode: %v %q, asked %d times", res.IsError, text(t, res), asked.Load())
	}
}
