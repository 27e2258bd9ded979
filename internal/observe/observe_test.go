package observe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/guard"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/rpcerr"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// fixture is a Recorder writing metrics to a private registry and the
// audit log to a buffer.
type fixture struct {
	rec *Recorder
	reg *prometheus.Registry
	buf bytes.Buffer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{reg: prometheus.NewRegistry()}
	f.rec = New(telemetry.NewMetrics(f.reg), nil, audit.New(&f.buf), nil)
	return f
}

// value is the value of the metric name with exactly labels, or 0 if it
// was not recorded.
func (f *fixture) value(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue next
				}
			}
			return metricValue(m)
		}
	}
	return 0
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// lines decodes the audit lines written so far, without the keys that
// change from run to run (time, duration_ms, trace_id) and those every
// line has (level, msg).
func (f *fixture) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(f.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q is not JSON: %v", sc.Text(), err)
		}
		for _, k := range []string{"time", "duration_ms", "trace_id", "level", "msg"} {
			delete(m, k)
		}
		out = append(out, m)
	}
	return out
}

var who = Caller{Tenant: "acme", Subject: "alice", ClientID: "vscode", SessionID: "s-1", ProtocolVersion: "2025-11-25"}

// upstreams is the audit's view of the one configured upstream, github.
func upstreams(name string) (Upstream, bool) {
	if name != "github" {
		return Upstream{}, false
	}
	return Upstream{AuditArguments: "redacted", Credentials: "token_exchange"}, true
}

func toolCall() Call {
	return Call{
		Caller: who, Method: "tools/call", ID: jsonrpc.IntID(7), Params: json.RawMessage(`{"name":"gh_create_issue"}`),
		Target: TargetTool, Audited: true, Upstream: upstreams,
	}
}

var routed = Route{Upstream: "github", Exposed: "gh_create_issue", Original: "create_issue", Arguments: json.RawMessage(`{"title":"x"}`)}

// serve records one request that ends with res and err.
func (f *fixture) serve(ctx context.Context, call Call, route Route, res json.RawMessage, err error) {
	ctx, o := f.rec.Start(ctx, call)
	defer o.End()
	o.Record(ctx, route, res, err)
}

// TestToolCall: each way a tools/call ends gives its outcome label to the
// request and tool-call metrics, counts the denials and refusals it is,
// and writes one audit record with its outcome and reason.
func TestToolCall(t *testing.T) {
	cancelledCtx, cancel := context.WithCancelCause(context.Background())
	cancel(rpcerr.ErrCancelledByClient)
	hidden := Route{Exposed: "gh_secret"} // the resolve failed: nothing routed yet
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		route   Route
		res     json.RawMessage
		err     error
		outcome string
		// denial is the policy-denial metric's labels; nil: none counted.
		denial map[string]string
		// budget is the budget-refusal metric's labels; nil: none counted.
		budget map[string]string
		// record is the audit record, besides the caller and method.
		record map[string]any
	}{{
		name: "ok", route: routed, res: json.RawMessage(`{"content":[]}`), outcome: telemetry.OutcomeOK,
		record: map[string]any{"event": "tools/call", "decision": "allow", "outcome": "ok"},
	}, {
		name: "result with isError", route: routed, res: json.RawMessage(`{"content":[],"isError":true}`), outcome: telemetry.OutcomeToolError,
		record: map[string]any{"event": "tools/call", "decision": "allow", "outcome": "is_error"},
	}, {
		name: "tool failure", route: routed, err: rpcerr.FailTool("Invalid arguments"), outcome: telemetry.OutcomeToolError,
		record: map[string]any{"event": "tools/call", "decision": "allow", "outcome": "is_error"},
	}, {
		name: "budget", route: routed, err: fmt.Errorf("relay: %w", &budget.Refusal{Kind: budget.KindRateLimit, Name: "per-user"}),
		outcome: telemetry.OutcomeLimited,
		budget:  map[string]string{"budget": "rate_limit", "name": "per-user", "tenant": "acme"},
		record:  map[string]any{"event": "tools/call", "decision": "deny", "outcome": "denied", "reason": "rate_limit per-user"},
	}, {
		name: "guard", route: routed,
		err:     &guard.BlockError{Verdict: guard.Verdict{Findings: []guard.Finding{{Kind: "email"}, {Kind: "aws-access-key"}}}},
		outcome: telemetry.OutcomeDenied,
		record:  map[string]any{"event": "policy_denial", "decision": "deny", "outcome": "denied", "reason": "guard: email,aws-access-key"},
	}, {
		name: "policy", route: routed,
		err:     &policy.Refusal{Decision: policy.Decision{By: policy.ByRule, Path: "tenants[0].policy[1]", Name: "no-issues"}, Noun: "tool"},
		outcome: telemetry.OutcomeDenied,
		denial:  map[string]string{"tenant": "acme", "upstream": "github", "kind": "tool"},
		record:  map[string]any{"event": "policy_denial", "decision": "deny", "outcome": "denied", "reason": `policy: tenants[0].policy[1] "no-issues"`},
	}, {
		// The record names the upstream's tool the policy hid, with
		// that upstream's credentials mode.
		name: "hidden by policy", route: hidden,
		err:     &catalog.ResolveError{Kind: catalog.Tools, Name: "gh_secret", DeniedBy: "github", DeniedName: "secret"},
		outcome: telemetry.OutcomeDenied,
		denial:  map[string]string{"tenant": "acme", "upstream": "github", "kind": "tool"},
		record: map[string]any{"event": "policy_denial", "decision": "deny", "outcome": "denied", "reason": "hidden by policy",
			"upstream": "github", "tool": "secret", "credentials": "token_exchange"},
	}, {
		name: "scope", route: routed, err: &rpcerr.ScopeError{Scopes: []string{"repo"}}, outcome: telemetry.OutcomeDenied,
		denial: map[string]string{"tenant": "acme", "upstream": "github", "kind": "scope"},
		record: map[string]any{"event": "policy_denial", "decision": "deny", "outcome": "denied", "reason": "insufficient scope"},
	}, {
		name: "timeout", route: routed, err: fmt.Errorf("upstream: %w", context.DeadlineExceeded), outcome: telemetry.OutcomeTimeout,
		record: map[string]any{"event": "tools/call", "decision": "allow", "outcome": "error", "reason": "timeout"},
	}, {
		name: "cancelled", ctx: cancelledCtx, route: routed, err: context.Canceled, outcome: telemetry.OutcomeCancelled,
		record: map[string]any{"event": "tools/call", "decision": "allow", "outcome": "error", "reason": "cancelled"},
	}, {
		name: "JSON-RPC error", route: routed, err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no"}, outcome: telemetry.OutcomeError,
		record: map[string]any{"event": "tools/call", "decision": "allow", "outcome": "error", "reason": "error -32602"},
	}, {
		name: "other error", route: routed, err: errors.New("boom"), outcome: telemetry.OutcomeError,
		record: map[string]any{"event": "tools/call", "decision": "allow", "outcome": "error", "reason": "internal error"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			f.serve(ctx, toolCall(), tc.route, tc.res, tc.err)

			if got := f.value(t, "mcpgw_requests_total", map[string]string{"method": "tools/call", "tenant": "acme", "outcome": tc.outcome}); got != 1 {
				t.Errorf("mcpgw_requests_total{outcome=%q} = %v, want 1", tc.outcome, got)
			}
			up, tool := "github", "create_issue"
			if tc.name == "hidden by policy" {
				tool = "secret"
			}
			if got := f.value(t, "mcpgw_tool_calls_total", map[string]string{"tenant": "acme", "upstream": up, "tool": tool, "outcome": tc.outcome}); got != 1 {
				t.Errorf("mcpgw_tool_calls_total{tool=%q,outcome=%q} = %v, want 1", tool, tc.outcome, got)
			}
			if tc.denial != nil {
				if got := f.value(t, "mcpgw_policy_denials_total", tc.denial); got != 1 {
					t.Errorf("mcpgw_policy_denials_total%v = %v, want 1", tc.denial, got)
				}
			} else if n := f.count(t, "mcpgw_policy_denials_total"); n != 0 {
				t.Errorf("%v policy denials counted, want none", n)
			}
			if tc.budget != nil {
				if got := f.value(t, "mcpgw_budget_refusals_total", tc.budget); got != 1 {
					t.Errorf("mcpgw_budget_refusals_total%v = %v, want 1", tc.budget, got)
				}
			} else if n := f.count(t, "mcpgw_budget_refusals_total"); n != 0 {
				t.Errorf("%v budget refusals counted, want none", n)
			}

			want := map[string]any{
				"tenant": "acme", "subject": "alice", "client_id": "vscode", "session_id": "s-1", "method": "tools/call",
				"upstream": "github", "tool": "create_issue", "arguments": `{"title":"REDACTED"}`, "credentials": "token_exchange",
			}
			if tc.name == "hidden by policy" {
				delete(want, "arguments") // not yet read when the resolve failed
			}
			for k, v := range tc.record {
				want[k] = v
			}
			// One record: an audited method's budget refusal is its own
			// record's, not a limit_exceeded of its own.
			if diff := cmp.Diff([]map[string]any{want}, f.lines(t)); diff != "" {
				t.Errorf("audit records (-want +got):\n%s", diff)
			}
		})
	}
}

// count is how many series the metric name has.
func (f *fixture) count(t *testing.T, name string) int {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// TestResourceRead: a resource's record names its URI at the upstream,
// not a tool, and its request counts no tool call.
func TestResourceRead(t *testing.T) {
	f := newFixture(t)
	call := Call{Caller: who, Method: "resources/read", Target: TargetResource, Audited: true, Upstream: upstreams}
	f.serve(context.Background(), call, Route{Upstream: "github", Exposed: "gh+file:///a", Original: "file:///a"}, json.RawMessage(`{"contents":[]}`), nil)
	if n := f.count(t, "mcpgw_tool_calls_total"); n != 0 {
		t.Errorf("%d tool calls counted, want none", n)
	}
	want := []map[string]any{{
		"event": "resources/read", "tenant": "acme", "subject": "alice", "client_id": "vscode", "session_id": "s-1",
		"method": "resources/read", "upstream": "github", "uri": "file:///a", "decision": "allow", "outcome": "ok", "credentials": "token_exchange",
	}}
	if diff := cmp.Diff(want, f.lines(t)); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}

// TestNotAudited: a method that reaches no upstream's tool, prompt or
// resource is counted but writes no audit record, unless a budget refused
// it: then the refusal is a record of its own.
func TestNotAudited(t *testing.T) {
	f := newFixture(t)
	list := Call{Caller: who, Method: "tools/list", Upstream: upstreams}
	f.serve(context.Background(), list, Route{}, json.RawMessage(`{"tools":[]}`), nil)
	f.serve(context.Background(), list, Route{}, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "x"})
	for _, outcome := range []string{telemetry.OutcomeOK, telemetry.OutcomeError} {
		if got := f.value(t, "mcpgw_requests_total", map[string]string{"method": "tools/list", "tenant": "acme", "outcome": outcome}); got != 1 {
			t.Errorf("mcpgw_requests_total{outcome=%q} = %v, want 1", outcome, got)
		}
	}
	if got := f.lines(t); len(got) != 0 {
		t.Fatalf("audit records %v, want none", got)
	}

	f.serve(context.Background(), list, Route{}, nil, &budget.Refusal{Kind: budget.KindQuota, Name: "daily"})
	if got := f.value(t, "mcpgw_budget_refusals_total", map[string]string{"budget": "quota", "name": "daily", "tenant": "acme"}); got != 1 {
		t.Errorf("mcpgw_budget_refusals_total = %v, want 1", got)
	}
	want := []map[string]any{{
		"event": "limit_exceeded", "tenant": "acme", "subject": "alice", "client_id": "vscode", "session_id": "s-1",
		"method": "tools/list", "decision": "deny", "outcome": "denied", "reason": "quota daily",
	}}
	if diff := cmp.Diff(want, f.lines(t)); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}

// TestSpan: the span is named after the routed target, carries the
// caller's and the target's attributes and the outcome's status, and its
// trace is the audit record's.
func TestSpan(t *testing.T) {
	tp, exp := telemetry.NewTestTracerProvider()
	var buf bytes.Buffer
	rec := New(nil, telemetry.Tracer(tp), audit.New(&buf), nil)
	ctx, o := rec.Start(context.Background(), toolCall())
	o.Record(ctx, routed, json.RawMessage(`{"content":[],"isError":true}`), nil)
	o.End()

	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name != "tools/call gh_create_issue" {
		t.Errorf("span name %q, want %q", s.Name, "tools/call gh_create_issue")
	}
	attrs := map[attribute.Key]string{}
	for _, a := range s.Attributes {
		attrs[a.Key] = a.Value.String()
	}
	for _, a := range []attribute.KeyValue{
		telemetry.ToolName("gh_create_issue"), telemetry.Upstream("github"), telemetry.Tenant("acme"),
		telemetry.SessionID("s-1"), telemetry.ProtocolVersion("2025-11-25"), telemetry.AttrErrorType.String(telemetry.ErrorTypeToolError),
	} {
		if got := attrs[a.Key]; got != a.Value.String() {
			t.Errorf("span attribute %s = %q, want %q", a.Key, got, a.Value.String())
		}
	}
	if id, _ := telemetry.RequestID(json.RawMessage("7")); attrs[id.Key] != "7" {
		t.Errorf("span attribute %s = %q, want 7", id.Key, attrs[id.Key])
	}
	if s.Status.Code != codes.Error {
		t.Errorf("span status %v, want Error", s.Status.Code)
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if got, want := line["trace_id"], s.SpanContext.TraceID().String(); got != want {
		t.Errorf("audit trace_id %v, want the span's %s", got, want)
	}
}

// TestLimitHit: a refusal at a limit is counted and audited with the
// limit's name as its reason.
func TestLimitHit(t *testing.T) {
	f := newFixture(t)
	f.rec.LimitHit(context.Background(), Caller{Tenant: "acme", Subject: "alice", ClientID: "vscode"}, telemetry.LimitBodyBytes, "")
	if got := f.value(t, "mcpgw_limit_rejections_total", map[string]string{"limit": telemetry.LimitBodyBytes, "tenant": "acme"}); got != 1 {
		t.Errorf("mcpgw_limit_rejections_total = %v, want 1", got)
	}
	want := []map[string]any{{
		"event": "limit_exceeded", "tenant": "acme", "subject": "alice", "client_id": "vscode",
		"decision": "deny", "outcome": "denied", "reason": telemetry.LimitBodyBytes,
	}}
	if diff := cmp.Diff(want, f.lines(t)); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}

// TestBudgetRefused: a refusal at the edge, before any method, is counted
// and audited.
func TestBudgetRefused(t *testing.T) {
	f := newFixture(t)
	f.rec.BudgetRefused(context.Background(), who, "", &budget.Refusal{Kind: budget.KindRateLimit, Name: "edge", StoreError: true})
	if got := f.value(t, "mcpgw_budget_refusals_total", map[string]string{"budget": "rate_limit", "name": "edge", "tenant": "acme"}); got != 1 {
		t.Errorf("mcpgw_budget_refusals_total = %v, want 1", got)
	}
	want := []map[string]any{{
		"event": "limit_exceeded", "tenant": "acme", "subject": "alice", "client_id": "vscode", "session_id": "s-1",
		"decision": "deny", "outcome": "denied", "reason": "rate_limit edge (store unavailable)",
	}}
	if diff := cmp.Diff(want, f.lines(t)); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}

// TestCircuitChanged: the gauge follows the breaker.
func TestCircuitChanged(t *testing.T) {
	f := newFixture(t)
	labels := map[string]string{"upstream": "github"}
	f.rec.CircuitChanged("github", true)
	if got := f.value(t, "mcpgw_circuit_open", labels); got != 1 {
		t.Errorf("mcpgw_circuit_open after opening = %v, want 1", got)
	}
	f.rec.CircuitChanged("github", false)
	if got := f.value(t, "mcpgw_circuit_open", labels); got != 0 {
		t.Errorf("mcpgw_circuit_open after closing = %v, want 0", got)
	}
}

// TestNil: a Recorder with no metrics, tracer, audit log or logger
// records nothing and does not fail.
func TestNil(t *testing.T) {
	rec := New(nil, nil, nil, nil)
	ctx, o := rec.Start(context.Background(), toolCall())
	o.Record(ctx, routed, nil, errors.New("boom"))
	o.End()
	rec.LimitHit(ctx, who, telemetry.LimitBodyBytes, "")
	rec.BudgetRefused(ctx, who, "", &budget.Refusal{Kind: budget.KindQuota, Name: "q"})
	rec.CircuitChanged("github", true)
}

// TestPinMismatch: a changed definition is audited by field, with what the
// gateway does about it, and never with the upstream's text.
func TestPinMismatch(t *testing.T) {
	f := newFixture(t)
	f.rec.PinMismatch(catalog.PinStatus{Kind: catalog.Tools, Upstream: "github", Name: "create_issue",
		Changed: []string{"description", "inputSchema"}, Quarantined: true})
	line := f.buf.String()
	for _, want := range []string{`"event":"pin_mismatch"`, `"upstream":"github"`, `"tool":"create_issue"`,
		`"decision":"deny"`, `"reason":"changed: description, inputSchema; quarantined"`} {
		if !strings.Contains(line, want) {
			t.Errorf("audit line %s lacks %s", line, want)
		}
	}
	notes := PinNotes([]catalog.PinStatus{{Kind: catalog.Prompts, Upstream: "docs", Name: "sum\nmary", New: true}})
	if len(notes) != 1 || !strings.HasPrefix(notes[0], `upstream docs: prompt "sum\nmary" `) {
		t.Errorf("PinNotes = %q", notes)
	}
}

// TestPolicyDecided: each decision is counted by what decided it.
func TestPolicyDecided(t *testing.T) {
	f := newFixture(t)
	f.rec.PolicyDecided("acme", &policy.Decision{By: policy.ByRule, Allow: false})
	f.rec.PolicyDecided("acme", &policy.Decision{By: policy.ByPDP, Allow: true})
	f.rec.PolicyDecided("acme", &policy.Decision{By: policy.ByDefault, Allow: true})
	for _, want := range []map[string]string{
		{"tenant": "acme", "source": "rule", "decision": "deny"},
		{"tenant": "acme", "source": "pdp", "decision": "allow"},
		{"tenant": "acme", "source": "default", "decision": "allow"},
	} {
		if got := f.value(t, "mcpgw_policy_decisions_total", want); got != 1 {
			t.Errorf("mcpgw_policy_decisions_total%v = %v, want 1", want, got)
		}
	}
	New(nil, nil, nil, nil).PolicyDecided("acme", &policy.Decision{}) // no metrics: nothing
}
