// Package observe records what a served request leaves behind: its server
// span, the request, tool-call and policy-denial metrics, the refusals of
// budgets and limits, and the audit record of the methods that reach an
// upstream's tools, prompts and resources.
//
// A method is recorded with [Recorder.Start] before it is served and
// [Served.Record] once it is: the outcome is read from the result and the
// error, one classification for the span's status, the metrics' outcome
// label and the audit record's outcome and reason.
package observe

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/guard"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/relay"
	"github.com/mcpgw/gateway/internal/rpcerr"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// A Recorder records served requests. It is made once, for the gateway's
// life; its methods are safe for concurrent use.
type Recorder struct {
	metrics *telemetry.Metrics
	tracer  trace.Tracer
	audit   *audit.Logger
	log     *slog.Logger
}

// New returns a Recorder writing to m, tracer, a and log. A nil m means no
// metrics, a nil tracer no spans, a nil a no audit log and a nil log no
// logging.
func New(m *telemetry.Metrics, tracer trace.Tracer, a *audit.Logger, log *slog.Logger) *Recorder {
	if tracer == nil {
		tracer = telemetry.Tracer(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{metrics: m, tracer: tracer, audit: a, log: log}
}

// A Target is what a method routes on: the kind of what it names in its
// span and in the audit log.
type Target int

const (
	TargetNone Target = iota
	TargetTool
	TargetPrompt
	TargetResource
)

// A Caller is who asks.
type Caller struct {
	// Tenant is the configured tenant id; Subject and ClientID are the
	// token's subject and client id.
	Tenant, Subject, ClientID string
	// SessionID is the MCP session's id ("" without one).
	SessionID string
	// ProtocolVersion is the revision in effect, for the span.
	ProtocolVersion string
}

// A Call is a request as it starts: who asks, and for what method.
type Call struct {
	Caller Caller
	Method string
	ID     jsonrpc.ID
	// Params are the request's params: the span continues the trace
	// context their _meta carries.
	Params json.RawMessage
	// Target is what the method routes on; Audited says each request is
	// an audit record of its own (the methods that reach an upstream's
	// tools, prompts and resources).
	Target  Target
	Audited bool
	// Upstream returns what the audit record of a request routed to the
	// named upstream says of it; ok is false for no upstream of the
	// request's snapshot. It is asked once the request was served, and
	// may be nil.
	Upstream func(name string) (u Upstream, ok bool)
}

// Upstream is what the audit record says of the upstream a request was
// routed to.
type Upstream struct {
	// AuditArguments is its audit_arguments: how a tools/call's
	// arguments are reduced (see audit.ReduceArguments).
	AuditArguments string
	// Credentials is how the gateway reached it for the caller
	// (audit.Record.Credentials): "" for static headers alone.
	Credentials string
}

// A Route is what a request was routed to, as far as it got.
type Route struct {
	// Upstream is the owning upstream; Exposed the tool or prompt name,
	// or resource URI, the client asked for; Original the name or URI at
	// the upstream.
	Upstream, Exposed, Original string
	// Arguments are a tools/call's arguments, as sent upstream.
	Arguments json.RawMessage
}

// A Served is one request being served: see [Recorder.Start].
type Served struct {
	r     *Recorder
	call  Call
	span  trace.Span
	start time.Time
}

// Start starts recording call: its server span, a child of the trace
// context of ctx or of call's _meta, is in the returned context. The
// caller calls Record once the request is served, and End whatever
// happens (deferred).
func (r *Recorder) Start(ctx context.Context, call Call) (context.Context, *Served) {
	s := &Served{r: r, call: call, start: time.Now()}
	who := call.Caller
	ctx, s.span = telemetry.StartServerSpan(ctx, r.tracer, call.Method, "", call.Params,
		telemetry.SessionID(who.SessionID), telemetry.ProtocolVersion(who.ProtocolVersion), telemetry.Tenant(who.Tenant))
	if a, ok := telemetry.RequestID(call.ID.Raw()); ok {
		s.span.SetAttributes(a)
	}
	return ctx, s
}

// End ends the span.
func (s *Served) End() { s.span.End() }

// Record records how the request went, given what it was routed to and
// what it returned: a budget's refusal, the span's name and status, the
// request and tool-call metrics, policy denials, and the audit record of
// an audited method.
func (s *Served) Record(ctx context.Context, route Route, res json.RawMessage, err error) {
	r, c, span := s.r, &s.call, s.span
	d := time.Since(s.start)
	var refusal *budget.Refusal
	if errors.As(err, &refusal) {
		// An audited method's own record says it was refused.
		r.budgetRefused(ctx, c.Caller, c.Method, refusal, !c.Audited)
	}
	if route.Exposed != "" {
		span.SetName(telemetry.SpanName(c.Method, route.Exposed))
		span.SetAttributes(telemetry.Upstream(route.Upstream))
		switch c.Target {
		case TargetTool:
			span.SetAttributes(telemetry.ToolName(route.Exposed))
		case TargetPrompt:
			span.SetAttributes(telemetry.PromptName(route.Exposed))
		case TargetResource:
			span.SetAttributes(telemetry.ResourceURI(route.Exposed))
		}
	}
	tenant := c.Caller.Tenant
	var failed *rpcerr.ToolFailure
	isError := errors.As(err, &failed) || err == nil && c.Target == TargetTool && rpcerr.IsToolError(res)
	outcome := telemetry.OutcomeOK
	decision := audit.DecisionAllow
	var re *catalog.ResolveError
	var pr *policy.Refusal
	var gb *guard.BlockError
	var je *jsonrpc.Error
	switch {
	case refusal != nil:
		outcome, decision = telemetry.OutcomeLimited, audit.DecisionDeny
		telemetry.SetError(span, refusal)
	case isError:
		outcome = telemetry.OutcomeToolError
		telemetry.SetToolError(span)
	case err == nil:
	case rpcerr.Cancelled(ctx, err):
		outcome = telemetry.OutcomeCancelled
		telemetry.SetError(span, err)
	case errors.As(err, &gb):
		outcome, decision = telemetry.OutcomeDenied, audit.DecisionDeny
		telemetry.SetError(span, err)
	case errors.As(err, &pr):
		outcome, decision = telemetry.OutcomeDenied, audit.DecisionDeny
		r.metrics.PolicyDenial(tenant, route.Upstream, pr.Noun)
		telemetry.SetJSONRPCError(span, jsonrpc.CodeInvalidParams, "denied by policy")
	case errors.As(err, &re) && re.DeniedBy != "":
		// Hidden by policy: unknown to the client, but the record
		// names what it hid.
		outcome, decision = telemetry.OutcomeDenied, audit.DecisionDeny
		route.Upstream, route.Original = re.DeniedBy, re.DeniedName
		r.metrics.PolicyDenial(tenant, re.DeniedBy, re.Kind.Info().Noun)
		telemetry.SetJSONRPCError(span, jsonrpc.CodeInvalidParams, "denied by policy")
	case errors.As(err, new(*rpcerr.ScopeError)):
		outcome, decision = telemetry.OutcomeDenied, audit.DecisionDeny
		r.metrics.PolicyDenial(tenant, route.Upstream, "scope")
		telemetry.SetError(span, err)
	case errors.Is(err, context.DeadlineExceeded):
		outcome = telemetry.OutcomeTimeout
		telemetry.SetError(span, err)
	case errors.As(err, &je):
		outcome = telemetry.OutcomeError
		telemetry.SetJSONRPCError(span, je.Code, je.Message)
	default:
		outcome = telemetry.OutcomeError
		telemetry.SetError(span, err)
	}
	r.metrics.ObserveRequest(c.Method, tenant, outcome, d)
	if c.Target == TargetTool && route.Upstream != "" && route.Original != "" {
		r.metrics.ToolCall(tenant, route.Upstream, route.Original, outcome)
	}
	if !c.Audited {
		return
	}
	event := c.Method
	if decision == audit.DecisionDeny && refusal == nil {
		event = audit.EventPolicyDenial
	}
	rec := audit.Record{
		Time: s.start, Event: event, Tenant: tenant,
		Subject: c.Caller.Subject, ClientID: c.Caller.ClientID, SessionID: c.Caller.SessionID,
		Method: c.Method, Upstream: route.Upstream, Decision: decision, Duration: d,
	}
	if sc := span.SpanContext(); sc.HasTraceID() {
		rec.TraceID = sc.TraceID().String()
	}
	if c.Target == TargetResource {
		rec.URI = route.Original
	} else {
		rec.Tool = route.Original
	}
	switch outcome {
	case telemetry.OutcomeOK:
		rec.Outcome = audit.OutcomeOK
	case telemetry.OutcomeToolError:
		rec.Outcome = audit.OutcomeIsError
	case telemetry.OutcomeLimited:
		rec.Outcome = audit.OutcomeDenied
		rec.Reason = refusal.Reason()
	case telemetry.OutcomeDenied:
		rec.Outcome = audit.OutcomeDenied
		switch {
		case gb != nil:
			rec.Reason = "guard: " + gb.Kinds()
		case pr != nil:
			rec.Reason = "policy: " + pr.Decision.Rule()
		case re != nil:
			rec.Reason = "hidden by policy"
		default:
			rec.Reason = "insufficient scope"
		}
	default:
		rec.Outcome = audit.OutcomeError
		rec.Reason = relay.FailureReason(err)
	}
	if c.Upstream != nil && route.Upstream != "" {
		if up, ok := c.Upstream(route.Upstream); ok {
			if route.Arguments != nil {
				rec.Arguments = audit.ReduceArguments(up.AuditArguments, route.Arguments)
			}
			rec.Credentials = up.Credentials
		}
	}
	r.audit.Record(ctx, rec)
}

// BudgetRefused records a request refused by a budget before it was
// served (at the edge: see budget.Engine.Edge): the metric, and an audit
// record of the refusal. method is "" for an HTTP request refused before
// its body was read.
func (r *Recorder) BudgetRefused(ctx context.Context, who Caller, method string, ref *budget.Refusal) {
	r.budgetRefused(ctx, who, method, ref, true)
}

// budgetRefused records a refusal: the metric, and with record an audit
// record (an audited method's record of its own says it instead).
func (r *Recorder) budgetRefused(ctx context.Context, who Caller, method string, ref *budget.Refusal, record bool) {
	r.metrics.BudgetRefusal(string(ref.Kind), ref.Name, who.Tenant)
	if record {
		r.refused(ctx, who, method, ref.Reason())
	}
}

// PolicyDecided counts a decision of a tenant's policy rules, by what
// decided it (mcpgw_policy_decisions_total).
func (r *Recorder) PolicyDecided(tenant string, d *policy.Decision) {
	source := telemetry.PolicyByDefault
	switch d.By {
	case policy.ByRule:
		source = telemetry.PolicyByRule
	case policy.ByPDP:
		source = telemetry.PolicyByPDP
	}
	r.metrics.PolicyDecision(tenant, source, d.Allow)
}

// LimitHit records a refusal at limit (a telemetry.Limit* name): every
// refusal is counted in mcpgw_limit_rejections_total and audited as
// audit.EventLimit with the limit's name as the reason, so that an
// operator can tell which cap a tenant reached. method is "" when the
// request's method is not known (yet).
func (r *Recorder) LimitHit(ctx context.Context, who Caller, limit, method string) {
	r.metrics.LimitRejection(limit, who.Tenant)
	r.refused(ctx, who, method, limit)
}

// refused writes the audit record of a request refused at a limit.
func (r *Recorder) refused(ctx context.Context, who Caller, method, reason string) {
	r.audit.Record(ctx, audit.Record{
		Event: audit.EventLimit, Tenant: who.Tenant, Subject: who.Subject, ClientID: who.ClientID, SessionID: who.SessionID,
		Method: method, Decision: audit.DecisionDeny, Outcome: audit.OutcomeDenied, Reason: reason,
	})
}

// CircuitChanged is the breakers' hook (budget.Guards.Notify): the
// circuit of upstream opened or closed.
func (r *Recorder) CircuitChanged(upstream string, open bool) {
	r.metrics.CircuitOpen(upstream, open)
	if open {
		r.log.Warn("circuit open: upstream failing; calls fail at once and lists leave it out", "upstream", upstream)
	} else {
		r.log.Info("circuit closed: upstream answers again", "upstream", upstream)
	}
}
