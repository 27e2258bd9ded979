package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestTraceTravelsEndToEnd sends a request with a traceparent (in the HTTP
// header, and in params._meta) and checks that the upstream saw the same
// trace in both places, and that the gateway's spans form one tree.
func TestTraceTravelsEndToEnd(t *testing.T) {
	tp, exp := telemetry.NewTestTracerProvider()
	a := testkit.NewUpstream(t, "alpha")
	_, url := startGatewayWith(t, gateway.Options{TracerProvider: tp}, []upstreamSpec{spec(a)})
	sid := initialize(t, url)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const clientSpan = "00f067aa0ba902b7"
	traceparent := "00-" + traceID + "-" + clientSpan + "-01"
	exp.Reset()

	// The header carries the context; the upstream must see it in both
	// its headers and its _meta.
	req := post(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__headers"}}`)
	req.Header.Set("traceparent", traceparent)
	resp, body := do(t, req)
	if resp.StatusCode != 200 || !strings.Contains(body, traceID) {
		t.Fatalf("upstream headers did not carry the trace: %d %s", resp.StatusCode, body)
	}
	req = post(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__meta","_meta":{"traceparent":"`+traceparent+`","vendor/x":1}}}`)
	req.Header.Set("traceparent", traceparent)
	resp, body = do(t, req)
	if resp.StatusCode != 200 || !strings.Contains(body, `"traceparent":"00-`+traceID) || !strings.Contains(body, `"vendor/x":1`) {
		t.Fatalf("upstream _meta did not carry the trace (or lost a member): %d %s", resp.StatusCode, body)
	}

	spans := exp.GetSpans()
	byID := map[trace.SpanID]string{}
	var server, client int
	for _, s := range spans {
		if s.SpanContext.TraceID().String() != traceID {
			t.Errorf("span %q is in trace %s, not the client's", s.Name, s.SpanContext.TraceID())
		}
		byID[s.SpanContext.SpanID()] = s.Name
		switch s.SpanKind {
		case trace.SpanKindServer:
			server++
		case trace.SpanKindClient:
			client++
		}
	}
	// Every span's parent is the client's span or another of ours: one tree.
	for _, s := range spans {
		p := s.Parent.SpanID()
		if p.String() != clientSpan && byID[p] == "" {
			t.Errorf("span %q has a parent (%s) outside the tree", s.Name, p)
		}
	}
	if server < 4 || client < 2 {
		t.Errorf("got %d server and %d client spans, want ≥4 and ≥2 (HTTP + MCP per request, one per upstream call)", server, client)
	}
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "tools/call alpha__meta") {
		t.Errorf("span names %v lack the MCP span of the call", names)
	}

	// _meta alone: it parents the MCP span (it is the message's own
	// context), which links the HTTP request's span.
	exp.Reset()
	req = post(t, url, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__meta","_meta":{"traceparent":"`+traceparent+`"}}}`)
	if resp, body := do(t, req); resp.StatusCode != 200 || !strings.Contains(body, traceID) {
		t.Fatalf("_meta only: %d %s", resp.StatusCode, body)
	}
	for _, s := range exp.GetSpans() {
		if s.Name == "tools/call alpha__meta" {
			if s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != clientSpan || len(s.Links) != 1 {
				t.Errorf("MCP span from _meta: trace %s parent %s links %d", s.SpanContext.TraceID(), s.Parent.SpanID(), len(s.Links))
			}
		}
	}
}

// syncBuffer is a goroutine-safe buffer for log output.
type syncBuffer = testkit.SyncBuffer

// TestMetricsAndAuditLog runs a scripted session with real tokens, then
// scrapes /metrics and reads the audit log: both tell what happened, and
// no log line holds the token or a configured secret.
func TestMetricsAndAuditLog(t *testing.T) {
	idp := testkit.StartIDP(t, idpClients)
	a := testkit.NewUpstream(t, "alpha")
	down := testkit.NewUpstream(t, "down")
	var auditLog syncBuffer
	const secret = "upstream-secret-value"
	sa := spec(a)
	sa.headers = map[string]string{"Authorization": "Bearer " + secret}
	g, url := startGatewayWith(t, gateway.Options{Audit: audit.New(&auditLog)}, []upstreamSpec{sa, spec(down)}, func(c *config.Config) {
		c.Auth = config.Auth{
			Issuers:        []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}},
			RequiredScopes: []string{"mcp"},
		}
		c.Tenants = []config.Tenant{{ID: "acme", Upstreams: []config.TenantUpstream{
			{Name: "alpha", Tools: config.Rules{Deny: []string{"block"}}},
			{Name: "down"},
		}}}
		c.Upstreams[0].AuditArguments = config.AuditArgumentsRedacted
	})
	admin := httptest.NewServer(g.AdminHandler())
	t.Cleanup(admin.Close)
	token := idp.Token(t, "acme-app", url, "mcp")
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + token}}})
	ctx := context.Background()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "private words"}}); err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__fail"}); err != nil || !res.IsError {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__block"}); err == nil {
		t.Fatal("a denied tool was called")
	}
	down.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "down__echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Fatal("a call to a down upstream succeeded")
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "alpha+test://alpha/readme"}); err != nil {
		t.Fatal(err)
	}
	// An auth failure.
	if resp, _ := do(t, post(t, url, "", initBody)); resp.StatusCode != 401 {
		t.Fatalf("no token: %d", resp.StatusCode)
	}

	resp, err := http.Get(admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(b)
	for _, want := range []string{
		`mcpgw_requests_total{method="tools/call",outcome="ok",tenant="acme"} 1`,
		`mcpgw_requests_total{method="tools/call",outcome="tool_error",tenant="acme"} 1`,
		`mcpgw_requests_total{method="tools/call",outcome="denied",tenant="acme"} 1`,
		`mcpgw_requests_total{method="tools/list",outcome="ok",tenant="acme"} 1`,
		`mcpgw_request_duration_seconds_bucket{method="tools/call",tenant="acme",le="+Inf"}`,
		`mcpgw_upstream_requests_total{method="tools/call",outcome="ok",upstream="alpha"} 2`,
		`mcpgw_upstream_request_duration_seconds_count{method="tools/list",upstream="alpha"}`,
		`mcpgw_tool_calls_total{outcome="ok",tenant="acme",tool="echo",upstream="alpha"} 1`,
		`mcpgw_tool_calls_total{outcome="tool_error",tenant="acme",tool="fail",upstream="alpha"} 1`,
		`mcpgw_auth_failures_total{reason="missing token"} 1`,
		`mcpgw_policy_denials_total{kind="tool",tenant="acme",upstream="alpha"} 1`,
		`mcpgw_sessions_active`,
		`mcpgw_sse_streams_open`,
		`mcpgw_config_generation 1`,
		`go_goroutines`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(metrics, "session_id") || strings.Contains(metrics, "acme-app") {
		t.Error("a session or subject id is a metric label")
	}

	// The audit log: one record per call, allowed, denied and failed.
	type rec struct {
		Event, Tenant, Subject, ClientID, SessionID, Method, Upstream, Tool, URI, Decision, Outcome, Arguments, Reason string
	}
	var recs []rec
	for _, line := range strings.Split(strings.TrimSpace(auditLog.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line is not JSON: %s", line)
		}
		get := func(k string) string { s, _ := m[k].(string); return s }
		recs = append(recs, rec{get("event"), get("tenant"), get("subject"), get("client_id"), get("session_id"), get("method"),
			get("upstream"), get("tool"), get("uri"), get("decision"), get("outcome"), get("arguments"), get("reason")})
	}
	want := []rec{
		{Event: "tools/call", Tool: "echo", Decision: "allow", Outcome: "ok", Upstream: "alpha", Arguments: `{"text":"REDACTED"}`},
		{Event: "tools/call", Tool: "fail", Decision: "allow", Outcome: "is_error", Upstream: "alpha"},
		{Event: "policy_denial", Tool: "block", Decision: "deny", Outcome: "denied", Upstream: "alpha"},
		{Event: "tools/call", Tool: "echo", Decision: "allow", Outcome: "error", Upstream: "down"},
		{Event: "resources/read", URI: "test://alpha/readme", Decision: "allow", Outcome: "ok", Upstream: "alpha"},
		{Event: "auth_failure", Decision: "deny", Outcome: "denied", Reason: "missing token"},
	}
	if len(recs) != len(want) {
		t.Fatalf("got %d audit records, want %d:\n%s", len(recs), len(want), auditLog.String())
	}
	for i, w := range want {
		r := recs[i]
		if r.Event != w.Event || r.Tool != w.Tool || r.URI != w.URI || r.Decision != w.Decision || r.Outcome != w.Outcome ||
			r.Upstream != w.Upstream || (w.Arguments != "" && r.Arguments != w.Arguments) || (w.Reason != "" && r.Reason != w.Reason) {
			t.Errorf("audit record %d = %+v, want %+v", i, r, w)
		}
		if w.Event != "auth_failure" && (r.Tenant != "acme" || r.Subject != "acme-app" || r.SessionID == "" || r.Method == "") {
			t.Errorf("audit record %d lacks who and where: %+v", i, r)
		}
	}
	if r := recs[3]; r.Reason == "" {
		t.Errorf("failed call without a reason: %+v", r)
	}
	for _, s := range []string{token, secret, "private words"} {
		if strings.Contains(auditLog.String(), s) {
			t.Errorf("the audit log contains %q", s)
		}
	}
}

// TestClientHangUpIsNoError: a client that hangs up during a call is no
// failure of the gateway's: nothing is logged above Info, and the upstream
// hears of the cancellation.
func TestClientHangUpIsNoError(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	var logs syncBuffer
	_, url := startGatewayWith(t, gateway.Options{
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, []upstreamSpec{spec(a)})
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		var req *http.Request
		if v == "2026-07-28" {
			req = post2026(t, url, 1, "tools/call", `"name":"alpha__block"`, func(r *http.Request) { r.Header.Set("Mcp-Name", "alpha__block") })
		} else {
			req = post(t, url, initialize(t, url), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__block"}}`)
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		if resp, err := http.DefaultClient.Do(req.WithContext(ctx)); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body) // until the hang-up
			resp.Body.Close()
		}
		select {
		case <-a.Cancelled():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the upstream did not hear of the hang-up", v)
		}
	}
	time.Sleep(100 * time.Millisecond) // the handlers' last words
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, `"level":"WARN"`) {
			t.Errorf("logged: %s", line)
		}
	}
}
