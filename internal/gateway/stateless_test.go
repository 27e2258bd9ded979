package gateway_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestStatelessClientThroughGateway drives the gateway with the Go SDK in
// the 2026-07-28 revision (server/discover, no initialize, no session) to
// Go SDK upstreams the gateway reaches with 2025-11-25 sessions.
func TestStatelessClientThroughGateway(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	b := testkit.NewUpstreamWith(t, "beta", testkit.UpstreamOptions{JSONResponse: true})
	url := startGateway(t, []upstreamSpec{spec(a), spec(b)})
	var progress []string
	done := make(chan struct{}, 10)
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{
		ProtocolVersion: "2026-07-28",
		ProgressHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress = append(progress, req.Params.Message)
			done <- struct{}{}
		},
	})
	ctx := context.Background()
	if v := cs.InitializeResult(); v == nil || v.ServerInfo == nil || v.ServerInfo.Name != "mcp-gateway" {
		t.Fatalf("discover result: %+v", v)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 2*len(testkit.UpstreamTools) {
		t.Errorf("got %d tools", len(tools.Tools))
	}
	for _, up := range []string{"alpha", "beta"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: up + "__echo", Arguments: map[string]any{"text": "stateless"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != up+":stateless" {
			t.Errorf("%s__echo = %q", up, got)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__progress", Arguments: map[string]any{"steps": 2}, Meta: mcp.Meta{"progressToken": "p"}}); err != nil {
		t.Fatal(err)
	}
	<-done
	<-done
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "beta+test://beta/readme"})
	if err != nil || rr.Contents[0].Text != "readme of beta" {
		t.Fatalf("read: %v %+v", err, rr)
	}
	// The gateway opened one upstream session per upstream for this
	// principal, and reused it.
	inits := 0
	for _, r := range a.Requests() {
		if r.RPCMethod == "initialize" {
			inits++
		}
		if r.RPCMethod != "server/discover" && strings.Contains(string(r.Body), "io.modelcontextprotocol/protocolVersion") {
			t.Errorf("the client's protocol _meta reached a 2025-11-25 upstream: %s", r.Body)
		}
	}
	if inits != 1 {
		t.Errorf("alpha saw %d initialize requests, want 1", inits)
	}
}

// The JSON Schema of the 2026-07-28 revision, as published with the
// specification (schema/2026-07-28/schema.json); responses are validated
// against it.
const schemaFile = "testdata/mcp-schema-2026-07-28.json"

func schemaValidator(t *testing.T) func(def string, body string) {
	t.Helper()
	f, err := os.Open(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mcp.json", doc); err != nil {
		t.Fatal(err)
	}
	cache := map[string]*jsonschema.Schema{}
	return func(def, body string) {
		t.Helper()
		s, ok := cache[def]
		if !ok {
			if s, err = c.Compile("mcp.json#/$defs/" + def); err != nil {
				t.Fatalf("compiling %s: %v", def, err)
			}
			cache[def] = s
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
		if err != nil {
			t.Fatalf("%s: not JSON: %s", def, body)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("response is not a valid %s: %v\n%s", def, err, body)
		}
	}
}

// post2026 builds a request of the stateless revision with its mirrored
// headers; edit may change them.
func post2026(t testing.TB, url string, id int, method, params string, edit ...func(*http.Request)) *http.Request {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}`
	if params == "" {
		params = "{" + meta + "}"
	} else {
		params = "{" + meta + "," + params + "}"
	}
	req := post(t, url, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	for _, e := range edit {
		e(req)
	}
	return req
}

// rawPost2026 builds a request of the stateless revision with its
// headers and params as given ("" for none).
func rawPost2026(t testing.TB, url, method, params string) *http.Request {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q}`, method)
	if params != "" {
		body = fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q,"params":%s}`, method, params)
	}
	req := post(t, url, "", body)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	return req
}

func TestStatelessProtocol(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	url := startGateway(t, []upstreamSpec{spec(a)})
	validate := schemaValidator(t)
	set := func(k, v string) func(*http.Request) { return func(r *http.Request) { r.Header.Set(k, v) } }
	del := func(k string) func(*http.Request) { return func(r *http.Request) { r.Header.Del(k) } }

	// Successful requests, each validated against the revision's schema.
	for _, tc := range []struct {
		method, params, name, def string
	}{
		{"server/discover", "", "", "DiscoverResultResponse"},
		{"tools/list", "", "", "ListToolsResultResponse"},
		{"prompts/list", "", "", "ListPromptsResultResponse"},
		{"resources/list", "", "", "ListResourcesResultResponse"},
		{"resources/templates/list", "", "", "ListResourceTemplatesResultResponse"},
		{"tools/call", `"name":"alpha__echo","arguments":{"text":"hi"}`, "alpha__echo", "CallToolResultResponse"},
		{"tools/call", `"name":"alpha__fail"`, "alpha__fail", "CallToolResultResponse"},
		{"prompts/get", `"name":"alpha__greet","arguments":{"who":"x"}`, "alpha__greet", "GetPromptResultResponse"},
		{"resources/read", `"uri":"alpha+test://alpha/readme"`, "alpha+test://alpha/readme", "ReadResourceResultResponse"},
		{"completion/complete", `"ref":{"type":"ref/prompt","name":"alpha__greet"},"argument":{"name":"who","value":"a"}`, "", "CompleteResultResponse"},
	} {
		var edits []func(*http.Request)
		if tc.name != "" {
			edits = append(edits, set("Mcp-Name", tc.name))
		}
		resp, body := do(t, post2026(t, url, 1, tc.method, tc.params, edits...))
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", tc.method, resp.StatusCode, body)
			continue
		}
		if resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: a stateless request got a session id", tc.method)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			body = lastData(body)
		}
		validate(tc.def, body)
		if !strings.Contains(body, `"io.modelcontextprotocol/serverInfo":{"name":"mcp-gateway"`) {
			t.Errorf("%s: no serverInfo in _meta: %s", tc.method, body)
		}
		if strings.HasSuffix(tc.method, "/list") && !strings.Contains(body, `"cacheScope":"private"`) {
			t.Errorf("%s: a per-tenant list is not private: %s", tc.method, body)
		}
	}

	// Errors, with the codes of the final revision.
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		code   int64
		def    string
	}{
		{"protocol version header missing", post2026(t, url, 2, "tools/list", "", del("Mcp-Protocol-Version")), 400, -32020, "HeaderMismatchError"},
		{"header and body versions differ", post2026(t, url, 2, "tools/list", "", set("Mcp-Protocol-Version", "2026-08-01")), 400, -32020, "HeaderMismatchError"},
		{"unsupported version", func() *http.Request {
			r := post2026(t, url, 2, "tools/list", "")
			b, _ := io.ReadAll(r.Body)
			r2 := post(t, url, "", strings.Replace(string(b), `"2026-07-28"`, `"2099-01-01"`, 1))
			r2.Header.Set("Mcp-Protocol-Version", "2099-01-01")
			r2.Header.Set("Mcp-Method", "tools/list")
			return r2
		}(), 400, -32022, "UnsupportedProtocolVersionError"},
		{"Mcp-Method missing", post2026(t, url, 2, "tools/list", "", del("Mcp-Method")), 400, -32020, "HeaderMismatchError"},
		{"Mcp-Method differs", post2026(t, url, 2, "tools/list", "", set("Mcp-Method", "prompts/list")), 400, -32020, "HeaderMismatchError"},
		{"Mcp-Name missing", post2026(t, url, 2, "tools/call", `"name":"alpha__echo"`), 400, -32020, "HeaderMismatchError"},
		{"Mcp-Name differs", post2026(t, url, 2, "tools/call", `"name":"alpha__echo"`, set("Mcp-Name", "alpha__fail")), 400, -32020, "HeaderMismatchError"},
		// A required per-request field missing is malformed: -32602 and
		// 400 (basic/index, "Per-request protocol fields").
		{"_meta missing", rawPost2026(t, url, "tools/list", `{}`), 400, -32602, "InvalidParamsError"},
		{"params missing", rawPost2026(t, url, "tools/list", ``), 400, -32602, "InvalidParamsError"},
		{"protocolVersion missing", rawPost2026(t, url, "tools/list", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`), 400, -32602, "InvalidParamsError"},
		{"clientCapabilities missing", rawPost2026(t, url, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), 400, -32602, "InvalidParamsError"},
		{"clientCapabilities not an object", rawPost2026(t, url, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":"all"}}`), 400, -32602, "InvalidParamsError"},
		{"server/discover without clientCapabilities", rawPost2026(t, url, "server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), 400, -32602, "InvalidParamsError"},
		// The Go SDK's 2026-07-28 client sends its keepalive ping so.
		{"ping without _meta", rawPost2026(t, url, "ping", `{}`), 400, -32602, "InvalidParamsError"},
		{"unknown method", post2026(t, url, 2, "tools/explode", ""), 404, -32601, "MethodNotFoundError"},
		{"ping is gone", post2026(t, url, 2, "ping", ""), 404, -32601, "MethodNotFoundError"},
		{"initialize is gone", post2026(t, url, 2, "initialize", ""), 404, -32601, "MethodNotFoundError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, tc.req)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if _, code := rpcError(t, body); code != tc.code {
				t.Errorf("code %d, want %d: %s", code, tc.code, body)
			}
			if tc.def == "MethodNotFoundError" || tc.def == "InvalidParamsError" {
				var m struct{ Error json.RawMessage }
				_ = json.Unmarshal([]byte(body), &m)
				validate(tc.def, string(m.Error))
			} else {
				validate(tc.def, body)
			}
		})
	}

	// The Base64 sentinel form of Mcp-Name is decoded before comparing.
	resp, body := do(t, post2026(t, url, 3, "tools/call", `"name":"alpha__echo","arguments":{"text":"b64"}`,
		set("Mcp-Name", "=?base64?"+base64.StdEncoding.EncodeToString([]byte("alpha__echo"))+"?=")))
	if resp.StatusCode != 200 || !strings.Contains(body, "alpha:b64") {
		t.Errorf("Base64 Mcp-Name: %d %s", resp.StatusCode, body)
	}
	// A resource that does not exist is -32602 in this revision, with 400.
	resp, body = do(t, post2026(t, url, 4, "resources/read", `"uri":"nope+x://y"`, set("Mcp-Name", "nope+x://y")))
	if _, code := rpcError(t, body); resp.StatusCode != 400 || code != -32602 {
		t.Errorf("unknown resource: %d %s", resp.StatusCode, body)
	}
}

// TestStatelessLogMessagesOnlyWhenAsked: a 2026-07-28 request gets the log
// messages of its call only if its _meta asks for them with logLevel
// (server/utilities/logging, "Per-request log level"), on its own response
// stream before the response. The upstream logs during every call, so an
// absent message was withheld, not missing.
func TestStatelessLogMessagesOnlyWhenAsked(t *testing.T) {
	a := testkit.NewUpstreamWith(t, "alpha", testkit.UpstreamOptions{Tools: []string{"log"}})
	url := startGateway(t, []upstreamSpec{spec(a)})
	validate := schemaValidator(t)
	call := func(id int, logLevel string) string {
		t.Helper()
		meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}`
		if logLevel != "" {
			meta += `,"io.modelcontextprotocol/logLevel":"` + logLevel + `"`
		}
		req := post(t, url, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{%s},"name":"alpha__log","arguments":{"text":"hello %d"}}}`, id, meta, id))
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "alpha__log")
		resp, body := do(t, req)
		if resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", id, resp.StatusCode, body)
		}
		last := lastData(body)
		if last == "" {
			last = body // a JSON answer
		}
		validate("CallToolResultResponse", last)
		if !strings.Contains(last, `"text":"logged"`) || !strings.Contains(last, fmt.Sprintf(`"id":%d`, id)) {
			t.Fatalf("call %d: the last message is not its result: %s", id, body)
		}
		return body
	}
	for i, logLevel := range []string{"", "info", "", "debug"} {
		id := i + 1
		body := call(id, logLevel)
		if logLevel == "" {
			if strings.Contains(body, "notifications/message") {
				t.Errorf("call %d: a log message for a request that did not ask: %s", id, body)
			}
			continue
		}
		var events []string
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				events = append(events, d)
			}
		}
		// The log message, then the response.
		if len(events) != 2 {
			t.Fatalf("call %d (logLevel %s): want a log message and the response: %s", id, logLevel, body)
		}
		validate("LoggingMessageNotification", events[0])
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Level  string `json:"level"`
				Logger string `json:"logger"`
				Data   string `json:"data"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(events[0]), &msg); err != nil {
			t.Fatal(err)
		}
		if msg.Method != "notifications/message" || msg.Params.Level != "info" || msg.Params.Logger != "alpha" || msg.Params.Data != fmt.Sprintf("hello %d", id) {
			t.Errorf("call %d: log message %s", id, events[0])
		}
	}
	// Each call reached the upstream, and logged there, exactly once.
	if n := a.Count("tools/call"); n != 4 {
		t.Errorf("the upstream saw %d calls, want 4", n)
	}
}

// lastData returns the data of the last event of an SSE body.
func lastData(body string) string {
	var last string
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			last = d
		}
	}
	return last
}

// TestStatelessAcrossReplicasAndListen: consecutive stateless requests land
// on two replicas sharing Redis and share one upstream session; a
// subscriptions/listen stream hears a reload that changes the tenant's view.
func TestStatelessAcrossReplicasAndListen(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	store := redisStore(t)
	g1, one := startGatewayWith(t, gateway.Options{}, []upstreamSpec{spec(a)}, store)
	_, two := startGatewayWith(t, gateway.Options{}, []upstreamSpec{spec(a)}, store)
	for i := range 6 {
		url := []string{one, two}[i%2]
		resp, body := do(t, post2026(t, url, i, "tools/call", `"name":"alpha__echo","arguments":{"text":"r"}`,
			func(r *http.Request) { r.Header.Set("Mcp-Name", "alpha__echo") }))
		if resp.StatusCode != 200 || !strings.Contains(body, "alpha:r") {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	inits := 0
	for _, r := range a.Requests() {
		if r.RPCMethod == "initialize" {
			inits++
		}
	}
	if inits != 1 {
		t.Errorf("alpha saw %d initialize requests for one principal across two replicas, want 1", inits)
	}

	// subscriptions/listen on replica one.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := post2026(t, one, 42, "subscriptions/listen", `"notifications":{"toolsListChanged":true,"resourceSubscriptions":["x://y"]}`)
	req = req.WithContext(ctx)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- d
			}
		}
		close(events)
	}()
	next := func() string {
		select {
		case e := <-events:
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("no event on the subscription")
			return ""
		}
	}
	validate := schemaValidator(t)
	ack := next()
	validate("SubscriptionsAcknowledgedNotification", ack)
	if !strings.Contains(ack, `"io.modelcontextprotocol/subscriptionId":42`) || strings.Contains(ack, "resourceSubscriptions") {
		t.Errorf("acknowledgment: %s", ack)
	}
	cfg := *g1.Config()
	cfg.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{Name: "alpha", Tools: config.Rules{Allow: []string{"echo"}}}}}}
	if err := g1.Reload(&cfg); err != nil {
		t.Fatal(err)
	}
	ev := next()
	validate("ToolListChangedNotification", ev)
	if !strings.Contains(ev, "notifications/tools/list_changed") || !strings.Contains(ev, `"io.modelcontextprotocol/subscriptionId":42`) {
		t.Errorf("after reload: %s", ev)
	}
}

// TestMcpParamHeaders: a tool whose schema marks a parameter x-mcp-header
// needs the matching Mcp-Param header on a stateless call; a tool whose
// annotation breaks the rules is not offered at all.
func TestMcpParamHeaders(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hdr"}, nil)
	regionSchema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
			"limit":  map[string]any{"type": "integer", "x-mcp-header": "Limit"},
			"query":  map[string]any{"type": "string"},
		},
	}
	badSchema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"list": map[string]any{"type": "array", "items": map[string]any{"type": "string", "x-mcp-header": "Item"}},
		},
	}
	handler := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
	}
	srv.AddTool(&mcp.Tool{Name: "sql", InputSchema: regionSchema}, handler)
	srv.AddTool(&mcp.Tool{Name: "bad", InputSchema: badSchema}, handler)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(up.Close)
	url := startGateway(t, []upstreamSpec{{name: "db", url: up.URL}})

	resp, body := do(t, post2026(t, url, 1, "tools/list", ""))
	if resp.StatusCode != 200 || !strings.Contains(body, `"db__sql"`) || strings.Contains(body, `"db__bad"`) {
		t.Fatalf("tools/list: %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(body, `"x-mcp-header":"Region"`) {
		t.Errorf("the x-mcp-header annotation did not survive aggregation: %s", body)
	}
	call := func(hdrs map[string]string) (int, string) {
		r := post2026(t, url, 2, "tools/call", `"name":"db__sql","arguments":{"region":"us-west1","limit":42,"query":"x"}`,
			func(r *http.Request) {
				r.Header.Set("Mcp-Name", "db__sql")
				for k, v := range hdrs {
					r.Header.Set(k, v)
				}
			})
		resp, body := do(t, r)
		return resp.StatusCode, body
	}
	for _, tc := range []struct {
		name   string
		hdrs   map[string]string
		status int
	}{
		{"both headers", map[string]string{"Mcp-Param-Region": "us-west1", "Mcp-Param-Limit": "42"}, 200},
		{"integer compared numerically", map[string]string{"Mcp-Param-Region": "us-west1", "Mcp-Param-Limit": "42.0"}, 200},
		{"Base64 form", map[string]string{"Mcp-Param-Region": "=?base64?" + base64.StdEncoding.EncodeToString([]byte("us-west1")) + "?=", "Mcp-Param-Limit": "42"}, 200},
		{"header missing", map[string]string{"Mcp-Param-Limit": "42"}, 400},
		{"header differs", map[string]string{"Mcp-Param-Region": "eu-west1", "Mcp-Param-Limit": "42"}, 400},
	} {
		status, body := call(tc.hdrs)
		if status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.status)
		}
		if tc.status == 400 {
			if _, code := rpcError(t, body); code != -32020 {
				t.Errorf("%s: code %d", tc.name, code)
			}
		}
	}
}

// TestSDKStatelessPing: the Go SDK's 2026-07-28 client sends ping (its
// keepalive) without _meta, which that revision removed; the gateway
// answers it as the malformed request it is, as docs/hosts.md says.
func TestSDKStatelessPing(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	url := startGateway(t, []upstreamSpec{spec(a)})
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{ProtocolVersion: "2026-07-28"})
	err := cs.Ping(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "-32602") && !strings.Contains(err.Error(), "Invalid params") {
		t.Errorf("ping: %v", err)
	}
	t.Logf("the SDK reports: %v", err)
}

// TestStatelessSameIDsInFlight: two clients of one principal number their
// requests alike; both calls with id 1, in flight at once on the
// principal's shared upstream session, reach the upstream as two requests
// and are both answered.
func TestStatelessSameIDsInFlight(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	url := startGateway(t, []upstreamSpec{spec(a)})
	var wg sync.WaitGroup
	bodies := make([]string, 2)
	for i := range bodies {
		wg.Go(func() {
			_, bodies[i] = do(t, post2026(t, url, 1, "tools/call", `"name":"alpha__gate"`, func(r *http.Request) { r.Header.Set("Mcp-Name", "alpha__gate") }))
		})
	}
	waitFor(t, func() bool { return a.Count("tools/call") == 2 })
	// A call the upstream received may not have taken the gate yet:
	// release until both are answered.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for released := false; !released; {
		a.Release()
		select {
		case <-done:
			released = true
		case <-time.After(50 * time.Millisecond):
		}
	}
	for i, b := range bodies {
		if !strings.Contains(b, `"released"`) {
			t.Errorf("call %d: %s", i, b)
		}
	}
}

// TestStatelessLogLevelReachesLegacyUpstream: a 2026-07-28 caller's
// _meta logLevel makes a 2025-11-25 upstream log (the gateway sets its
// session's level once), each request gets the messages at or above its
// own level and no others, and an unknown level is invalid params.
func TestStatelessLogLevelReachesLegacyUpstream(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha") // progress logs at "info" once a level is set
	url := startGateway(t, []upstreamSpec{spec(a)})
	call := func(id int, level string) (int, string) {
		t.Helper()
		meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}`
		if level != "" {
			meta += `,"io.modelcontextprotocol/logLevel":"` + level + `"`
		}
		req := post(t, url, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{%s},"name":"alpha__progress","arguments":{"steps":2}}}`, id, meta))
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "alpha__progress")
		resp, body := do(t, req)
		return resp.StatusCode, body
	}
	for i, tc := range []struct {
		level string
		logs  int
	}{{"info", 2}, {"warning", 0}, {"", 0}, {"debug", 2}} {
		code, body := call(i+1, tc.level)
		if code != 200 || !strings.Contains(body, `"text":"done"`) {
			t.Fatalf("call with logLevel %q: %d %s", tc.level, code, body)
		}
		if n := strings.Count(body, `"method":"notifications/message"`); n != tc.logs {
			t.Errorf("call with logLevel %q: %d log messages, want %d:\n%s", tc.level, n, tc.logs, body)
		}
	}
	if n := a.Count("logging/setLevel"); n != 1 {
		t.Errorf("the upstream was sent logging/setLevel %d times, want once", n)
	}
	code, body := call(9, "loud")
	if _, rpc := rpcError(t, body); code != 400 || rpc != -32602 {
		t.Errorf("an unknown level: %d %s", code, body)
	}
}
