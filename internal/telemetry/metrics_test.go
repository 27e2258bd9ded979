package telemetry

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTestMetrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.now = func() time.Time { return time.Unix(1700000000, 500_000_000) }
	return m, reg
}

// scrape fetches the metrics page over HTTP, as Prometheus would.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestMetricsScrape(t *testing.T) {
	m, _ := newTestMetrics(t)
	m.ConfigLoaded()
	m.ObserveRequest("initialize", "acme", OutcomeOK, 20*time.Millisecond)
	m.ObserveRequest("tools/call", "acme", OutcomeToolError, 300*time.Millisecond)
	m.ObserveRequest("tools/call", "acme", OutcomeOK, 2*time.Second)
	m.ObserveRequest("tools/call", "", OutcomeDenied, time.Millisecond)
	m.ObserveUpstream("github", "tools/call", OutcomeOK, 250*time.Millisecond)
	m.ObserveUpstream("github", "tools/call", OutcomeTimeout, 30*time.Second)
	m.ToolCall("acme", "github", "create_issue", OutcomeOK)
	m.ToolCall("acme", "github", "create_issue", OutcomeToolError)
	m.AuthFailure("invalid_token")
	m.AuthFailure("invalid_token")
	m.PolicyDenial("acme", "github", "tool")
	m.SessionStarted()
	m.SessionStarted()
	m.SessionEnded()
	m.SSEStreamOpened()
	m.ConfigReload(ReloadError)
	m.ConfigReload(ReloadOK)

	body := scrape(t, m)
	for _, want := range []string{
		`mcpgw_requests_total{method="initialize",outcome="ok",tenant="acme"} 1`,
		`mcpgw_requests_total{method="tools/call",outcome="tool_error",tenant="acme"} 1`,
		`mcpgw_requests_total{method="tools/call",outcome="ok",tenant="acme"} 1`,
		`mcpgw_requests_total{method="tools/call",outcome="denied",tenant="none"} 1`,
		`mcpgw_request_duration_seconds_bucket{method="tools/call",tenant="acme",le="0.5"} 1`,
		`mcpgw_request_duration_seconds_bucket{method="tools/call",tenant="acme",le="2.5"} 2`,
		`mcpgw_request_duration_seconds_count{method="tools/call",tenant="acme"} 2`,
		`mcpgw_upstream_requests_total{method="tools/call",outcome="ok",upstream="github"} 1`,
		`mcpgw_upstream_requests_total{method="tools/call",outcome="timeout",upstream="github"} 1`,
		`mcpgw_upstream_request_duration_seconds_count{method="tools/call",upstream="github"} 2`,
		`mcpgw_tool_calls_total{outcome="ok",tenant="acme",tool="create_issue",upstream="github"} 1`,
		`mcpgw_tool_calls_total{outcome="tool_error",tenant="acme",tool="create_issue",upstream="github"} 1`,
		`mcpgw_auth_failures_total{reason="invalid_token"} 2`,
		`mcpgw_policy_denials_total{kind="tool",tenant="acme",upstream="github"} 1`,
		`mcpgw_sessions_active 1`,
		`mcpgw_sse_streams_open 1`,
		`mcpgw_config_reloads_total{result="error"} 1`,
		`mcpgw_config_reloads_total{result="ok"} 1`,
		`mcpgw_config_generation 2`,
		`mcpgw_config_last_reload_success_timestamp_seconds 1.7000000005e+09`,
		// The Go runtime and process collectors.
		`go_goroutines `,
		`go_memstats_alloc_bytes `,
		`process_cpu_seconds_total `,
		`process_open_fds `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape does not contain %q", want)
		}
	}
	// No label anywhere names a session or a subject.
	for _, bad := range []string{"session_id", "subject"} {
		if strings.Contains(body, bad) {
			t.Errorf("scrape contains %q", bad)
		}
	}
}

func TestMetricsHelp(t *testing.T) {
	m, reg := newTestMetrics(t)
	m.ObserveRequest("ping", "acme", OutcomeOK, time.Millisecond)
	const want = `
# HELP mcpgw_requests_total MCP requests served (initialize and notifications aside), by method, tenant and outcome.
# TYPE mcpgw_requests_total counter
mcpgw_requests_total{method="ping",outcome="ok",tenant="acme"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcpgw_requests_total"); err != nil {
		t.Error(err)
	}
}

func TestMetricsSeveralGateways(t *testing.T) {
	// Each gateway has its own registry; two in one process must not
	// clash, and must not share counts.
	a, _ := newTestMetrics(t)
	b, _ := newTestMetrics(t)
	a.AuthFailure("missing_token")
	if got := testutil.ToFloat64(a.authFail.WithLabelValues("missing_token")); got != 1 {
		t.Errorf("a: %v, want 1", got)
	}
	if got := testutil.CollectAndCount(b.authFail); got != 0 {
		t.Errorf("b has %d series, want 0", got)
	}
}

func TestMetricsBoundedLabels(t *testing.T) {
	m, _ := newTestMetrics(t)

	t.Run("unknown method", func(t *testing.T) {
		m.ObserveRequest("tools/call\x00evil", "acme", OutcomeOK, 0)
		m.ObserveRequest("x/made-up", "acme", OutcomeOK, 0)
		if got := testutil.ToFloat64(m.requests.WithLabelValues("other", "acme", "ok")); got != 2 {
			t.Errorf("method=other: %v, want 2", got)
		}
	})
	t.Run("unknown outcome", func(t *testing.T) {
		m.ObserveUpstream("u", "ping", "weird", 0)
		if got := testutil.ToFloat64(m.upReqs.WithLabelValues("u", "ping", "other")); got != 1 {
			t.Errorf("outcome=other: %v, want 1", got)
		}
	})
	t.Run("tools per upstream", func(t *testing.T) {
		for i := range MaxToolLabelsPerUpstream + 100 {
			m.ToolCall("acme", "big", fmt.Sprintf("tool_%d", i), OutcomeOK)
		}
		// Another upstream has a cap of its own.
		m.ToolCall("acme", "small", "tool_0", OutcomeOK)
		series := testutil.CollectAndCount(m.tools)
		if want := MaxToolLabelsPerUpstream + 1 + 1; series != want {
			t.Errorf("%d tool series, want %d", series, want)
		}
		if got := testutil.ToFloat64(m.tools.WithLabelValues("acme", "big", "other", "ok")); got != 100 {
			t.Errorf("tool=other: %v, want 100", got)
		}
		// A tool seen before the cap keeps its own series.
		m.ToolCall("acme", "big", "tool_7", OutcomeOK)
		if got := testutil.ToFloat64(m.tools.WithLabelValues("acme", "big", "tool_7", "ok")); got != 2 {
			t.Errorf("tool_7: %v, want 2", got)
		}
	})
	t.Run("tenants", func(t *testing.T) {
		for i := range MaxTenantLabels + 5 {
			m.AuthFailure("x") // unrelated
			m.PolicyDenial(fmt.Sprintf("t%d", i), "u", "tool")
		}
		if got := testutil.ToFloat64(m.denials.WithLabelValues("other", "u", "tool")); got < 5 {
			t.Errorf("tenant=other: %v, want at least 5", got)
		}
	})
	t.Run("reasons", func(t *testing.T) {
		for i := range MaxReasonLabels + 3 {
			m.AuthFailure(fmt.Sprintf("r%d", i))
		}
		if got := testutil.CollectAndCount(m.authFail); got > MaxReasonLabels+1 {
			t.Errorf("%d reason series, want at most %d", got, MaxReasonLabels+1)
		}
	})
	t.Run("invalid UTF-8 and long values", func(t *testing.T) {
		// WithLabelValues panics on invalid UTF-8; the tool name comes
		// from an upstream.
		m.ToolCall("acme", "small", "bad\xff\xfename", OutcomeOK)
		long := strings.Repeat("é", 100) // 200 bytes
		m.ToolCall("acme", "small", long, OutcomeOK)
		cut := cleanLabel(long)
		if len(cut) > MaxLabelLen || !strings.HasPrefix(long, cut) {
			t.Errorf("cleanLabel cut to %d bytes: %q", len(cut), cut)
		}
		if got := testutil.ToFloat64(m.tools.WithLabelValues("acme", "small", "bad\uFFFDname", "ok")); got != 1 {
			t.Errorf("cleaned tool: %v, want 1", got)
		}
	})
}

func TestMetricsSessionsFunc(t *testing.T) {
	m, reg := newTestMetrics(t)
	m.SessionStarted()
	n := 42
	m.SetSessionsActiveFunc(func() int { return n })
	check := func(want string) {
		t.Helper()
		exp := "# HELP mcpgw_sessions_active MCP sessions currently open.\n# TYPE mcpgw_sessions_active gauge\nmcpgw_sessions_active " + want + "\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "mcpgw_sessions_active"); err != nil {
			t.Error(err)
		}
	}
	check("42")
	m.SetSessionsActiveFunc(nil)
	check("1")
}

func TestMetricsConcurrent(t *testing.T) {
	m, _ := newTestMetrics(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				m.ToolCall("acme", "u", fmt.Sprintf("t%d", (i*200+j)%50), OutcomeOK)
				m.ObserveRequest("tools/call", "acme", OutcomeOK, time.Millisecond)
				m.SSEStreamOpened()
				m.SSEStreamClosed()
			}
		})
	}
	wg.Wait()
	if got := testutil.ToFloat64(m.requests.WithLabelValues("tools/call", "acme", "ok")); got != 1600 {
		t.Errorf("requests: %v, want 1600", got)
	}
	if got := testutil.ToFloat64(m.streams); got != 0 {
		t.Errorf("streams: %v, want 0", got)
	}
}

func TestMetricsNil(t *testing.T) {
	var m *Metrics
	m.ObserveRequest("ping", "a", OutcomeOK, 0)
	m.ObserveUpstream("u", "ping", OutcomeOK, 0)
	m.ToolCall("a", "u", "t", OutcomeOK)
	m.AuthFailure("x")
	m.PolicyDenial("a", "u", "tool")
	m.SessionStarted()
	m.SessionEnded()
	m.SetSessionsActiveFunc(func() int { return 1 })
	m.SSEStreamOpened()
	m.SSEStreamClosed()
	m.ConfigLoaded()
	m.ConfigReload(ReloadOK)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("nil Metrics handler: status %d, want 404", rec.Code)
	}
}

func TestMethodLabel(t *testing.T) {
	for _, m := range []string{"initialize", "tools/call", "notifications/cancelled", "subscriptions/listen", "server/discover"} {
		if got := MethodLabel(m); got != m {
			t.Errorf("MethodLabel(%q) = %q", m, got)
		}
	}
	for _, m := range []string{"", "Tools/Call", "tools/call ", "rpc.discover"} {
		if got := MethodLabel(m); got != "other" {
			t.Errorf("MethodLabel(%q) = %q, want other", m, got)
		}
	}
}
