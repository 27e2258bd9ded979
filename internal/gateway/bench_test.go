package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/tenant"
	"github.com/mcpgw/gateway/internal/testkit"
)

// BenchmarkToolsCall measures one tools/call through an in-process gateway
// to a raw JSON upstream (which echoes the params into its result), for a
// small and a 10 KB argument: the gateway's own cost per call, with the
// arguments checked against the tool's inputSchema (the default) and not
// (validation.arguments off).
func BenchmarkToolsCall(b *testing.B) {
	raw := testkit.NewRawUpstream(b)
	for _, validate := range []string{config.ValidationEnforce, config.ValidationOff} {
		for _, size := range []int{100, 10000} {
			b.Run("validate="+validate+"/"+strconv.Itoa(size)+"B", func(b *testing.B) {
				url := startGateway(b, []upstreamSpec{{name: "raw", url: raw.URL}}, func(c *config.Config) {
					c.Upstreams[0].Validation = &config.UpstreamValidation{Arguments: validate}
				})
				benchCalls(b, url, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"raw__raw","arguments":{"q":"`+strings.Repeat("x", size)+`"}}}`)
			})
		}
	}
}

// BenchmarkToolsCallSSE is BenchmarkToolsCall with an upstream that answers
// tools/call with an event stream, as the go-sdk servers of
// bench/compare.sh do: the gateway then relays an SSE answer.
func BenchmarkToolsCallSSE(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(sseEchoUpstream))
	b.Cleanup(up.Close)
	for _, size := range []int{100, 10000} {
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			url := startGateway(b, []upstreamSpec{{name: "up", url: up.URL + "/mcp"}})
			benchCalls(b, url, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{"text":"`+strings.Repeat("x", size)+`"}}}`)
		})
	}
}

func benchCalls(b *testing.B, url, body string) {
	sid := initialize(b, url)
	client := &http.Client{}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(out, []byte(`"id":7`)) {
			b.Fatalf("%d %s", resp.StatusCode, out)
		}
	}
}

// sseEchoUpstream is a minimal MCP server with one tool, echo, whose
// result is its text argument; it answers tools/call with an event stream
// of that one response and everything else with JSON.
func sseEchoUpstream(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusOK)
		return
	}
	body, _ := io.ReadAll(r.Body)
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if msg.Kind != jsonrpc.KindRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result string
	switch msg.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "sse-session")
		result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"sse","version":"1"}}`
	case "tools/list":
		result = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
	case "tools/call":
		p, _ := jsonx.ParseObject(msg.Params)
		a, _ := jsonx.ParseObject(p.Get("arguments"))
		result = `{"content":[{"type":"text","text":` + string(a.Get("text")) + `}]}`
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "event: message\ndata: "+string(jsonrpc.AppendResult(nil, msg.ID, []byte(result)))+"\n\n")
		return
	default:
		result = `{}`
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(jsonrpc.AppendResult(nil, msg.ID, []byte(result)))
}

// BenchmarkToolsCallCredentials is BenchmarkToolsCall/100B with each way
// of authenticating to the upstream, caches warm: the per-call cost of a
// mode next to static headers.
func BenchmarkToolsCallCredentials(b *testing.B) {
	raw := testkit.NewRawUpstream(b)
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"bench-token","token_type":"Bearer","expires_in":3600}`)
	}))
	b.Cleanup(tokens.Close)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"raw__raw","arguments":{"q":"` + strings.Repeat("x", 100) + `"}}}`
	for _, mode := range []struct {
		name string
		edit func(*config.Config)
	}{
		{"static", func(c *config.Config) {
			c.Upstreams[0].Headers = map[string]string{"Authorization": "Bearer static-key"}
		}},
		{"tenant_static", func(c *config.Config) {
			c.Tenants = []config.Tenant{{ID: tenant.DefaultID, Upstreams: []config.TenantUpstream{{Name: "raw", Headers: map[string]string{"Authorization": "Bearer tenant-key"}}}}}
		}},
		{"client_credentials", func(c *config.Config) {
			c.Upstreams[0].Auth = &config.UpstreamAuth{Mode: config.AuthClientCredentials, TokenURL: tokens.URL, ClientID: "gw", ClientSecret: "gw-secret"}
		}},
		{"signed_identity", func(c *config.Config) {
			c.Upstreams[0].Auth = &config.UpstreamAuth{Mode: config.AuthSignedIdentity}
		}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			url := startGateway(b, []upstreamSpec{{name: "raw", url: raw.URL}}, mode.edit)
			benchCalls(b, url, body)
		})
	}
}

// BenchmarkToolsCallBudgets is BenchmarkToolsCall/100B with budgets that
// apply to every call and never refuse one (a rate limit of every
// request, one per tool, a daily quota, a concurrency bound and a circuit
// breaker), counted in process or in Redis, next to none: the per-call
// cost of budgets.
func BenchmarkToolsCallBudgets(b *testing.B) {
	raw := testkit.NewRawUpstream(b)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"raw__raw","arguments":{"q":"` + strings.Repeat("x", 100) + `"}}}`
	budgets := func(c *config.Config) {
		c.Upstreams[0].Concurrency = &config.Concurrency{MaxInFlight: 1000}
		c.Upstreams[0].CircuitBreaker = &config.CircuitBreaker{Failures: 1000}
		c.Budgets.RateLimits = []config.RateLimit{
			{Name: "per-user", Per: []string{config.PerPrincipal}, Requests: 1_000_000},
			{Name: "per-tool", Per: []string{config.PerPrincipal, config.PerTool}, Requests: 1_000_000},
		}
		c.Budgets.Quotas = []config.Quota{{Name: "daily", Calls: 1_000_000_000}}
	}
	for _, v := range []struct {
		name  string
		edits []func(*config.Config)
	}{
		{"none", nil},
		{"memory", []func(*config.Config){budgets}},
		{"redis-none", []func(*config.Config){redisStore(b)}},
		{"redis", []func(*config.Config){redisStore(b), budgets}},
		// Without the rule of every request: the call's rules alone, one
		// round trip however many apply.
		{"redis-calls", []func(*config.Config){redisStore(b), budgets, func(c *config.Config) { c.Budgets.RateLimits = c.Budgets.RateLimits[1:] }}},
	} {
		b.Run(v.name, func(b *testing.B) {
			url := startGateway(b, []upstreamSpec{{name: "raw", url: raw.URL}}, v.edits...)
			benchCalls(b, url, body)
		})
	}
}

// BenchmarkToolsCallPolicy is BenchmarkToolsCall (100 B and 10 KB) with policy rules
// next to none: 20 pattern rules (on other tools) and 10 CEL rules (on
// this one, whose conditions never hold), half of each in the list phase
// and half in the call phase, so that every call tries them all and the
// default allows it: the per-call cost of the rules (issue 29).
func BenchmarkToolsCallPolicy(b *testing.B) {
	raw := testkit.NewRawUpstream(b)
	rules := func(c *config.Config) {
		var ps []config.PolicyRule
		for i := range 20 {
			phase := config.PhaseList
			if i%2 == 1 {
				phase = config.PhaseCall
			}
			ps = append(ps, config.PolicyRule{Phase: phase, Match: config.PolicyMatch{Tools: []string{"other_" + strconv.Itoa(i) + "_*"}}, Effect: config.EffectDeny})
		}
		for i := range 10 {
			phase, cel := config.PhaseList, `principal.subject == "nobody-`+strconv.Itoa(i)+`"`
			if i%2 == 1 {
				phase, cel = config.PhaseCall, `has(arguments.q) && arguments.q == "never-`+strconv.Itoa(i)+`"`
			}
			ps = append(ps, config.PolicyRule{Phase: phase, Match: config.PolicyMatch{Tools: []string{"raw"}},
				When: &config.PolicyCondition{CEL: cel}, Effect: config.EffectDeny})
		}
		c.Tenants = []config.Tenant{{ID: "default", Policy: ps}}
	}
	for _, size := range []int{100, 10240} {
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"raw__raw","arguments":{"q":"` + strings.Repeat("x", size) + `"}}}`
		for _, v := range []struct {
			name  string
			edits []func(*config.Config)
		}{
			{"none", nil},
			{"rules", []func(*config.Config){rules}},
		} {
			b.Run(strconv.Itoa(size)+"B/"+v.name, func(b *testing.B) {
				url := startGateway(b, []upstreamSpec{{name: "raw", url: raw.URL}}, v.edits...)
				benchCalls(b, url, body)
			})
		}
	}
}

// BenchmarkToolsCallGuards is BenchmarkToolsCallSSE/10000B with an issue
// tracker's prose as the echoed text, without guards and with the
// built-in credential and personal-data guards on results: the per-call
// cost of inspecting a 10 KB result that holds nothing to redact (issue
// 30).
func BenchmarkToolsCallGuards(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(sseEchoUpstream))
	b.Cleanup(up.Close)
	const line = "Crash in the exporter when batch 7 exceeds the limit: run it with 3 workers, v1.4.2, " +
		"then wait 30s; it exits with code 137. See https://tracker.example.com/acme/api/issues/4107 (opened 2025-03-08T10:07:00Z by dev-7). "
	text := strings.Repeat(line, 10240/len(line)+1)[:10240]
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{"text":"` + text + `"}}}`
	for _, v := range []struct {
		name   string
		guards []config.Guard
	}{
		{"none", nil},
		{"guards", []config.Guard{{Detect: []string{"credentials", "personal_data"}, Phases: []string{"results"}}}},
	} {
		b.Run(v.name, func(b *testing.B) {
			url := startGateway(b, []upstreamSpec{{name: "up", url: up.URL + "/mcp"}}, func(c *config.Config) {
				c.Upstreams[0].Guards = v.guards
			})
			benchCalls(b, url, body)
		})
	}
}
