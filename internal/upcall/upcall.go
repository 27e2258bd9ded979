// Package upcall is the gateway's side of one request to an upstream,
// around internal/upstream's client: the request's id (IDs, ForwardID),
// its client span and metrics (Begin, Response), its answer read to the
// end (ResultOf, ListOn) or joined with the requests a shared GET stream
// hands it (Merge), the upstream session it goes on, held by the request
// (Held), opened on first use and again when the upstream forgot it (Hop),
// once per gateway session and replica (Opener; Opener.Complete for a new
// session's record), and ended (Terminate; Expiries for the sessions that
// expired in the store), the client requests in flight that a
// cancellation can reach (InFlight), notifications sent to every upstream
// session of a gateway session at once and bounded in time (NotifyAll),
// the upstream sessions set to log for 2026-07-28 callers (Logging), and
// how each upstream's last request went (Health).
//
// What a request is sent with (credentials, budgets, the session it
// belongs to) is the caller's: see internal/dispatch.
package upcall

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/upstream"
)

// A Response is an upstream response in its client span. The span ends,
// and the upstream request is counted, when it is closed, or when Finish
// says the request failed before there was a response.
type Response struct {
	*upstream.Response
	metrics  *telemetry.Metrics
	upstream string
	method   string
	span     trace.Span
	start    time.Time
	err      error // the final error response or failure, if any
	done     bool
	us       session.Upstream // the upstream session the request went on
	// Done, if set, is called once with how the request ended, before
	// it is counted: it releases the request's concurrency slot and
	// reports its outcome to the circuit breaker.
	Done func(error)
}

// Begin starts the client span of a request of method to upstream name
// for tenant, and returns the context that carries it (to the upstream,
// in headers and params._meta) with the Response to Start once sent.
// metrics, if nil, means no metrics.
func Begin(ctx context.Context, tracer trace.Tracer, metrics *telemetry.Metrics, name, method, tenant string) (context.Context, *Response) {
	start := time.Now()
	ctx, span := telemetry.StartClientSpan(ctx, tracer, name, method, "", telemetry.Tenant(tenant))
	return ctx, &Response{metrics: metrics, upstream: name, method: method, span: span, start: start}
}

// Start gives r the upstream's response and the upstream session the
// request went on.
func (r *Response) Start(resp *upstream.Response, us session.Upstream) {
	r.Response, r.us = resp, us
}

// Session is the upstream session the request went on.
func (r *Response) Session() session.Upstream { return r.us }

// Next is upstream.Response.Next, noting how the request ended.
func (r *Response) Next() (*jsonrpc.Message, []byte, error) {
	msg, raw, err := r.Response.Next()
	switch {
	case err != nil:
		r.err = err
	case msg.Kind == jsonrpc.KindErrorResponse:
		r.err = msg.Error
	}
	return msg, raw, err
}

// Close closes the response and ends the span.
func (r *Response) Close() error {
	err := r.Response.Close()
	r.Finish(r.err)
	return err
}

// Finish ends the request with err (nil: it succeeded): Done is called,
// the span ends and the request is counted. Only the first call counts.
func (r *Response) Finish(err error) {
	if r.done {
		return
	}
	r.done = true
	if r.Done != nil {
		r.Done(err)
	}
	outcome := telemetry.OutcomeOK
	var je *jsonrpc.Error
	switch {
	case err == nil:
	case errors.As(err, &je):
		outcome = telemetry.OutcomeError
		telemetry.SetJSONRPCError(r.span, je.Code, je.Message)
	case errors.Is(err, context.DeadlineExceeded):
		outcome = telemetry.OutcomeTimeout
		telemetry.SetError(r.span, err)
	case errors.Is(err, context.Canceled):
		outcome = telemetry.OutcomeCancelled
		telemetry.SetError(r.span, err)
	default:
		outcome = telemetry.OutcomeError
		telemetry.SetError(r.span, err)
	}
	r.metrics.ObserveUpstream(r.upstream, r.method, outcome, time.Since(r.start))
	r.span.End()
}

// ResultOf reads an upstream's answer up to its result, which it returns
// (or the error response, as the error). Notifications on the way go to
// note, if set; requests are ignored.
func ResultOf(next func() (*jsonrpc.Message, []byte, error), note func(*jsonrpc.Message)) (json.RawMessage, error) {
	for {
		msg, _, err := next()
		if err != nil {
			return nil, err
		}
		switch msg.Kind {
		case jsonrpc.KindResponse:
			return msg.Result, nil
		case jsonrpc.KindErrorResponse:
			return nil, msg.Error
		case jsonrpc.KindNotification:
			if note != nil {
				note(msg)
			}
		}
	}
}

// ListOn lists every item of kind k of an upstream on session us, outside
// any client's request (gateway explain, the watch): request ids are
// idPrefix.1, idPrefix.2, … one per page.
func ListOn(ctx context.Context, c *upstream.Client, us session.Upstream, k catalog.Kind, idPrefix string, b catalog.Bounds) ([]json.RawMessage, bool, error) {
	n := 0
	return catalog.Paginate(c.Name(), k, b, func(params json.RawMessage) (json.RawMessage, error) {
		n++
		resp, err := c.Call(ctx, us, jsonrpc.StringID(idPrefix+"."+strconv.Itoa(n)), k.Info().ListMethod, params)
		if err != nil {
			return nil, err
		}
		defer resp.Close()
		return resp.Result()
	})
}
