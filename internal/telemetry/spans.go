package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/gateway/internal/protocol"
)

// ScopeName is the instrumentation scope of the gateway's spans.
const ScopeName = "github.com/mcpgw/gateway"

// Tracer returns the gateway's tracer from tp; a nil tp gives a no-op
// tracer (which still carries an incoming span context through, so that
// propagation works with tracing off).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noopProvider
	}
	return tp.Tracer(ScopeName)
}

// Attribute keys of the OpenTelemetry semantic conventions for MCP
// (https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/, status
// Development) and the registries they draw on, plus the gateway's own
// under mcpgw.*.
const (
	// AttrMCPMethodName is the JSON-RPC method ("tools/call"). Required on
	// MCP spans.
	AttrMCPMethodName = attribute.Key("mcp.method.name")
	// AttrMCPSessionID is the Mcp-Session-Id of the session the request
	// belongs to. It goes on spans only, never on metrics.
	AttrMCPSessionID = attribute.Key("mcp.session.id")
	// AttrMCPProtocolVersion is the negotiated MCP version ("2025-11-25").
	AttrMCPProtocolVersion = attribute.Key("mcp.protocol.version")
	// AttrMCPResourceURI is the URI of resources/read, subscribe and
	// unsubscribe.
	AttrMCPResourceURI = attribute.Key("mcp.resource.uri")
	// AttrGenAIToolName is the tool of a tools/call.
	AttrGenAIToolName = attribute.Key("gen_ai.tool.name")
	// AttrGenAIPromptName is the prompt of a prompts/get.
	AttrGenAIPromptName = attribute.Key("gen_ai.prompt.name")
	// AttrGenAIOperationName is "execute_tool" on tools/call spans.
	AttrGenAIOperationName = attribute.Key("gen_ai.operation.name")
	// AttrJSONRPCRequestID is the request's id as a string; left out for
	// notifications and null ids.
	AttrJSONRPCRequestID = attribute.Key("jsonrpc.request.id")
	// AttrRPCResponseStatusCode is the JSON-RPC error code of the response
	// ("-32602"), when it has one.
	AttrRPCResponseStatusCode = attribute.Key("rpc.response.status_code")
	// AttrErrorType classifies a failure: the JSON-RPC error code,
	// "tool_error" for a result with isError, or an error class such as
	// "timeout".
	AttrErrorType = attribute.Key("error.type")
	// AttrNetworkTransport is "tcp" for Streamable HTTP.
	AttrNetworkTransport = attribute.Key("network.transport")
	// AttrNetworkProtocolName is "http" for Streamable HTTP.
	AttrNetworkProtocolName = attribute.Key("network.protocol.name")

	// AttrTenant is the tenant id the request was served for.
	AttrTenant = attribute.Key("mcpgw.tenant")
	// AttrUpstream is the name of the upstream a request went to.
	AttrUpstream = attribute.Key("mcpgw.upstream")
)

// OperationExecuteTool is the gen_ai.operation.name of tools/call spans.
const OperationExecuteTool = "execute_tool"

// ErrorTypeToolError is the error.type of a tools/call whose result has
// isError: true.
const ErrorTypeToolError = "tool_error"

// MethodName returns the mcp.method.name attribute.
func MethodName(method string) attribute.KeyValue { return AttrMCPMethodName.String(method) }

// SessionID returns the mcp.session.id attribute.
func SessionID(id string) attribute.KeyValue { return AttrMCPSessionID.String(id) }

// ProtocolVersion returns the mcp.protocol.version attribute.
func ProtocolVersion(v string) attribute.KeyValue { return AttrMCPProtocolVersion.String(v) }

// ResourceURI returns the mcp.resource.uri attribute.
func ResourceURI(uri string) attribute.KeyValue { return AttrMCPResourceURI.String(uri) }

// ToolName returns the gen_ai.tool.name attribute.
func ToolName(name string) attribute.KeyValue { return AttrGenAIToolName.String(name) }

// PromptName returns the gen_ai.prompt.name attribute.
func PromptName(name string) attribute.KeyValue { return AttrGenAIPromptName.String(name) }

// Tenant returns the mcpgw.tenant attribute.
func Tenant(id string) attribute.KeyValue { return AttrTenant.String(id) }

// Upstream returns the mcpgw.upstream attribute.
func Upstream(name string) attribute.KeyValue { return AttrUpstream.String(name) }

// RequestID returns the jsonrpc.request.id attribute for a raw JSON-RPC id:
// a string id unquoted, a number as written. ok is false for an absent or
// null id (a notification), which the conventions leave out.
func RequestID(raw json.RawMessage) (kv attribute.KeyValue, ok bool) {
	if isAbsent(raw) {
		return attribute.KeyValue{}, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return AttrJSONRPCRequestID.String(s), true
		}
	}
	return AttrJSONRPCRequestID.String(string(raw)), true
}

// SpanName returns the name of an MCP span: "{method} {target}", target
// being the tool or prompt name, or just the method when target is ""
// (resource URIs are left out of names, as the conventions advise: they
// are not low-cardinality).
func SpanName(method, target string) string {
	if target == "" {
		return method
	}
	return method + " " + target
}

// StartServerSpan starts the MCP server span of one client request or
// notification, named [SpanName](method, target), of kind server, with
// mcp.method.name, the gen_ai.operation.name of tools/call, and attrs.
//
// Its parent is the context in params._meta when that holds a valid
// traceparent, and ctx's span (the HTTP server span) otherwise; in the
// first case the span links to ctx's span. The returned context also
// carries the _meta baggage, if any. See the package documentation for
// why _meta wins.
func StartServerSpan(ctx context.Context, tracer trace.Tracer, method, target string, params json.RawMessage, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ambient := trace.SpanContextFromContext(ctx)
	pctx := ExtractMeta(ctx, params)
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	if parent := trace.SpanContextFromContext(pctx); ambient.IsValid() && !parent.Equal(ambient) {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: ambient}))
	}
	opts = append(opts, trace.WithAttributes(mcpAttrs(method, attrs)...))
	return tracer.Start(pctx, SpanName(method, target), opts...)
}

// StartClientSpan starts the client span of one request or notification
// to upstream, named [SpanName](method, target), of kind client, with
// mcp.method.name, mcpgw.upstream, the gen_ai.operation.name of
// tools/call, and attrs. Inject the returned context into the outgoing
// request with [InjectHeaders] and [InjectMeta].
func StartClientSpan(ctx context.Context, tracer trace.Tracer, upstream, method, target string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	all := append(mcpAttrs(method, attrs), Upstream(upstream))
	return tracer.Start(ctx, SpanName(method, target),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(all...))
}

func mcpAttrs(method string, attrs []attribute.KeyValue) []attribute.KeyValue {
	all := make([]attribute.KeyValue, 0, len(attrs)+4)
	all = append(all, MethodName(method),
		AttrNetworkTransport.String("tcp"), AttrNetworkProtocolName.String("http"))
	if method == protocol.MethodToolsCall {
		all = append(all, AttrGenAIOperationName.String(OperationExecuteTool))
	}
	return append(all, attrs...)
}

// SetJSONRPCError marks span as failed with a JSON-RPC error:
// rpc.response.status_code and error.type are the code, and the status is
// Error with message as its description.
func SetJSONRPCError(span trace.Span, code int64, message string) {
	c := strconv.FormatInt(code, 10)
	span.SetAttributes(AttrRPCResponseStatusCode.String(c), AttrErrorType.String(c))
	span.SetStatus(codes.Error, message)
}

// SetToolError marks span as failed with a tools/call result that has
// isError: true (error.type "tool_error").
func SetToolError(span trace.Span) {
	span.SetAttributes(AttrErrorType.String(ErrorTypeToolError))
	span.SetStatus(codes.Error, "tool result has isError: true")
}

// SetError marks span as failed with err: error.type is "timeout" for a
// deadline, "cancelled" for a cancellation and "_OTHER" otherwise (the
// conventions' fallback), the error is recorded as an event, and the
// status is Error with err's text. A nil err does nothing.
func SetError(span trace.Span, err error) {
	if err == nil {
		return
	}
	typ := "_OTHER"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		typ = OutcomeTimeout
	case errors.Is(err, context.Canceled):
		typ = OutcomeCancelled
	}
	span.SetAttributes(AttrErrorType.String(typ))
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}
