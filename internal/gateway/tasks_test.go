package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// The tests of tasks run @modelcontextprotocol/server-everything, whose
// simulate-research-query tool must be called as a task
// (execution.taskSupport "required") and completes in about 4 seconds; its
// tasks live in its session.

const researchTool = "ev__simulate-research-query"

// taskAuth trusts lab for tenants acme and globex, with one audience for
// every replica.
func taskAuth(lab *labIssuer) func(*config.Config) {
	return func(c *config.Config) {
		c.Auth = config.Auth{Issuers: []config.Issuer{{Name: "lab", IssuerURL: lab.url, JWKSURL: lab.url + "/jwks",
			TenantClaim: "org.tenant", Audiences: []string{"tasks-test"}}}}
		c.Tenants = []config.Tenant{{ID: "acme"}, {ID: "globex"}}
	}
}

func everythingUpstream(url string) func(*config.Config) {
	return func(c *config.Config) {
		c.Upstreams = append(c.Upstreams, config.Upstream{Name: "ev", URL: url})
	}
}

// rpcResult posts body (in session sid, if any) and returns the response
// message, from a JSON body or the last event of a stream.
func rpcResult(t *testing.T, url, token, sid, body string) map[string]any {
	t.Helper()
	resp, b := do(t, authedPost(t, url, token, sid, body))
	return decodeAnswer(t, resp, b)
}

// upstreamTaskID is the shape of server-everything's task ids (UUIDs),
// which no answer of the gateway may carry.
var upstreamTaskID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-`)

func decodeAnswer(t *testing.T, resp *http.Response, b string) map[string]any {
	t.Helper()
	if id := upstreamTaskID.FindString(b); id != "" {
		t.Errorf("an upstream's task id in an answer: %s", b)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b = lastData(b)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(b), &m); err != nil {
		t.Fatalf("%d: not a JSON-RPC message: %q", resp.StatusCode, b)
	}
	return m
}

func rpcBody(id int, method, params string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
}

// field walks m along path.
func field(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[k]
	}
	return v
}

func str(m map[string]any, path ...string) string {
	s, _ := field(m, path...).(string)
	return s
}

// wantUnknown checks an answer is exactly the one an unknown task gets.
func wantUnknown(t *testing.T, what string, m map[string]any) {
	t.Helper()
	if code, _ := field(m, "error", "code").(float64); code != -32602 || str(m, "error", "message") != "Failed to retrieve task: Task not found" {
		t.Errorf("%s: %v, want the unknown task's -32602", what, m)
	}
}

// startSession opens a session for token and checks the tasks capability.
func startSession(t *testing.T, url, token string) string {
	t.Helper()
	resp, b := do(t, authedPost(t, url, token, "", initBody))
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
	m := decodeAnswer(t, resp, b)
	caps, _ := json.Marshal(field(m, "result", "capabilities", "tasks"))
	if string(caps) != `{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}` {
		t.Errorf("tasks capability %s", caps)
	}
	do(t, authedPost(t, url, token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return sid
}

// TestTasksThroughGateway: a task-augmented tools/call through the
// gateway returns a gateway task id that tasks/get, tasks/result,
// tasks/cancel and tasks/list serve to its creator, from any of its
// sessions and on any replica (Redis, round-robin load balancer), and that
// another principal and another tenant get exactly as an unknown id.
func TestTasksThroughGateway(t *testing.T) {
	ev := testkit.StartEverythingHTTP(t)
	lab := newLabIssuer(t)
	stdio := func(c *config.Config) {
		c.Upstreams = append(c.Upstreams, config.Upstream{Name: "ev", Command: testkit.EverythingCommand(t),
			Stdio: &config.UpstreamStdio{StopGrace: config.Duration(time.Second)}})
	}
	for _, tc := range []struct {
		name     string
		up       func(*config.Config)
		replicas int
	}{{"http", everythingUpstream(ev), 1}, {"http/replicas", everythingUpstream(ev), 2}, {"stdio", stdio, 1}} {
		replicas := tc.replicas
		t.Run(tc.name, func(t *testing.T) {
			edits := []func(*config.Config){taskAuth(lab), tc.up}
			url := startGateway(t, nil, edits...)
			if replicas > 1 {
				edits = append(edits, redisStore(t))
				var backends []string
				for range replicas {
					backends = append(backends, strings.TrimSuffix(startGateway(t, nil, edits...), "/mcp"))
				}
				url = testkit.StartLB(t, backends).URL + "/mcp"
			}
			alice := labToken(t, lab, "tasks-test", "alice", "acme")
			bob := labToken(t, lab, "tasks-test", "bob", "acme")
			carol := labToken(t, lab, "tasks-test", "alice", "globex")
			sid := startSession(t, url, alice)

			tools := rpcResult(t, url, alice, sid, rpcBody(2, "tools/list", `{}`))
			listed, _ := json.Marshal(tools)
			if !strings.Contains(string(listed), `"execution":{"taskSupport":"required"}`) {
				t.Fatalf("execution.taskSupport not passed through: %s", listed)
			}

			created := rpcResult(t, url, alice, sid, rpcBody(3, "tools/call",
				`{"name":"`+researchTool+`","arguments":{"topic":"tides"},"task":{"ttl":60000}}`))
			gid := str(created, "result", "task", "taskId")
			if !strings.HasPrefix(gid, "task-") || len(gid) != 37 {
				t.Fatalf("created: %v", created)
			}
			if ttl, _ := field(created, "result", "task", "ttl").(float64); ttl <= 0 || ttl > 3600000 {
				t.Errorf("ttl %v", ttl)
			}

			got := rpcResult(t, url, alice, sid, rpcBody(4, "tasks/get", `{"taskId":"`+gid+`"}`))
			if str(got, "result", "taskId") != gid || str(got, "result", "status") == "" {
				t.Errorf("tasks/get: %v", got)
			}
			// Another session of the same principal reaches it too.
			sid2 := startSession(t, url, alice)
			if got := rpcResult(t, url, alice, sid2, rpcBody(5, "tasks/get", `{"taskId":"`+gid+`"}`)); str(got, "result", "taskId") != gid {
				t.Errorf("tasks/get from another session: %v", got)
			}

			// Another principal, another tenant, an unknown id: one answer.
			for who, tok := range map[string]string{"bob": bob, "carol": carol} {
				s := startSession(t, url, tok)
				for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
					wantUnknown(t, who+" "+m, rpcResult(t, url, tok, s, rpcBody(6, m, `{"taskId":"`+gid+`"}`)))
				}
				list := rpcResult(t, url, tok, s, rpcBody(7, "tasks/list", `{}`))
				if n := len(field(list, "result", "tasks").([]any)); n != 0 {
					t.Errorf("%s lists %d tasks", who, n)
				}
			}
			wantUnknown(t, "unknown id", rpcResult(t, url, alice, sid, rpcBody(8, "tasks/get", `{"taskId":"task-00000000000000000000000000000000"}`)))

			list := rpcResult(t, url, alice, sid, rpcBody(9, "tasks/list", `{}`))
			listedTasks, _ := json.Marshal(list)
			if !strings.Contains(string(listedTasks), gid) {
				t.Errorf("tasks/list: %s", listedTasks)
			}

			// tasks/result waits for the end and carries the gateway's id.
			res := rpcResult(t, url, alice, sid2, rpcBody(10, "tasks/result", `{"taskId":"`+gid+`"}`))
			all, _ := json.Marshal(res)
			if !strings.Contains(string(all), "Research Report") || str(res, "result", "_meta", "io.modelcontextprotocol/related-task", "taskId") != gid {
				t.Errorf("tasks/result: %s", all)
			}

			// Cancel a second task.
			created = rpcResult(t, url, alice, sid, rpcBody(11, "tools/call", `{"name":"`+researchTool+`","arguments":{"topic":"x"},"task":{}}`))
			gid2 := str(created, "result", "task", "taskId")
			cancelled := rpcResult(t, url, alice, sid, rpcBody(12, "tasks/cancel", `{"taskId":"`+gid2+`"}`))
			if str(cancelled, "result", "taskId") != gid2 || str(cancelled, "result", "status") != "cancelled" {
				t.Errorf("tasks/cancel: %v", cancelled)
			}
			got = rpcResult(t, url, alice, sid, rpcBody(13, "tasks/get", `{"taskId":"`+gid2+`"}`))
			if str(got, "result", "status") != "cancelled" {
				t.Errorf("after cancel: %v", got)
			}
			all, _ = json.Marshal(got)
			if strings.Contains(string(all), "task-") && !strings.Contains(string(all), gid2) {
				t.Errorf("an id not the gateway's: %s", all)
			}
		})
	}
}

// TestTaskBounds: a hostile client creates tasks until refused, per
// principal and per tenant, with an error naming the limit and the metric
// counting it; another tenant is untouched; tasks/list pages within
// sessions.tasks.list_page_size; a ttl beyond sessions.tasks.max_ttl is
// announced as the bound, and the task is forgotten after it.
func TestTaskBounds(t *testing.T) {
	ev := testkit.StartEverythingHTTP(t)
	lab := newLabIssuer(t)
	t.Run("memory", func(t *testing.T) { testTaskBounds(t, ev, lab, func(*config.Config) {}) })
	t.Run("redis", func(t *testing.T) { testTaskBounds(t, ev, lab, redisStore(t)) })
}

// taskBoundsTTL is max_ttl in TestTaskBounds: long enough for its checks
// on a loaded machine, which must end before the tasks expire.
const taskBoundsTTL = 4 * time.Second

func testTaskBounds(t *testing.T, ev string, lab *labIssuer, store func(*config.Config)) {
	g, url := startGatewayG(t, nil, taskAuth(lab), everythingUpstream(ev), store, func(c *config.Config) {
		c.Sessions.Tasks = config.Tasks{MaxPerPrincipal: 3, MaxPerTenant: 5, ListPageSize: 2, MaxTTL: config.Duration(taskBoundsTTL)}
	})
	create := func(tok, sid string, id int) map[string]any {
		return rpcResult(t, url, tok, sid, rpcBody(id, "tools/call", `{"name":"`+researchTool+`","arguments":{"topic":"x"},"task":{"ttl":600000}}`))
	}
	wantRefused := func(what string, m map[string]any, limit string) {
		t.Helper()
		code, _ := field(m, "error", "code").(float64)
		if msg := str(m, "error", "message"); code != -32600 || !strings.Contains(msg, "task limit "+limit) {
			t.Errorf("%s: %v, want -32600 naming %s", what, m, limit)
		}
	}
	alice := labToken(t, lab, "tasks-test", "alice", "acme")
	sid := startSession(t, url, alice)
	var made []string
	first := time.Now()
	for i := range 10 {
		m := create(alice, sid, 10+i)
		if m["error"] != nil {
			if len(made) != 3 {
				t.Fatalf("refused after %d tasks: %v", len(made), m)
			}
			wantRefused("alice's 4th task", m, "tasks.max_per_principal (3)")
			break
		}
		made = append(made, str(m, "result", "task", "taskId"))
		if ttl, _ := field(m, "result", "task", "ttl").(float64); ttl != float64(taskBoundsTTL.Milliseconds()) {
			t.Errorf("ttl %v, want the bound %v", ttl, taskBoundsTTL)
		}
	}
	// Each of alice's tasks expires max_ttl after it was made, so all of
	// them by aliceDone+max_ttl.
	aliceDone := time.Now()
	// Pages of 2: all three, once each.
	var listed []string
	cursor := ""
	for range 5 {
		params := `{}`
		if cursor != "" {
			params = `{"cursor":"` + cursor + `"}`
		}
		page := rpcResult(t, url, alice, sid, rpcBody(30, "tasks/list", params))
		tasks, _ := field(page, "result", "tasks").([]any)
		if len(tasks) > 2 {
			t.Errorf("a page of %d", len(tasks))
		}
		for _, tk := range tasks {
			listed = append(listed, tk.(map[string]any)["taskId"].(string))
		}
		if cursor = str(page, "result", "nextCursor"); cursor == "" {
			break
		}
	}
	slices.Sort(listed)
	slices.Sort(made)
	if !slices.Equal(listed, made) {
		t.Errorf("listed %v, made %v", listed, made)
	}
	wantBadCursor := rpcResult(t, url, alice, sid, rpcBody(31, "tasks/list", `{"cursor":"bm9wZQ"}`))
	if code, _ := field(wantBadCursor, "error", "code").(float64); code != -32602 {
		t.Errorf("a forged cursor: %v", wantBadCursor)
	}

	bob := labToken(t, lab, "tasks-test", "bob", "acme")
	bsid := startSession(t, url, bob)
	for i := range 3 {
		m := create(bob, bsid, 40+i)
		if i < 2 && m["error"] != nil {
			t.Fatalf("bob's task %d: %v", i, m)
		}
		if i == 2 {
			wantRefused("the tenant's 6th task", m, "tasks.max_per_tenant (5)")
		}
	}
	carol := labToken(t, lab, "tasks-test", "carol", "globex")
	if m := create(carol, startSession(t, url, carol), 50); m["error"] != nil {
		t.Errorf("another tenant: %v", m)
	}
	metrics := scrape(t, g)
	if v := metricValue(metrics, `mcpgw_limit_rejections_total{limit="tasks_per_principal",tenant="acme"}`); v != 1 {
		t.Errorf("tasks_per_principal rejections %v", v)
	}
	if v := metricValue(metrics, `mcpgw_limit_rejections_total{limit="tasks_per_tenant",tenant="acme"}`); v != 1 {
		t.Errorf("tasks_per_tenant rejections %v", v)
	}

	if time.Since(first) > taskBoundsTTL {
		t.Fatalf("the checks took longer than the tasks live (%v): they proved nothing", time.Since(first))
	}
	// After max_ttl the tasks are forgotten, and count no more. The wait is
	// the TTL under test (a real store's clock); the poll after it allows
	// for a store that forgets on its next look rather than at the instant.
	time.Sleep(time.Until(aliceDone.Add(taskBoundsTTL)))
	var m map[string]any
	testkit.Poll(5*time.Second, func() bool {
		m = rpcResult(t, url, alice, sid, rpcBody(60, "tasks/get", `{"taskId":"`+made[0]+`"}`))
		return m["error"] != nil
	})
	wantUnknown(t, "an expired task", m)
	if m := create(alice, sid, 61); m["error"] != nil {
		t.Errorf("after expiry: %v", m)
	}
}

// post2026Task builds a 2026-07-28 request of token's with client
// capabilities caps and, if name is not "", Mcp-Name.
func post2026Task(t *testing.T, url, token string, id int, method, params, caps, name string) *http.Request {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	req := authedPost(t, url, token, "", rpcBody(id, method, "{"+meta+","+params+"}"))
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	return req
}

const withTasks = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`

// TestTasksExtension2026: a 2026-07-28 client uses the Tasks extension,
// routed by Mcp-Name = the gateway's task id, on a 2025-11-25 upstream's
// tasks, on any replica: the gateway asks the upstream for a task where
// the tool requires one, answers in the extension's shape, maps tasks/get
// onto tasks/get and tasks/result, and refuses what the extension says to.
func TestTasksExtension2026(t *testing.T) {
	ev := testkit.StartEverythingHTTP(t)
	lab := newLabIssuer(t)
	edits := []func(*config.Config){taskAuth(lab), everythingUpstream(ev), redisStore(t)}
	lb := testkit.StartLB(t, []string{strings.TrimSuffix(startGateway(t, nil, edits...), "/mcp"), strings.TrimSuffix(startGateway(t, nil, edits...), "/mcp")})
	url := lb.URL + "/mcp"
	alice := labToken(t, lab, "tasks-test", "alice", "acme")
	bob := labToken(t, lab, "tasks-test", "bob", "acme")
	ask := func(tok string, id int, method, params, caps, name string) (int, map[string]any) {
		t.Helper()
		resp, b := do(t, post2026Task(t, url, tok, id, method, params, caps, name))
		return resp.StatusCode, decodeAnswer(t, resp, b)
	}
	wantCode := func(what string, status int, m map[string]any, wantStatus int, code float64) {
		t.Helper()
		if got, _ := field(m, "error", "code").(float64); status != wantStatus || got != code {
			t.Errorf("%s: %d %v, want %d %v", what, status, m, wantStatus, code)
		}
	}

	callParams := `"name":"` + researchTool + `","arguments":{"topic":"tides"}`
	status, m := ask(alice, 2, "tools/call", callParams, `{}`, researchTool)
	wantCode("a call needing a task, without the extension", status, m, 400, -32021)
	if field(m, "error", "data", "requiredCapabilities", "extensions", "io.modelcontextprotocol/tasks") == nil {
		t.Errorf("requiredCapabilities: %v", m)
	}

	status, m = ask(alice, 3, "tools/call", callParams, withTasks, researchTool)
	gid := str(m, "result", "taskId")
	if status != 200 || str(m, "result", "resultType") != "task" || !strings.HasPrefix(gid, "task-") ||
		field(m, "result", "ttlMs") == nil || field(m, "result", "ttl") != nil || str(m, "result", "status") == "" {
		t.Fatalf("created: %d %v", status, m)
	}

	// Each replica has reached the upstream by now (discover opens no
	// upstream session).
	for i := range 2 {
		_, disc := ask(alice, 20+i, "server/discover", `"x":1`, `{}`, "")
		if field(disc, "result", "capabilities", "extensions", "io.modelcontextprotocol/tasks") == nil {
			t.Errorf("server/discover: %v", disc)
		}
	}

	status, m = ask(alice, 4, "tasks/get", `"taskId":"`+gid+`"`, withTasks, "")
	wantCode("tasks/get without Mcp-Name", status, m, 400, -32020)
	status, m = ask(alice, 5, "tasks/get", `"taskId":"`+gid+`"`, `{}`, gid)
	wantCode("tasks/get without the extension", status, m, 400, -32021)
	_, m = ask(bob, 6, "tasks/get", `"taskId":"`+gid+`"`, withTasks, gid)
	wantUnknown(t, "bob's tasks/get", m)
	status, m = ask(alice, 7, "tasks/result", `"taskId":"`+gid+`"`, withTasks, "")
	wantCode("tasks/result", status, m, 404, -32601)
	status, m = ask(alice, 8, "tasks/list", `"x":1`, withTasks, "")
	wantCode("tasks/list", status, m, 404, -32601)
	if _, m = ask(alice, 9, "tasks/update", `"taskId":"`+gid+`","inputResponses":{}`, withTasks, gid); str(m, "result", "resultType") != "complete" {
		t.Errorf("tasks/update: %v", m)
	}

	// Poll until the end, as a client does: the result is inlined.
	if !testkit.Poll(20*time.Second, func() bool {
		_, m = ask(alice, 10, "tasks/get", `"taskId":"`+gid+`"`, withTasks, gid)
		if str(m, "result", "taskId") != gid || str(m, "result", "resultType") != "complete" {
			t.Fatalf("tasks/get: %v", m)
		}
		return str(m, "result", "status") != "working"
	}) {
		t.Fatalf("still working: %v", m)
	}
	if all, _ := json.Marshal(m); str(m, "result", "status") != "completed" || !strings.Contains(string(all), "Research Report") || strings.Contains(string(all), "related-task") {
		t.Errorf("at the end: %s", all)
	}

	// Cancel another.
	_, m = ask(alice, 11, "tools/call", callParams, withTasks, researchTool)
	gid2 := str(m, "result", "taskId")
	if _, m = ask(alice, 12, "tasks/cancel", `"taskId":"`+gid2+`"`, withTasks, gid2); m["result"] == nil {
		t.Errorf("tasks/cancel: %v", m)
	}
	if _, m = ask(alice, 13, "tasks/get", `"taskId":"`+gid2+`"`, withTasks, gid2); str(m, "result", "status") != "cancelled" {
		t.Errorf("after cancel: %v", m)
	}
}

// taskUpstream is a hand-written upstream with one task tool, "job", in
// either revision: its task is "up-1", its results carry a resource link,
// and in 2025-11-25 its tasks/result streams a status notification and a
// progress notification of the task first. It records each request's
// Mcp-Name and params by method.
type taskUpstream struct {
	modern bool
	id     string // its task id: "up-1" unless set
	hang   bool   // tasks/get never answers
	// ask, if set, makes the task input_required, and tasks/result
	// stream an elicitation whose message is ask, then wait.
	ask    string
	mu     sync.Mutex
	names  map[string]string
	params map[string]string
}

func newTaskUpstream(t *testing.T, modern bool) (*taskUpstream, string) {
	u := &taskUpstream{modern: modern, names: map[string]string{}, params: map[string]string{}}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return u, srv.URL + "/mcp"
}

func (u *taskUpstream) seen(method string) (name, params string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.names[method], u.params[method]
}

func (u *taskUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &m)
	u.mu.Lock()
	u.names[m.Method], u.params[m.Method] = r.Header.Get("Mcp-Name"), string(m.Params)
	if m.Method == "" {
		u.params["response"] = string(body)
	}
	u.mu.Unlock()
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	id := u.id
	if id == "" {
		id = "up-1"
	}
	task := `"taskId":"` + id + `","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z"`
	link := `{"content":[{"type":"resource_link","uri":"file:///out.txt","name":"out"}],"isError":false`
	var result string
	switch {
	case m.Method == "server/discover" && !u.modern:
		w.WriteHeader(http.StatusNotFound)
		return
	case m.Method == "server/discover":
		result = `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"1"}}}`
	case m.Method == "initialize":
		w.Header().Set("Mcp-Session-Id", "legacy-1")
		result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"l","version":"1"}}`
	case m.Method == "tools/list":
		result = `{"tools":[{"name":"job","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}`
	case m.Method == "tools/call" && u.modern:
		result = `{"resultType":"task",` + task + `,"ttlMs":null,"pollIntervalMs":100}`
	case m.Method == "tools/call":
		result = `{"task":{` + task + `,"ttl":null,"pollInterval":100}}`
	case m.Method == "tasks/get" && u.modern:
		result = `{"resultType":"complete","taskId":"up-1","status":"completed","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttlMs":null,"result":` + link + `}}`
	case m.Method == "tasks/get" && u.ask != "":
		result = `{` + strings.Replace(task, "working", "input_required", 1) + `,"ttl":null}`
	case m.Method == "tasks/result" && u.ask != "":
		w.Header().Set("Content-Type", "text/event-stream")
		ask, _ := json.Marshal(u.ask)
		fmt.Fprintf(w, "data: %s\n\n", `{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"mode":"form","message":`+string(ask)+
			`,"requestedSchema":{"type":"object","properties":{}},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}}}}`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	case m.Method == "tasks/get" && u.hang:
		<-r.Context().Done()
		return
	case m.Method == "tasks/get":
		result = `{` + strings.Replace(task, "working", "completed", 1) + `,"ttl":null}`
	case m.Method == "tasks/result":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{`+strings.Replace(task, "working", "completed", 1)+`,"ttl":null}}`)
		fmt.Fprintf(w, "data: %s\n\n", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"done","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}}`)
		fmt.Fprintf(w, "data: %s\n\n", `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+link+`,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}}`)
		return
	default:
		result = `{}`
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
}

// TestTaskIDsRewrittenEverywhere: the upstream's task id never reaches the
// client, and the gateway's never the upstream. From a 2025-11-25
// upstream, a session client sees the gateway's id in the
// CreateTaskResult, in the notifications/tasks/status and the
// related-task _meta of what tasks/result streams, and in its result, whose
// resource link is in the gateway's namespace. From a 2026-07-28 upstream,
// a 2026-07-28 client's tasks/get reaches the upstream with Mcp-Name and
// taskId its own, and an unlimited ttl comes back as the gateway's bound.
func TestTaskIDsRewrittenEverywhere(t *testing.T) {
	legacy, legacyURL := newTaskUpstream(t, false)
	modern, modernURL := newTaskUpstream(t, true)
	huge, hugeURL := newTaskUpstream(t, false)
	huge.id = strings.Repeat("x", 300)
	url := startGateway(t, []upstreamSpec{{name: "old", url: legacyURL}, {name: "new", url: modernURL}, {name: "huge", url: hugeURL}})
	sid := initialize(t, url)

	resp, b := do(t, post(t, url, sid, rpcBody(2, "tools/call", `{"name":"old__job","arguments":{},"task":{}}`)))
	m := decodeAnswer(t, resp, b)
	gid := str(m, "result", "task", "taskId")
	if !strings.HasPrefix(gid, "task-") || field(m, "result", "task", "ttl") != float64(3600000) {
		t.Fatalf("created: %v", m)
	}
	resp, b = do(t, post(t, url, sid, rpcBody(3, "tasks/result", `{"taskId":"`+gid+`"}`)))
	if strings.Contains(b, "up-1") {
		t.Errorf("the upstream's id reached the client: %s", b)
	}
	if !strings.Contains(b, `"method":"notifications/tasks/status","params":{"taskId":"`+gid+`"`) ||
		!strings.Contains(b, `"method":"notifications/message","params":{"level":"info","data":"done","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"`+gid+`"}}}`) {
		t.Errorf("tasks/result stream: %s", b)
	}
	m = decodeAnswer(t, resp, b)
	if uri := str(m["result"].(map[string]any)["content"].([]any)[0].(map[string]any), "uri"); uri == "file:///out.txt" || !strings.Contains(uri, "file:///out.txt") {
		t.Errorf("resource link %q not in the gateway's namespace", uri)
	}
	if _, params := legacy.seen("tasks/result"); !strings.Contains(params, `"taskId":"up-1"`) {
		t.Errorf("the upstream got %s", params)
	}

	// An upstream's task id is bounded: a longer one is refused, and the
	// task cancelled.
	resp, b = do(t, post(t, url, sid, rpcBody(20, "tools/call", `{"name":"huge__job","arguments":{},"task":{}}`)))
	if m = decodeAnswer(t, resp, b); field(m, "error", "code") != float64(-32603) || strings.Contains(b, huge.id) {
		t.Errorf("a 300-byte task id: %s", b)
	}
	if _, params := huge.seen("tasks/cancel"); !strings.Contains(params, huge.id) {
		t.Errorf("the task was not cancelled: %q", params)
	}

	// A 2026-07-28 client, the 2025-11-25 upstream: tasks/get inlines
	// what tasks/result streams, without its 2025-11-25 notification.
	resp, b = do(t, post2026Task(t, url, "", 21, "tools/call", `"name":"old__job","arguments":{}`, withTasks, "old__job"))
	gid21 := str(decodeAnswer(t, resp, b), "result", "taskId")
	resp, b = do(t, post2026Task(t, url, "", 22, "tasks/get", `"taskId":"`+gid21+`"`, withTasks, gid21))
	m = decodeAnswer(t, resp, b)
	if str(m, "result", "status") != "completed" || strings.Contains(b, "notifications/tasks/status") || strings.Contains(b, "up-1") ||
		strings.Contains(b, "related-task") || !strings.Contains(b, "file:///out.txt") || strings.Contains(b, `"uri":"file:///out.txt"`) {
		t.Errorf("a 2026-07-28 client's tasks/get of a 2025-11-25 task: %s", b)
	}

	// The 2026-07-28 upstream.
	resp, b = do(t, post2026Task(t, url, "", 4, "tools/call", `"name":"new__job","arguments":{}`, withTasks, "new__job"))
	m = decodeAnswer(t, resp, b)
	gid = str(m, "result", "taskId")
	if str(m, "result", "resultType") != "task" || !strings.HasPrefix(gid, "task-") || field(m, "result", "ttlMs") != float64(3600000) {
		t.Fatalf("created: %s", b)
	}
	resp, b = do(t, post2026Task(t, url, "", 5, "tasks/get", `"taskId":"`+gid+`"`, withTasks, gid))
	m = decodeAnswer(t, resp, b)
	if str(m, "result", "taskId") != gid || str(m, "result", "status") != "completed" || strings.Contains(b, "up-1") || !strings.Contains(b, "file:///out.txt") || strings.Contains(b, `"uri":"file:///out.txt"`) {
		t.Errorf("tasks/get: %s", b)
	}
	if name, params := modern.seen("tasks/get"); name != "up-1" || !strings.Contains(params, `"taskId":"up-1"`) || strings.Contains(params, gid) {
		t.Errorf("the upstream got Mcp-Name %q and %s", name, params)
	}
	if _, b = do(t, post2026Task(t, url, "", 6, "tasks/cancel", `"taskId":"`+gid+`"`, withTasks, gid)); !strings.Contains(b, `"result"`) {
		t.Errorf("tasks/cancel: %s", b)
	}
	if name, _ := modern.seen("tasks/cancel"); name != "up-1" {
		t.Errorf("tasks/cancel reached the upstream with Mcp-Name %q", name)
	}
	// A session client is not offered the 2026-07-28 upstream's tasks.
	resp, b = do(t, post(t, url, sid, rpcBody(7, "tasks/get", `{"taskId":"`+gid+`"}`)))
	wantUnknown(t, "a session client, the 2026-07-28 task", decodeAnswer(t, resp, b))
}

// TestTaskInputRequired: server-everything's research on an ambiguous
// topic moves its task to input_required and asks for an elicitation on
// tasks/result's stream; through the gateway the request names the
// gateway's task id, the client's answer reaches the upstream, and the
// task completes with it.
func TestTaskInputRequired(t *testing.T) {
	ev := testkit.StartEverythingHTTP(t)
	url := startGateway(t, nil, everythingUpstream(ev))
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":"t","version":"0"}}}`
	resp, b := do(t, post(t, url, "", init))
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %s", b)
	}
	do(t, post(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))

	resp, b = do(t, post(t, url, sid, rpcBody(2, "tools/call", `{"name":"`+researchTool+`","arguments":{"topic":"python","ambiguous":true},"task":{}}`)))
	gid := str(decodeAnswer(t, resp, b), "result", "task", "taskId")
	if gid == "" {
		t.Fatalf("created: %s", b)
	}
	if !testkit.Poll(15*time.Second, func() bool {
		resp, b = do(t, post(t, url, sid, rpcBody(3, "tasks/get", `{"taskId":"`+gid+`"}`)))
		s := str(decodeAnswer(t, resp, b), "result", "status")
		if s != "working" && s != "input_required" {
			t.Fatalf("tasks/get: %s", b)
		}
		return s == "input_required"
	}) {
		t.Fatalf("tasks/get: %s", b)
	}

	req := post(t, url, sid, rpcBody(4, "tasks/result", `{"taskId":"`+gid+`"}`))
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	events := sseData(r.Body)
	var ask map[string]any
	for ask == nil {
		d := nextData(t, events)
		var m map[string]any
		_ = json.Unmarshal([]byte(d), &m)
		if m["method"] == "elicitation/create" {
			ask = m
		} else if m["id"] != nil {
			t.Fatalf("a result before the elicitation: %s", d)
		}
	}
	if got := str(ask, "params", "_meta", "io.modelcontextprotocol/related-task", "taskId"); got != gid {
		t.Errorf("the elicitation names task %q, want %s: %v", got, gid, ask)
	}
	answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": ask["id"],
		"result": map[string]any{"action": "accept", "content": map[string]any{"interpretation": "snake"}}})
	if resp, b := do(t, post(t, url, sid, string(answer))); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("answer: %d %s", resp.StatusCode, b)
	}
	for {
		d := nextData(t, events)
		if strings.Contains(d, `"result"`) {
			if !strings.Contains(d, "snake") || !strings.Contains(d, gid) {
				t.Errorf("result: %s", d)
			}
			break
		}
	}
}

// TestTasksExtensionInput: a 2026-07-28 client, on any replica, answers a
// 2025-11-25 upstream's request for input during a task: tasks/get shows
// the elicitation server-everything asks on tasks/result's stream as
// inputRequests (naming the gateway's task id), tasks/update answers it,
// and the task completes with the answer. Without the elicitation
// capability, the upstream is not asked to elicit, and the task goes on.
func TestTasksExtensionInput(t *testing.T) {
	ev := testkit.StartEverythingHTTP(t)
	edits := []func(*config.Config){everythingUpstream(ev), redisStore(t)}
	lb := testkit.StartLB(t, []string{strings.TrimSuffix(startGateway(t, nil, edits...), "/mcp"), strings.TrimSuffix(startGateway(t, nil, edits...), "/mcp")})
	url := lb.URL + "/mcp"
	caps := `{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	ask := func(id int, method, params, name string) (string, map[string]any) {
		t.Helper()
		resp, b := do(t, post2026Task(t, url, "", id, method, params, caps, name))
		return b, decodeAnswer(t, resp, b)
	}
	var gid string
	create := func() {
		t.Helper()
		_, m := ask(1, "tools/call", `"name":"`+researchTool+`","arguments":{"topic":"python","ambiguous":true}`, researchTool)
		if gid = str(m, "result", "taskId"); gid == "" {
			t.Fatalf("created: %v", m)
		}
	}
	poll := func(want string) map[string]any {
		t.Helper()
		var b string
		var m map[string]any
		if !testkit.Poll(20*time.Second, func() bool {
			b, m = ask(2, "tasks/get", `"taskId":"`+gid+`"`, gid)
			if m["error"] != nil {
				t.Fatalf("waiting for %s: %s", want, b)
			}
			return str(m, "result", "status") == want
		}) {
			t.Fatalf("waiting for %s: %s", want, b)
		}
		return m
	}
	create()
	m := poll("input_required")
	reqs, _ := field(m, "result", "inputRequests").(map[string]any)
	if len(reqs) != 1 {
		t.Fatalf("inputRequests: %v", m)
	}
	var key string
	for k, v := range reqs {
		key = k
		r := v.(map[string]any)
		if r["method"] != "elicitation/create" || str(r, "params", "_meta", "io.modelcontextprotocol/related-task", "taskId") != gid {
			t.Errorf("input request: %v", r)
		}
	}
	// Polled again, the same request, kept.
	if m = poll("input_required"); field(m, "result", "inputRequests", key) == nil {
		t.Errorf("second poll: %v", m)
	}
	if _, m = ask(3, "tasks/update", `"taskId":"`+gid+`","inputResponses":{"`+key+`":{"action":"accept","content":{"interpretation":"snake"}},"bogus":{}}`, gid); m["result"] == nil {
		t.Fatalf("tasks/update: %v", m)
	}
	m = poll("completed")
	if all, _ := json.Marshal(m); !strings.Contains(string(all), "snake") {
		t.Errorf("result: %s", all)
	}

	// Without the capability, the upstream session is not announced it
	// (internal/announce): the upstream does not ask, and the task goes on.
	caps = withTasks
	create()
	m = poll("completed")
	if all, _ := json.Marshal(m); strings.Contains(string(all), "snake") || m["error"] != nil {
		t.Errorf("without elicitation: %s", all)
	}

	// An upstream that asks anyway is refused, and the task goes on.
	target, _ := neturl.Parse(ev)
	proxy := httptest.NewServer(testkit.AssumeCapable(httputil.NewSingleHostReverseProxy(&neturl.URL{Scheme: target.Scheme, Host: target.Host})))
	t.Cleanup(proxy.Close)
	url = startGateway(t, nil, everythingUpstream(proxy.URL+target.Path))
	create()
	m = poll("completed")
	if all, _ := json.Marshal(m); !strings.Contains(string(all), "elicitation unavailable") {
		t.Errorf("without elicitation, from an upstream that asks anyway: %s", all)
	}
}

// TestTaskListNotHeldUp: tasks/list refreshes each task from its upstream
// within half the request timeout; a task whose upstream does not answer
// is left out of the page, the others are listed.
func TestTaskListNotHeldUp(t *testing.T) {
	_, okURL := newTaskUpstream(t, false)
	slow, slowURL := newTaskUpstream(t, false)
	slow.hang = true
	url := startGateway(t, []upstreamSpec{{name: "ok", url: okURL}, {name: "slow", url: slowURL}}, func(c *config.Config) {
		c.Server.RequestTimeout = config.Duration(2 * time.Second)
	})
	sid := initialize(t, url)
	var ids []string
	for i, name := range []string{"ok__job", "slow__job"} {
		resp, b := do(t, post(t, url, sid, rpcBody(2+i, "tools/call", `{"name":"`+name+`","arguments":{},"task":{}}`)))
		ids = append(ids, str(decodeAnswer(t, resp, b), "result", "task", "taskId"))
	}
	start := time.Now()
	resp, b := do(t, post(t, url, sid, rpcBody(5, "tasks/list", `{}`)))
	if d := time.Since(start); d > 1900*time.Millisecond {
		t.Errorf("tasks/list took %v", d)
	}
	m := decodeAnswer(t, resp, b)
	tasks, _ := field(m, "result", "tasks").([]any)
	if len(tasks) != 1 || !strings.Contains(b, ids[0]) || strings.Contains(b, ids[1]) {
		t.Errorf("tasks/list: %s", b)
	}
}

// TestTaskInputBounded: the request for input a 2025-11-25 upstream's
// task waits on reaches a 2026-07-28 client as inputRequests and its
// answer the upstream as the response to its request; one over the bound
// a task record keeps (256 KiB) is refused to the upstream, and the task
// shown as working.
func TestTaskInputBounded(t *testing.T) {
	small, smallURL := newTaskUpstream(t, false)
	small.ask = "your name?"
	big, bigURL := newTaskUpstream(t, false)
	big.ask = strings.Repeat("x", 300<<10)
	url := startGateway(t, []upstreamSpec{{name: "small", url: smallURL}, {name: "big", url: bigURL}})
	const caps = `{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	get := func(name string) (string, map[string]any) {
		resp, b := do(t, post2026Task(t, url, "", 1, "tools/call", `"name":"`+name+`","arguments":{}`, caps, name))
		gid := str(decodeAnswer(t, resp, b), "result", "taskId")
		resp, b = do(t, post2026Task(t, url, "", 2, "tasks/get", `"taskId":"`+gid+`"`, caps, gid))
		return gid, decodeAnswer(t, resp, b)
	}
	gid, m := get("small__job")
	reqs, _ := field(m, "result", "inputRequests").(map[string]any)
	if str(m, "result", "status") != "input_required" || len(reqs) != 1 {
		t.Fatalf("tasks/get: %v", m)
	}
	for key, r := range reqs {
		if str(r.(map[string]any), "params", "message") != "your name?" {
			t.Errorf("input request %v", r)
		}
		resp, b := do(t, post2026Task(t, url, "", 3, "tasks/update", `"taskId":"`+gid+`","inputResponses":{"`+key+`":{"action":"accept","content":{"name":"Ada"}}}`, caps, gid))
		if decodeAnswer(t, resp, b)["result"] == nil {
			t.Fatalf("tasks/update: %s", b)
		}
	}
	if _, resp := small.seen("response"); !strings.Contains(resp, `"id":"e1"`) || !strings.Contains(resp, `"Ada"`) {
		t.Errorf("the upstream got %s", resp)
	}

	_, m = get("big__job")
	if str(m, "result", "status") != "working" || field(m, "result", "inputRequests") != nil {
		t.Errorf("an input request over the bound: %v", m)
	}
	if _, resp := big.seen("response"); !strings.Contains(resp, `"id":"e1"`) || !strings.Contains(resp, `"error"`) {
		t.Errorf("the upstream got %.200s", resp)
	}
}

// TestTaskStatusOnTheSessionStream: the status notifications an upstream
// sends on its own GET stream reach the session's GET stream with the
// gateway's task id, never the upstream's.
func TestTaskStatusOnTheSessionStream(t *testing.T) {
	url := startGateway(t, nil, everythingUpstream(testkit.StartEverythingHTTP(t)))
	resp, b := do(t, post(t, url, "", initBody))
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
	do(t, post(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	// A log level gives the session something to hear from the upstream's
	// own stream.
	do(t, post(t, url, sid, rpcBody(2, "logging/setLevel", `{"level":"error"}`)))
	lines := openStreamLines(t, url, sid)
	created := rpcResult(t, url, "", sid, rpcBody(3, "tools/call",
		`{"name":"`+researchTool+`","arguments":{"topic":"tides"},"task":{"ttl":60000}}`))
	gid := str(created, "result", "task", "taskId")
	if !strings.HasPrefix(gid, "task-") {
		t.Fatalf("created: %v", created)
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the GET stream ended")
			}
			if upstreamTaskID.MatchString(line) {
				t.Fatalf("an upstream's task id on the session stream: %s", line)
			}
			if strings.Contains(line, "notifications/tasks/status") {
				if !strings.Contains(line, `"taskId":"`+gid+`"`) {
					t.Fatalf("status without the gateway's id: %s", line)
				}
				return
			}
		case <-deadline:
			t.Fatal("no notifications/tasks/status on the session's GET stream")
		}
	}
}
