package telemetry

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Outcomes of a request, an upstream request or a tool call: the values of
// the outcome label. Any other value is recorded as "other".
const (
	OutcomeOK        = "ok"
	OutcomeError     = "error"      // a JSON-RPC error, or a failure of the gateway or the upstream
	OutcomeToolError = "tool_error" // a tools/call result with isError: true
	OutcomeDenied    = "denied"     // refused by authentication or policy
	OutcomeCancelled = "cancelled"  // the client went away or sent notifications/cancelled
	OutcomeTimeout   = "timeout"    // the request or upstream timeout fired
	OutcomeLimited   = "limited"    // refused by a budget: rate limit, quota, concurrency, circuit breaker
)

// Results of a config reload: the values of the result label of
// mcpgw_config_reloads_total.
const (
	ReloadOK    = "ok"
	ReloadError = "error"
)

// otherLabel replaces a label value outside its bounded set.
const otherLabel = "other"

// noneLabel stands for an empty tenant or upstream (a request rejected
// before its tenant was known).
const noneLabel = "none"

var outcomes = set(OutcomeOK, OutcomeError, OutcomeToolError, OutcomeDenied, OutcomeCancelled, OutcomeTimeout, OutcomeLimited)

// methods are the MCP method names (requests and notifications, client to
// server and server to client) of the protocol revisions the gateway
// speaks (protocol.Methods): the values of the method label.
var methods = func() map[string]bool {
	m := make(map[string]bool, len(protocol.Methods))
	for _, d := range protocol.Methods {
		m[d.Name] = true
	}
	return m
}()

func set(vs ...string) map[string]bool {
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m
}

// MethodLabel returns the method label value for an MCP method name: the
// name itself when it is a known MCP method, else "other".
func MethodLabel(method string) string {
	if methods[method] {
		return method
	}
	return otherLabel
}

func outcomeLabel(outcome string) string {
	if outcomes[outcome] {
		return outcome
	}
	return otherLabel
}

// durationBuckets suit MCP requests: most answer within milliseconds, a
// streamed tools/call may take minutes (server.request_timeout defaults to
// 5m).
var durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Metrics is the gateway's Prometheus instrumentation. Build it with
// [NewMetrics]; its methods are safe for concurrent use, and every method
// of a nil *Metrics does nothing, so code under test may leave it out.
//
// The label values it records are bounded whatever the callers pass; see
// the package documentation.
type Metrics struct {
	gatherer prometheus.Gatherer
	requests *prometheus.CounterVec
	reqDur   *prometheus.HistogramVec
	upReqs   *prometheus.CounterVec
	upDur    *prometheus.HistogramVec
	tools    *prometheus.CounterVec
	authFail *prometheus.CounterVec
	denials  *prometheus.CounterVec
	streams  prometheus.Gauge
	listens  prometheus.Gauge
	resume   resumeMetrics
	policy   policyMetrics
	guard    guardMetrics
	reloads  *prometheus.CounterVec
	gen      prometheus.Gauge
	lastOK   prometheus.Gauge
	limits   *prometheus.CounterVec
	names    *prometheus.CounterVec
	schemas  *prometheus.CounterVec
	pinned   *prometheus.GaugeVec
	tokens   *prometheus.CounterVec
	budgets  *prometheus.CounterVec
	quotas   *prometheus.GaugeVec
	circuits *prometheus.GaugeVec
	logSup   *prometheus.CounterVec
	procs    *prometheus.GaugeVec
	exits    *prometheus.CounterVec

	sessions   atomic.Int64
	sessionsFn atomic.Pointer[func() int]

	tenants     *capped
	upstreams   *capped
	toolNames   *cappedByKey
	reasons     *capped
	kinds       *capped
	budgetNames *capped
	logMsgs     *capped

	generation atomic.Int64
	now        func() time.Time
}

// NewMetrics creates the gateway's collectors, with the Go runtime and
// process collectors, and registers them on reg, which must be a registry
// of this gateway's own (never prometheus.DefaultRegisterer: tests run
// several gateways in one process). If reg is also a prometheus.Gatherer
// (a *prometheus.Registry is), [Metrics.Handler] serves it. It panics if
// a collector is already registered on reg, like prometheus.MustRegister.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_requests_total",
			Help: "MCP requests served (initialize and notifications aside), by method, tenant and outcome.",
		}, []string{"method", "tenant", "outcome"}),
		reqDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpgw_request_duration_seconds",
			Help:    "Time to answer an MCP request, streamed responses included, by method and tenant.",
			Buckets: durationBuckets,
		}, []string{"method", "tenant"}),
		upReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_upstream_requests_total",
			Help: "MCP requests sent to upstreams, by upstream, method and outcome.",
		}, []string{"upstream", "method", "outcome"}),
		upDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpgw_upstream_request_duration_seconds",
			Help:    "Time an upstream took to answer, streamed responses included, by upstream and method.",
			Buckets: durationBuckets,
		}, []string{"upstream", "method"}),
		tools: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_tool_calls_total",
			Help: "tools/call requests, by tenant, upstream, the tool's original name and outcome.",
		}, []string{"tenant", "upstream", "tool", "outcome"}),
		authFail: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_auth_failures_total",
			Help: "Requests refused by authentication, by reason.",
		}, []string{"reason"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_policy_denials_total",
			Help: "Requests refused by tenant policy, by tenant, upstream and kind of item.",
		}, []string{"tenant", "upstream", "kind"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpgw_sse_streams_open",
			Help: "Server-sent event streams currently open to clients.",
		}),
		listens: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpgw_upstream_streams_open",
			Help: "Upstream GET streams currently open for client sessions' GET streams.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_config_reloads_total",
			Help: "Config reloads attempted, by result.",
		}, []string{"result"}),
		gen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpgw_config_generation",
			Help: "Generation of the config in use: 1 for the config loaded at start, one more for each successful reload.",
		}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpgw_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful config load or reload.",
		}),
		limits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_limit_rejections_total",
			Help: "Requests and upstream answers refused because they reached a limit, by limit and tenant.",
		}, []string{"limit", "tenant"}),
		names: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_upstream_names_flagged_total",
			Help: "Names upstreams listed that break the naming rules, by upstream and reason (dropped, or kept and counted).",
		}, []string{"upstream", "reason"}),
		schemas: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_schema_violations_total",
			Help: "Tool calls whose arguments or structured results did not match the tool's schema, by tenant, upstream and schema (input or output).",
		}, []string{"tenant", "upstream", "schema"}),
		pinned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpgw_quarantined_items",
			Help: "Tools and prompts hidden because their definitions differ from their pins (or are not pinned), by upstream and kind, as last listed on this replica.",
		}, []string{"upstream", "kind"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_upstream_token_fetches_total",
			Help: "Tokens the gateway fetched for upstream requests, by upstream, mode and outcome.",
		}, []string{"upstream", "mode", "outcome"}),
		logSup: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_log_suppressed_total",
			Help: "Warning and error log records suppressed because one like them was logged within the rate-limit window, by message.",
		}, []string{"message"}),
		procs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpgw_upstream_processes",
			Help: "Processes of stdio upstreams running on this replica, by upstream.",
		}, []string{"upstream"}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_upstream_process_exits_total",
			Help: "Processes of stdio upstreams that ended, by upstream and reason: exited (by itself: a crash) or stopped (idle, reload, shutdown).",
		}, []string{"upstream", "reason"}),

		budgets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_budget_refusals_total",
			Help: "Requests refused by a budget, by kind of budget (rate_limit, quota, concurrency, circuit_breaker), its name (the rule's, or the upstream's) and tenant.",
		}, []string{"budget", "name", "tenant"}),
		quotas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpgw_quota_used",
			Help: "Calls counted against a quota in its current period, as this replica last saw the count, by tenant and quota.",
		}, []string{"tenant", "quota"}),
		circuits: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpgw_circuit_open",
			Help: "1 while an upstream's circuit breaker on this replica is open or half-open, else 0, by upstream.",
		}, []string{"upstream"}),

		tenants:     newCapped(MaxTenantLabels),
		budgetNames: newCapped(MaxBudgetLabels),
		upstreams:   newCapped(MaxUpstreamLabels),
		toolNames:   newCappedByKey(MaxUpstreamLabels, MaxToolLabelsPerUpstream),
		reasons:     newCapped(MaxReasonLabels),
		kinds:       newCapped(MaxReasonLabels),
		logMsgs:     newCapped(MaxLogMessageLabels),
		now:         time.Now,
	}
	sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mcpgw_sessions_active",
		Help: "MCP sessions currently open.",
	}, m.sessionsActive)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.reqDur, m.upReqs, m.upDur, m.tools, m.authFail, m.denials,
		sessions, m.streams, m.listens, m.reloads, m.gen, m.lastOK, m.limits, m.names, m.schemas, m.pinned, m.tokens, m.logSup,
		m.budgets, m.quotas, m.circuits, m.procs, m.exits,
	)
	m.resume = newResumeMetrics(reg)
	m.policy = newPolicyMetrics(reg)
	m.guard = newGuardMetrics(reg)
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	}
	return m
}

// Handler returns the handler of admin /metrics: the registry given to
// [NewMetrics] in the Prometheus exposition formats. Without a gatherer (a
// nil *Metrics, or a registerer that cannot gather) it answers 404.
func (m *Metrics) Handler() http.Handler {
	if m == nil || m.gatherer == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{
		// A failing collector (the process collector on an exotic OS)
		// should not take every other metric down with it.
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// ObserveRequest records one MCP request or notification from a client:
// mcpgw_requests_total{method,tenant,outcome} and
// mcpgw_request_duration_seconds{method,tenant}. method is the JSON-RPC
// method ("other" unless it is a known MCP method); tenant is the
// configured tenant id ("" before the tenant is known: recorded as "none");
// outcome is one of the Outcome constants; d runs from receiving the
// request to the end of the response, streams included.
func (m *Metrics) ObserveRequest(method, tenant, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	method, tenant = MethodLabel(method), m.tenant(tenant)
	m.requests.WithLabelValues(method, tenant, outcomeLabel(outcome)).Inc()
	m.reqDur.WithLabelValues(method, tenant).Observe(d.Seconds())
}

// ObserveUpstream records one request to an upstream:
// mcpgw_upstream_requests_total{upstream,method,outcome} and
// mcpgw_upstream_request_duration_seconds{upstream,method}. upstream is
// the configured upstream name; method and outcome are as for
// [Metrics.ObserveRequest].
func (m *Metrics) ObserveUpstream(upstream, method, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	method, upstream = MethodLabel(method), m.upstream(upstream)
	m.upReqs.WithLabelValues(upstream, method, outcomeLabel(outcome)).Inc()
	m.upDur.WithLabelValues(upstream, method).Observe(d.Seconds())
}

// ToolCall records one tools/call: mcpgw_tool_calls_total{tenant,upstream,
// tool,outcome}. tool is the tool's original name at upstream. Callers pass
// only tools that a configured upstream lists; as a backstop each upstream
// keeps at most [MaxToolLabelsPerUpstream] distinct tool values, after
// which new tools are recorded as "other" until the process restarts.
func (m *Metrics) ToolCall(tenant, upstream, tool, outcome string) {
	if m == nil {
		return
	}
	upstream = m.upstream(upstream)
	m.tools.WithLabelValues(m.tenant(tenant), upstream, m.toolNames.value(upstream, tool), outcomeLabel(outcome)).Inc()
}

// AuthFailure records a request refused by authentication:
// mcpgw_auth_failures_total{reason}. reason is one of auth's fixed Reason
// strings ("missing token", "expired", "wrong audience", "unknown tenant",
// ...), never anything taken from the request.
func (m *Metrics) AuthFailure(reason string) {
	if m == nil {
		return
	}
	m.authFail.WithLabelValues(m.reasons.value(reason)).Inc()
}

// PolicyDenial records a request refused by tenant policy:
// mcpgw_policy_denials_total{tenant,upstream,kind}. kind names what was
// denied ("tool", "prompt", "resource", "upstream", "scope").
func (m *Metrics) PolicyDenial(tenant, upstream, kind string) {
	if m == nil {
		return
	}
	m.denials.WithLabelValues(m.tenant(tenant), m.upstream(upstream), m.kinds.value(kind)).Inc()
}

// LogSuppressed records one log record suppressed by a [LogLimiter]:
// mcpgw_log_suppressed_total{message}. message is the record's message,
// a fixed string of the code, never an error text; as a backstop at most
// [MaxLogMessageLabels] values are kept.
func (m *Metrics) LogSuppressed(message string) {
	if m == nil {
		return
	}
	m.logSup.WithLabelValues(m.logMsgs.value(message)).Inc()
}

// SessionStarted and SessionEnded count mcpgw_sessions_active up and down,
// unless [Metrics.SetSessionsActiveFunc] has set a function to read it
// from.
func (m *Metrics) SessionStarted() {
	if m != nil {
		m.sessions.Add(1)
	}
}

// SessionEnded: see [Metrics.SessionStarted].
func (m *Metrics) SessionEnded() {
	if m != nil {
		m.sessions.Add(-1)
	}
}

// SetSessionsActiveFunc makes mcpgw_sessions_active report f() at each
// scrape instead of the SessionStarted/SessionEnded count: point it at
// the session store's Len, which also sees sessions that expired. f is
// called on the scrape's goroutine and must be cheap and safe for
// concurrent use. A nil f goes back to the count.
func (m *Metrics) SetSessionsActiveFunc(f func() int) {
	if m == nil {
		return
	}
	if f == nil {
		m.sessionsFn.Store(nil)
		return
	}
	m.sessionsFn.Store(&f)
}

func (m *Metrics) sessionsActive() float64 {
	if f := m.sessionsFn.Load(); f != nil {
		return float64((*f)())
	}
	return float64(m.sessions.Load())
}

// SSEStreamOpened and SSEStreamClosed count mcpgw_sse_streams_open: call
// them when a response or GET stream to a client starts and ends.
func (m *Metrics) SSEStreamOpened() {
	if m != nil {
		m.streams.Inc()
	}
}

// UpstreamStream records an upstream GET stream opened (delta 1) or
// closed (-1) for a client session: mcpgw_upstream_streams_open.
func (m *Metrics) UpstreamStream(delta int) {
	if m != nil {
		m.listens.Add(float64(delta))
	}
}

// SSEStreamClosed: see [Metrics.SSEStreamOpened].
func (m *Metrics) SSEStreamClosed() {
	if m != nil {
		m.streams.Dec()
	}
}

// ConfigLoaded records the config loaded at start: mcpgw_config_generation
// becomes 1 and the last-success timestamp now. It counts no reload.
func (m *Metrics) ConfigLoaded() {
	if m == nil {
		return
	}
	m.generation.Store(1)
	m.gen.Set(1)
	m.lastOK.Set(float64(m.now().UnixNano()) / 1e9)
}

// ConfigReload records a reload attempt: mcpgw_config_reloads_total{result}
// with result [ReloadOK] or [ReloadError] (anything but "ok" counts as an
// error). A successful one also increments mcpgw_config_generation and
// sets mcpgw_config_last_reload_success_timestamp_seconds to now.
func (m *Metrics) ConfigReload(result string) {
	if m == nil {
		return
	}
	if result != ReloadOK {
		m.reloads.WithLabelValues(ReloadError).Inc()
		return
	}
	m.reloads.WithLabelValues(ReloadOK).Inc()
	m.gen.Set(float64(m.generation.Add(1)))
	m.lastOK.Set(float64(m.now().UnixNano()) / 1e9)
}

// Limits: the values of the limit label of mcpgw_limit_rejections_total.
// Any other value is recorded as "other".
const (
	LimitBodyBytes          = "body_bytes"
	LimitReadBodyTimeout    = "read_body_timeout"
	LimitSessions           = "max_sessions"
	LimitSessionsPrincipal  = "sessions_per_principal"
	LimitSessionsTenant     = "sessions_per_tenant"
	LimitStreamsPrincipal   = "streams_per_principal"
	LimitStreamsTenant      = "streams_per_tenant"
	LimitBatchMessages      = "batch_messages"
	LimitClientInfo         = "client_info_bytes"
	LimitClientCapabilities = "client_capabilities_bytes"
	LimitMailboxMessages    = "mailbox_messages"
	LimitMailboxBytes       = "mailbox_bytes"
	LimitUnsolicitedAnswer  = "unsolicited_answer"
	LimitParkedCalls        = "parked_calls_per_principal"
	LimitListPages          = "list_pages"
	LimitListBytes          = "list_bytes"
	LimitListTime           = "list_time"
	// LimitUpstreamStreams is limits.upstream_streams; LimitStreamQueue
	// a message for a client's GET stream dropped (a notification) or
	// refused (an upstream's request) because the stream's queue was
	// full; LimitBusQueue one the session bus dropped for the same
	// reason.
	LimitUpstreamStreams = "upstream_streams"
	LimitStreamQueue     = "stream_queue"
	LimitBusQueue        = "bus_queue"
	LimitTasksPrincipal  = "tasks_per_principal"
	LimitTasksTenant     = "tasks_per_tenant"
	LimitTasks           = "max_tasks"
	LimitDetachedCalls   = "detached_calls_per_principal"
	// LimitDetachedTenant and LimitDetachedPool are
	// limits.detached_calls_per_tenant and limits.detached_calls;
	// LimitUpstreamStreamsPrincipal and LimitUpstreamStreamsTenant
	// limits.upstream_streams_per_principal and _per_tenant.
	LimitDetachedTenant           = "detached_calls_per_tenant"
	LimitDetachedPool             = "detached_calls"
	LimitUpstreamStreamsPrincipal = "upstream_streams_per_principal"
	LimitUpstreamStreamsTenant    = "upstream_streams_per_tenant"
	// LimitStdioProcesses is limits.stdio_processes; LimitMaxProcesses
	// is upstreams[].stdio.max_processes.
	LimitStdioProcesses = "stdio_processes"
	LimitMaxProcesses   = "max_processes"
)

var limitNames = set(LimitBodyBytes, LimitReadBodyTimeout, LimitSessions, LimitSessionsPrincipal,
	LimitSessionsTenant, LimitStreamsPrincipal, LimitStreamsTenant, LimitBatchMessages, LimitClientInfo,
	LimitClientCapabilities, LimitMailboxMessages, LimitMailboxBytes, LimitUnsolicitedAnswer,
	LimitParkedCalls, LimitListPages, LimitListBytes, LimitListTime, LimitStdioProcesses, LimitMaxProcesses,
	LimitUpstreamStreams, LimitStreamQueue, LimitBusQueue,
	LimitTasksPrincipal, LimitTasksTenant, LimitTasks,
	LimitDetachedCalls, LimitDetachedTenant, LimitDetachedPool,
	LimitUpstreamStreamsPrincipal, LimitUpstreamStreamsTenant)

// The shares of the stdio processes one principal and one tenant hold:
// limits.stdio_processes_per_principal and _per_tenant of
// limits.stdio_processes, and upstreams[].stdio.max_processes_per_principal
// and _per_tenant of upstreams[].stdio.max_processes.
const (
	LimitStdioProcessesPrincipal = "stdio_processes_per_principal"
	LimitStdioProcessesTenant    = "stdio_processes_per_tenant"
	LimitMaxProcessesPrincipal   = "max_processes_per_principal"
	LimitMaxProcessesTenant      = "max_processes_per_tenant"
)

func init() {
	for _, l := range []string{LimitStdioProcessesPrincipal, LimitStdioProcessesTenant, LimitMaxProcessesPrincipal, LimitMaxProcessesTenant} {
		limitNames[l] = true
	}
}

// LimitRejection records a request or an upstream answer refused at a
// limit: mcpgw_limit_rejections_total{limit,tenant}. limit is one of the
// Limit constants; tenant is "" for an upstream's answer that no one
// tenant caused.
func (m *Metrics) LimitRejection(limit, tenant string) {
	if m == nil {
		return
	}
	if !limitNames[limit] {
		limit = otherLabel
	}
	m.limits.WithLabelValues(limit, m.tenant(tenant)).Inc()
}

// Reasons a listed name is flagged: the values of the reason label of
// mcpgw_upstream_names_flagged_total.
const (
	NameControlCharacter = "control_character" // dropped: a control, format or bidi character
	NameForeignNamespace = "foreign_namespace" // dropped: in another upstream's namespace
	NameNonstandard      = "nonstandard"       // kept: outside the recommended characters
)

var nameReasons = set(NameControlCharacter, NameForeignNamespace, NameNonstandard)

// NameFlagged records a name an upstream listed that breaks a naming rule:
// mcpgw_upstream_names_flagged_total{upstream,reason}.
func (m *Metrics) NameFlagged(upstream, reason string) {
	if m == nil {
		return
	}
	if !nameReasons[reason] {
		reason = otherLabel
	}
	m.names.WithLabelValues(m.upstream(upstream), reason).Inc()
}

// Schemas a tool call is checked against: the values of the schema label
// of mcpgw_schema_violations_total.
const (
	SchemaInput  = "input"
	SchemaOutput = "output"
)

// SchemaViolation records a tool call whose arguments (schema
// SchemaInput) or structured result (SchemaOutput) did not match the
// tool's schema: mcpgw_schema_violations_total{tenant,upstream,schema}.
func (m *Metrics) SchemaViolation(tenant, upstream, schema string) {
	if m == nil {
		return
	}
	if schema != SchemaInput {
		schema = SchemaOutput
	}
	m.schemas.WithLabelValues(m.tenant(tenant), m.upstream(upstream), schema).Inc()
}

// QuarantinedItems sets mcpgw_quarantined_items{upstream,kind}: kind is
// "tool" or "prompt".
func (m *Metrics) QuarantinedItems(upstream, kind string, n int) {
	if m == nil {
		return
	}
	if kind != "prompt" {
		kind = "tool"
	}
	m.pinned.WithLabelValues(m.upstream(upstream), kind).Set(float64(n))
}

// Upstream credential modes: the values of the mode label of
// mcpgw_upstream_token_fetches_total.
var tokenModes = set("client_credentials", "token_exchange", "signed_identity", "user_oauth")

// TokenFetch records a token the gateway fetched for an upstream:
// mcpgw_upstream_token_fetches_total{upstream,mode,outcome}, outcome "ok"
// or "error".
func (m *Metrics) TokenFetch(upstream, mode, outcome string) {
	if m == nil {
		return
	}
	if !tokenModes[mode] {
		mode = otherLabel
	}
	if outcome != "ok" {
		outcome = "error"
	}
	m.tokens.WithLabelValues(m.upstream(upstream), mode, outcome).Inc()
}

// Budgets: the values of the budget label of mcpgw_budget_refusals_total.
var budgetKinds = set("rate_limit", "quota", "concurrency", "circuit_breaker")

// BudgetRefusal records a request refused by a budget:
// mcpgw_budget_refusals_total{budget,name,tenant}. name is a rule's name
// or an upstream's, from the config.
func (m *Metrics) BudgetRefusal(kind, name, tenant string) {
	if m == nil {
		return
	}
	if !budgetKinds[kind] {
		kind = otherLabel
	}
	m.budgets.WithLabelValues(kind, m.budgetNames.value(name), m.tenant(tenant)).Inc()
}

// QuotaUsed sets mcpgw_quota_used{tenant,quota}: the calls counted in the
// quota's current period.
func (m *Metrics) QuotaUsed(tenant, quota string, used int64) {
	if m == nil {
		return
	}
	m.quotas.WithLabelValues(m.tenant(tenant), m.budgetNames.value(quota)).Set(float64(used))
}

// CircuitOpen sets mcpgw_circuit_open{upstream}.
func (m *Metrics) CircuitOpen(upstream string, open bool) {
	if m == nil {
		return
	}
	v := 0.0
	if open {
		v = 1
	}
	m.circuits.WithLabelValues(m.upstream(upstream)).Set(v)
}

// UpstreamProcess returns the hook that records the processes of stdio
// upstream u (see upstream.Options.OnProcess):
// mcpgw_upstream_processes{upstream} and
// mcpgw_upstream_process_exits_total{upstream,reason}. It returns nil for
// a nil *Metrics.
func (m *Metrics) UpstreamProcess(u string) func(delta int, exited bool) {
	if m == nil {
		return nil
	}
	u = m.upstream(u)
	return func(delta int, exited bool) {
		m.procs.WithLabelValues(u).Add(float64(delta))
		if delta < 0 {
			reason := "stopped"
			if exited {
				reason = "exited"
			}
			m.exits.WithLabelValues(u, reason).Inc()
		}
	}
}

func (m *Metrics) tenant(t string) string {
	if t == "" {
		return noneLabel
	}
	return m.tenants.value(t)
}

func (m *Metrics) upstream(u string) string {
	if u == "" {
		return noneLabel
	}
	return m.upstreams.value(u)
}
