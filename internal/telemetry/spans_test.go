package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// gatewayFlow runs one request through the pieces the gateway wires
// together: the HTTP middleware, the MCP server span from params, and a
// client span whose context goes upstream in headers and _meta. It returns
// what an upstream would receive.
func gatewayFlow(t *testing.T, tp trace.TracerProvider, header http.Header, params string) (upHeader http.Header, upParams json.RawMessage) {
	t.Helper()
	tracer := Tracer(tp)
	h := HTTPMiddleware(tp, "/mcp")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := StartServerSpan(r.Context(), tracer, "tools/call", "demo__echo", json.RawMessage(params),
			Tenant("acme"), SessionID("s-1"), ProtocolVersion("2025-11-25"), ToolName("demo__echo"))
		defer span.End()
		cctx, cspan := StartClientSpan(ctx, tracer, "demo", "tools/call", "echo", ToolName("echo"))
		defer cspan.End()
		upHeader = http.Header{}
		InjectHeaders(cctx, upHeader)
		var err error
		if upParams, err = InjectMeta(cctx, json.RawMessage(params)); err != nil {
			t.Errorf("InjectMeta: %v", err)
		}
		w.WriteHeader(http.StatusOK)
	}))
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
	for k, v := range header {
		req.Header[k] = v
	}
	h.ServeHTTP(httptest.NewRecorder(), req)
	return upHeader, upParams
}

// byName returns the ended spans by name.
func byName(t *testing.T, exp *tracetest.InMemoryExporter) map[string]tracetest.SpanStub {
	t.Helper()
	m := make(map[string]tracetest.SpanStub)
	for _, s := range exp.GetSpans() {
		m[s.Name] = s
	}
	if len(m) != 3 {
		t.Fatalf("got spans %v, want 3", m)
	}
	return m
}

func attrs(s tracetest.SpanStub) map[attribute.Key]string {
	m := make(map[attribute.Key]string)
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value.String()
	}
	return m
}

func TestSpanTreeMetaWins(t *testing.T) {
	tp, exp := NewTestTracerProvider()
	const headerTrace = "11111111111111111111111111111111"
	const metaTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	const metaSpan = "a3ce929d0e0e4736"
	header := http.Header{"Traceparent": {"00-" + headerTrace + "-1111111111111111-01"}}
	params := `{"name":"demo__echo","_meta":{"progressToken":1,"traceparent":"00-` + metaTrace + `-` + metaSpan + `-01"}}`
	upHeader, upParams := gatewayFlow(t, tp, header, params)

	spans := byName(t, exp)
	httpSpan, server, client := spans["POST /mcp"], spans["tools/call demo__echo"], spans["tools/call echo"]

	// The HTTP span follows the headers.
	if got := httpSpan.Parent.TraceID().String(); got != headerTrace {
		t.Errorf("HTTP span parent trace = %s, want the header's %s", got, headerTrace)
	}
	// The MCP span follows _meta, and links to the HTTP span.
	if got := server.Parent.SpanID().String(); got != metaSpan || server.SpanContext.TraceID().String() != metaTrace {
		t.Errorf("MCP span parent = %v, want _meta's span %s", server.Parent, metaSpan)
	}
	if len(server.Links) != 1 || !server.Links[0].SpanContext.Equal(httpSpan.SpanContext) {
		t.Errorf("MCP span links = %v, want one to the HTTP span", server.Links)
	}
	if server.SpanKind != trace.SpanKindServer || client.SpanKind != trace.SpanKindClient {
		t.Errorf("kinds: server %v, client %v", server.SpanKind, client.SpanKind)
	}
	// The client span is the MCP span's child, and its context is what
	// the upstream receives, in both places.
	if client.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("client span parent = %v, want the MCP span", client.Parent)
	}
	want := "00-" + metaTrace + "-" + client.SpanContext.SpanID().String() + "-01"
	if got := upHeader.Get("Traceparent"); got != want {
		t.Errorf("upstream traceparent header = %q, want %q", got, want)
	}
	wantParams := `{"name":"demo__echo","_meta":{"progressToken":1,"traceparent":"` + want + `"}}`
	if string(upParams) != wantParams {
		t.Errorf("upstream params = %s, want %s", upParams, wantParams)
	}

	for name, want := range map[string]map[attribute.Key]string{
		"server": {
			AttrMCPMethodName: "tools/call", AttrGenAIOperationName: "execute_tool", AttrTenant: "acme",
			AttrMCPSessionID: "s-1", AttrMCPProtocolVersion: "2025-11-25", AttrGenAIToolName: "demo__echo",
			AttrNetworkTransport: "tcp",
		},
		"client": {AttrMCPMethodName: "tools/call", AttrUpstream: "demo", AttrGenAIToolName: "echo"},
		"http":   {AttrHTTPRequestMethod: "POST", AttrHTTPRoute: "/mcp", AttrHTTPResponseStatusCode: "200"},
	} {
		s := map[string]tracetest.SpanStub{"server": server, "client": client, "http": httpSpan}[name]
		got := attrs(s)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s span: %s = %q, want %q", name, k, got[k], v)
			}
		}
	}
}

func TestSpanTreeHeadersOnly(t *testing.T) {
	tp, exp := NewTestTracerProvider()
	const headerTrace = "11111111111111111111111111111111"
	header := http.Header{"Traceparent": {"00-" + headerTrace + "-1111111111111111-01"}}
	// A malformed _meta traceparent is ignored.
	_, upParams := gatewayFlow(t, tp, header, `{"name":"demo__echo","_meta":{"traceparent":"garbage"}}`)

	spans := byName(t, exp)
	httpSpan, server, client := spans["POST /mcp"], spans["tools/call demo__echo"], spans["tools/call echo"]
	if server.Parent.SpanID() != httpSpan.SpanContext.SpanID() || len(server.Links) != 0 {
		t.Errorf("MCP span parent = %v links %v, want the HTTP span and no link", server.Parent, server.Links)
	}
	for _, s := range []tracetest.SpanStub{httpSpan, server, client} {
		if got := s.SpanContext.TraceID().String(); got != headerTrace {
			t.Errorf("span %q in trace %s, want %s", s.Name, got, headerTrace)
		}
	}
	want := `{"name":"demo__echo","_meta":{"traceparent":"00-` + headerTrace + `-` + client.SpanContext.SpanID().String() + `-01"}}`
	if string(upParams) != want {
		t.Errorf("upstream params = %s, want %s", upParams, want)
	}
}

func TestTracingOffPassesContextThrough(t *testing.T) {
	// With tracing off the gateway makes no spans, but the upstream still
	// joins the client's trace: the no-op tracer carries the incoming
	// span context, and it is what gets injected.
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-a3ce929d0e0e4736-01"
	for _, provider := range []trace.TracerProvider{nil, noopProvider} {
		upHeader, upParams := gatewayFlow(t, provider, nil, `{"_meta":{"traceparent":"`+tp+`"}}`)
		if got := upHeader.Get("Traceparent"); got != tp {
			t.Errorf("upstream traceparent header = %q, want %q", got, tp)
		}
		if want := `{"_meta":{"traceparent":"` + tp + `"}}`; string(upParams) != want {
			t.Errorf("upstream params = %s, want %s", upParams, want)
		}
	}
}

func TestSpanErrors(t *testing.T) {
	tp, exp := NewTestTracerProvider()
	tracer := Tracer(tp)
	end := func(name string, f func(trace.Span)) sdktrace.ReadOnlySpan {
		_, span := tracer.Start(context.Background(), name)
		f(span)
		span.End()
		spans := exp.GetSpans().Snapshots()
		return spans[len(spans)-1]
	}
	tests := []struct {
		name     string
		f        func(trace.Span)
		wantType string
		wantDesc string
		wantCode string
	}{
		{name: "jsonrpc", f: func(s trace.Span) { SetJSONRPCError(s, -32602, "Unknown tool") }, wantType: "-32602", wantDesc: "Unknown tool", wantCode: "-32602"},
		{name: "tool", f: SetToolError, wantType: "tool_error", wantDesc: "tool result has isError: true"},
		{name: "timeout", f: func(s trace.Span) { SetError(s, fmt.Errorf("upstream demo: %w", context.DeadlineExceeded)) }, wantType: "timeout", wantDesc: "upstream demo: context deadline exceeded"},
		{name: "cancelled", f: func(s trace.Span) { SetError(s, context.Canceled) }, wantType: "cancelled", wantDesc: "context canceled"},
		{name: "other", f: func(s trace.Span) { SetError(s, errors.New("boom")) }, wantType: "_OTHER", wantDesc: "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := end(tt.name, tt.f)
			if s.Status().Code != codes.Error || s.Status().Description != tt.wantDesc {
				t.Errorf("status = %v, want Error %q", s.Status(), tt.wantDesc)
			}
			got := attrs(tracetest.SpanStubFromReadOnlySpan(s))
			if got[AttrErrorType] != tt.wantType {
				t.Errorf("error.type = %q, want %q", got[AttrErrorType], tt.wantType)
			}
			if got[AttrRPCResponseStatusCode] != tt.wantCode {
				t.Errorf("rpc.response.status_code = %q, want %q", got[AttrRPCResponseStatusCode], tt.wantCode)
			}
		})
	}
	_, span := tracer.Start(context.Background(), "nil")
	SetError(span, nil)
	span.End()
	if s := exp.GetSpans().Snapshots(); s[len(s)-1].Status().Code != codes.Unset {
		t.Error("SetError(nil) changed the status")
	}
}

func TestRequestID(t *testing.T) {
	tests := []struct {
		raw    string
		want   string
		wantOK bool
	}{
		{raw: `"req-7"`, want: "req-7", wantOK: true},
		{raw: `10`, want: "10", wantOK: true},
		{raw: `"\u0041"`, want: "A", wantOK: true},
		{raw: `null`},
		{raw: ``},
	}
	for _, tt := range tests {
		kv, ok := RequestID(json.RawMessage(tt.raw))
		if ok != tt.wantOK || (ok && (kv.Key != AttrJSONRPCRequestID || kv.Value.AsString() != tt.want)) {
			t.Errorf("RequestID(%s) = %v, %v; want %q, %v", tt.raw, kv, ok, tt.want, tt.wantOK)
		}
	}
}

func TestSpanName(t *testing.T) {
	if got := SpanName("tools/call", "echo"); got != "tools/call echo" {
		t.Errorf("got %q", got)
	}
	if got := SpanName("tools/list", ""); got != "tools/list" {
		t.Errorf("got %q", got)
	}
}

func TestHTTPMiddleware(t *testing.T) {
	tp, exp := NewTestTracerProvider()
	h := HTTPMiddleware(tp, "/mcp")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: 1\n\n"))
		// SSE flushing goes through http.ResponseController.
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil))
	if !rec.Flushed {
		t.Error("the response was not flushed through the middleware")
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Status.Code == codes.Error || attrs(spans[0])[AttrHTTPResponseStatusCode] != "200" {
		t.Errorf("spans = %v", spans)
	}

	exp.Reset()
	h = HTTPMiddleware(tp, "/mcp")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("data: 1\n\n"))
		panic(http.ErrAbortHandler)
	}))
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Errorf("recovered %v, want http.ErrAbortHandler to go on", p)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", nil))
	}()
	spans = exp.GetSpans()
	if len(spans) != 1 || spans[0].Status.Code != codes.Error || attrs(spans[0])[AttrErrorType] != "aborted" {
		t.Errorf("spans = %v", spans)
	}

	exp.Reset()
	h = HTTPMiddleware(tp, "/mcp")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/mcp", nil))
	spans = exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "GET /mcp" || spans[0].Status.Code != codes.Error || attrs(spans[0])[AttrErrorType] != "503" {
		t.Errorf("spans = %v", spans)
	}
}
