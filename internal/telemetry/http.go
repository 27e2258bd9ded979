package telemetry

import (
	"fmt"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// HTTP attribute keys of the OpenTelemetry HTTP semantic conventions.
const (
	AttrHTTPRequestMethod      = attribute.Key("http.request.method")
	AttrHTTPRoute              = attribute.Key("http.route")
	AttrHTTPResponseStatusCode = attribute.Key("http.response.status_code")
	AttrURLPath                = attribute.Key("url.path")
	AttrUserAgentOriginal      = attribute.Key("user_agent.original")
)

// HTTPMiddleware returns middleware that wraps each request in an HTTP
// server span named "{METHOD} {route}" (route is the mounted pattern, such
// as "/mcp", so that span names stay low-cardinality), whose parent is the
// context of the request's traceparent/tracestate/baggage headers. The
// span's context is in the request context the next handler gets; its
// status is Error for 5xx responses and for a handler that panics (the
// panic goes on). A nil tp gives a no-op tracer, which
// still carries the headers' context through to the handler.
//
// The ResponseWriter the next handler gets records the status and
// forwards everything else: it implements Unwrap for
// http.ResponseController (flushing SSE, deadlines) and Flush.
func HTTPMiddleware(tp trace.TracerProvider, route string) func(http.Handler) http.Handler {
	tracer := Tracer(tp)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := ExtractHeaders(r.Context(), r.Header)
			ctx, span := tracer.Start(ctx, r.Method+" "+route,
				trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(
					AttrHTTPRequestMethod.String(r.Method),
					AttrHTTPRoute.String(route),
					AttrURLPath.String(r.URL.Path),
					AttrUserAgentOriginal.String(r.UserAgent()),
				))
			defer span.End()
			defer func() {
				// A handler that fails mid-stream panics with
				// http.ErrAbortHandler (STYLE.md, "Failing mid-stream"):
				// record it, and let the panic go on to net/http.
				if p := recover(); p != nil {
					span.SetAttributes(AttrErrorType.String("aborted"))
					span.SetStatus(codes.Error, fmt.Sprint(p))
					panic(p)
				}
			}()
			sw := &statusWriter{ResponseWriter: w}
			next.ServeHTTP(sw, r.WithContext(ctx))
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			span.SetAttributes(AttrHTTPResponseStatusCode.Int(status))
			if status >= 500 {
				span.SetAttributes(AttrErrorType.String(strconv.Itoa(status)))
				span.SetStatus(codes.Error, "")
			}
		})
	}
}

// statusWriter records the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	// 1xx responses are informational; the final status comes later.
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes the underlying writer, for code that asserts
// http.Flusher rather than using http.ResponseController.
func (w *statusWriter) Flush() {
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}
