package dispatch

import (
	"context"
	"encoding/json"
	"errors"
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

// The request pipeline. A method's handler (its entry's serve) answers the
// method and nothing else; the steps every request takes around it are
// wrappers, each returning what the handler inside returned or an answer
// of its own:
//
//		answered(observed(consented(serve)))
//
//	  - consented turns a per-user credential's demand for consent into
//	    the answer the caller can act on (see consentAnswer);
//	  - observed records the request: its span, the request and tool-call
//	    metrics, a budget's refusal, policy denials and the audit record;
//	  - answered turns a tools/call's tool failure, or a budget's refusal
//	    of it, into the result with isError: true a model can act on.
//
// Each method's chain is built once, with the table (Method.handle).
func pipeline(serve methodFunc) methodFunc { return answered(observed(consented(serve))) }

func consented(next methodFunc) methodFunc {
	return func(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
		res, err := next(ctx, rq, c)
		if r, e, ok := rq.h.consentAnswer(ctx, rq, c, err); ok {
			return r, e
		}
		return res, err
	}
}

func observed(next methodFunc) methodFunc {
	return func(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
		h := rq.h
		start := time.Now()
		ctx, span := telemetry.StartServerSpan(ctx, h.tracer, c.method, "", c.params,
			telemetry.SessionID(rq.Session.ID), telemetry.ProtocolVersion(rq.adm.Version), telemetry.Tenant(rq.view.ID))
		if a, ok := telemetry.RequestID(c.id.Raw()); ok {
			span.SetAttributes(a)
		}
		defer span.End()
		res, err := next(ctx, rq, c)
		if ref := (*budget.Refusal)(nil); errors.As(err, &ref) {
			h.budgetRefused(ctx, rq, c.method, ref, !c.m.audited)
		}
		if c.target != "" {
			span.SetName(telemetry.SpanName(c.method, c.target))
			span.SetAttributes(telemetry.Upstream(c.upstream))
			switch c.m.target {
			case targetTool:
				span.SetAttributes(telemetry.ToolName(c.target))
			case targetPrompt:
				span.SetAttributes(telemetry.PromptName(c.target))
			case targetResource:
				span.SetAttributes(telemetry.ResourceURI(c.target))
			}
		}
		h.observeRequest(ctx, rq, c, res, err, span, start)
		return res, err
	}
}

func answered(next methodFunc) methodFunc {
	return func(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
		res, err := next(ctx, rq, c)
		if err == nil {
			return res, nil
		}
		if f := (*toolFailure)(nil); errors.As(err, &f) {
			return toolError(f.text), nil
		}
		if gb := (*guard.BlockError)(nil); c.m.target == targetTool && errors.As(err, &gb) {
			return toolError(gb.Error()), nil
		}
		if pr := (*policy.Refusal)(nil); c.m.target == targetTool && errors.As(err, &pr) && pr.Unknown == nil && pr.Decision.AsResult {
			return toolError(pr.Message()), nil
		}
		if ref := (*budget.Refusal)(nil); c.m.target == targetTool && errors.As(err, &ref) {
			// A model can act on it (2025-11-25 server/tools, "Error
			// Handling"): wait, or do without.
			return ref.ToolResult(), nil
		}
		return res, err
	}
}

// cancelled reports whether a request ended because its client cancelled
// it or went away.
func cancelled(ctx context.Context, err error) bool {
	return errors.Is(context.Cause(ctx), rpcerr.ErrCancelledByClient) || rpcerr.ClientGone(ctx, err)
}

// observeRequest records how a request went: its span's status, the request and
// tool-call metrics, policy denials, and the audit record of the methods
// that reach an upstream's tools, prompts and resources. It returns the
// outcome.
func (h *Server) observeRequest(ctx context.Context, rq *Request, c *call, res json.RawMessage, err error, span trace.Span, start time.Time) {
	d := time.Since(start)
	var refusal *budget.Refusal
	errors.As(err, &refusal)
	var failed *toolFailure
	isError := errors.As(err, &failed) || err == nil && c.m.target == targetTool && isToolError(res)
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
	case cancelled(ctx, err):
		outcome = telemetry.OutcomeCancelled
		telemetry.SetError(span, err)
	case errors.As(err, &gb):
		outcome, decision = telemetry.OutcomeDenied, audit.DecisionDeny
		telemetry.SetError(span, err)
	case errors.As(err, &pr):
		outcome, decision = telemetry.OutcomeDenied, audit.DecisionDeny
		h.metrics.PolicyDenial(rq.view.ID, c.upstream, pr.Noun)
		telemetry.SetJSONRPCError(span, jsonrpc.CodeInvalidParams, "denied by policy")
	case errors.As(err, &re) && re.DeniedBy != "":
		outcome, decision = telemetry.OutcomeDenied, audit.DecisionDeny
		c.upstream, c.original = re.DeniedBy, re.DeniedName
		h.metrics.PolicyDenial(rq.view.ID, re.DeniedBy, re.Kind.Info().Noun)
		telemetry.SetJSONRPCError(span, jsonrpc.CodeInvalidParams, "denied by policy")
	case errors.As(err, new(*rpcerr.ScopeError)):
		outcome, decision = telemetry.OutcomeDenied, audit.DecisionDeny
		h.metrics.PolicyDenial(rq.view.ID, c.upstream, "scope")
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
	h.metrics.ObserveRequest(c.method, rq.view.ID, outcome, d)
	if c.m.target == targetTool && c.upstream != "" && c.original != "" {
		h.metrics.ToolCall(rq.view.ID, c.upstream, c.original, outcome)
	}
	if !c.m.audited {
		return
	}
	event := c.method
	if decision == audit.DecisionDeny && refusal == nil {
		event = audit.EventPolicyDenial
	}
	r := audit.Record{
		Time: start, Event: event, Tenant: rq.view.ID,
		Subject: rq.principal.Subject, ClientID: rq.principal.ClientID, SessionID: rq.Session.ID,
		Method: c.method, Upstream: c.upstream, Decision: decision, Duration: d,
		TraceID: span.SpanContext().TraceID().String(),
	}
	if !span.SpanContext().HasTraceID() {
		r.TraceID = ""
	}
	if c.m.target == targetResource {
		r.URI = c.original
	} else {
		r.Tool = c.original
	}
	switch outcome {
	case telemetry.OutcomeOK:
		r.Outcome = audit.OutcomeOK
	case telemetry.OutcomeToolError:
		r.Outcome = audit.OutcomeIsError
	case telemetry.OutcomeLimited:
		r.Outcome = audit.OutcomeDenied
		r.Reason = refusal.Reason()
	case telemetry.OutcomeDenied:
		r.Outcome = audit.OutcomeDenied
		switch {
		case gb != nil:
			r.Reason = "guard: " + gb.Kinds()
		case pr != nil:
			r.Reason = "policy: " + pr.Decision.Rule()
		case re != nil:
			r.Reason = "hidden by policy"
		default:
			r.Reason = "insufficient scope"
		}
	default:
		r.Outcome = audit.OutcomeError
		r.Reason = relay.FailureReason(err)
	}
	if up := rq.st.ByName[c.upstream]; up != nil {
		if c.arguments != nil {
			r.Arguments = audit.ReduceArguments(up.Cfg.AuditArguments, c.arguments)
		}
		r.Credentials = rq.mode(up)
	}
	h.audit.Record(ctx, r)
}
