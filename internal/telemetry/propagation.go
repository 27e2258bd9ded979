package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/propagation"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// The _meta keys that carry trace context (MCP 2026-07-28, basic/index.mdx,
// "OpenTelemetry trace context"): unprefixed, as an exception to the
// _meta key rules, with W3C Trace Context and W3C Baggage values.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
	MetaBaggage     = "baggage"
)

// propagator reads and writes W3C Trace Context and W3C Baggage, the only
// formats MCP defines for _meta; the headers use the same so that an
// upstream reading either sees one context.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Propagator returns the propagator the gateway uses for headers and
// _meta: W3C Trace Context and W3C Baggage.
func Propagator() propagation.TextMapPropagator { return propagator }

// ExtractHeaders returns ctx with the trace context and baggage of the
// traceparent, tracestate and baggage headers in h; invalid ones are
// ignored.
func ExtractHeaders(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// InjectHeaders sets the traceparent, tracestate and baggage headers of an
// outgoing request from ctx. It sets nothing when ctx has no valid span
// context and no baggage.
func InjectHeaders(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// metaCarrier is a read-only TextMapCarrier over a _meta object. Keys
// match exactly (JSON member names are case-sensitive) and only string
// members count.
type metaCarrier struct{ o *jsonx.Object }

func (c metaCarrier) Get(key string) string {
	s, _ := c.o.GetString(key)
	return s
}

func (c metaCarrier) Set(string, string) {}

func (c metaCarrier) Keys() []string {
	keys := make([]string, len(c.o.Members))
	for i, m := range c.o.Members {
		keys[i] = m.Name
	}
	return keys
}

// ExtractMeta returns ctx with the trace context and baggage carried in
// params._meta (traceparent, tracestate, baggage), params being a request's
// or notification's raw params, from a message the caller validated whole
// (they are not validated again: that pass would cost more than the rest). When params is absent or malformed, has no
// _meta object, or its traceparent is not valid W3C Trace Context, ctx's
// span context is left as it was; likewise for baggage. See the package
// documentation for how this combines with the headers.
func ExtractMeta(ctx context.Context, params json.RawMessage) context.Context {
	meta := metaObject(params)
	if meta == nil {
		return ctx
	}
	return propagator.Extract(ctx, metaCarrier{meta})
}

// metaObject returns the parsed params._meta, or nil.
func metaObject(params json.RawMessage) *jsonx.Object {
	if isAbsent(params) {
		return nil
	}
	p, err := jsonx.ParseValidObject(params)
	if err != nil {
		return nil
	}
	raw := p.Get("_meta")
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	meta, err := jsonx.ParseValidObject(raw)
	if err != nil {
		return nil
	}
	return meta
}

// ErrParamsNotObject is returned by [InjectMeta] for params, or a _meta in
// them, that is neither absent nor a JSON object.
var ErrParamsNotObject = errors.New("params and params._meta must be JSON objects")

// InjectMeta returns params with the trace context of ctx in
// params._meta: traceparent and tracestate (which travel as a pair: a
// tracestate already there is removed when ctx has none) and, when ctx
// carries baggage, baggage. Every other member of params and of _meta
// keeps its value byte for byte and its place; new members go last. A
// missing _meta (or "_meta": null) is created, and absent params (empty
// or null) become {"_meta":{...}}.
//
// When ctx has neither a valid span context nor baggage, params is
// returned as it is. On error (params or _meta not an object, or not
// valid JSON) params is returned as it is, with the error, so that a
// caller may forward it unchanged.
func InjectMeta(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	fields := propagation.MapCarrier{}
	propagator.Inject(ctx, fields)
	if len(fields) == 0 {
		return params, nil
	}

	p := &jsonx.Object{}
	if !isAbsent(params) {
		var err error
		if p, err = jsonx.ParseValidObject(params); err != nil {
			return params, fmt.Errorf("%w: %v", ErrParamsNotObject, err)
		}
	}
	if err := injectFields(fields, p); err != nil {
		return params, err
	}
	return p.Bytes(), nil
}

// InjectMetaObject is InjectMeta for params that are the object p: it
// returns p when there is nothing to inject, else a copy of p with the
// trace context in its _meta, whose encoding is what InjectMeta returns
// for p's. p is never changed, and nothing but _meta is encoded, so that
// large params are not copied for it. On error p is returned, with the
// error.
func InjectMetaObject(ctx context.Context, p *jsonx.Object) (*jsonx.Object, error) {
	fields := propagation.MapCarrier{}
	propagator.Inject(ctx, fields)
	if len(fields) == 0 {
		return p, nil
	}
	q := p.Clone()
	if err := injectFields(fields, q); err != nil {
		return p, err
	}
	return q, nil
}

// injectFields sets the trace context fields in p's _meta, as InjectMeta
// describes; on error p is unchanged.
func injectFields(fields propagation.MapCarrier, p *jsonx.Object) error {
	meta := &jsonx.Object{}
	if raw := p.Get("_meta"); !isAbsent(raw) {
		var err error
		if meta, err = jsonx.ParseValidObject(raw); err != nil {
			return fmt.Errorf("%w: _meta: %v", ErrParamsNotObject, err)
		}
	}
	if tp, ok := fields[MetaTraceparent]; ok {
		meta.SetString(MetaTraceparent, tp)
		if ts, ok := fields[MetaTracestate]; ok {
			meta.SetString(MetaTracestate, ts)
		} else {
			meta.Delete(MetaTracestate)
		}
	}
	if b, ok := fields[MetaBaggage]; ok {
		meta.SetString(MetaBaggage, b)
	}
	p.Set("_meta", meta.Bytes())
	return nil
}

// isAbsent reports whether raw JSON stands for no value: empty, only
// whitespace, or null.
func isAbsent(raw json.RawMessage) bool {
	// JSON's whitespace only: a form feed is not, and makes raw invalid.
	raw = bytes.Trim(raw, " \t\n\r")
	return len(raw) == 0 || string(raw) == "null"
}
