package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

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
	for _, replicas := range []int{1, 2} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			edits := []func(*config.Config){taskAuth(lab), everythingUpstream(ev)}
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
