package telemetry

import (
	"errors"
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
// panic goes on). A nil tp gives a no-op tracer, which still carries the
// headers' context through to the handler.
//
// The next handler gets a [ResponseWriter]: w itself if it is one
// already (a middleware outside this one wrapped it, and one wrapper per
// request is enough), else a new one.
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
				// The handler panicked: with http.ErrAbortHandler, net/http's
				// way to break off a response, or with a bug. Either way the
				// request failed: record it, and let the panic go on to
				// whatever recovers it outside (net/http at the latest),
				// which answers or aborts the connection.
				if p := recover(); p != nil {
					span.SetAttributes(AttrErrorType.String("aborted"))
					span.SetStatus(codes.Error, fmt.Sprint(p))
					panic(p)
				}
			}()
			sw := WrapResponseWriter(w)
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

// A ResponseWriter records the status written through it, so that a
// middleware can tell what was answered, and whether the answer has
// started: once it has, the status line and headers are on the wire and a
// failure can no longer be reported with a status of its own. It forwards
// everything else, and implements Unwrap for http.ResponseController
// (flushing SSE, deadlines) and Flush for code that asserts http.Flusher.
type ResponseWriter struct {
	http.ResponseWriter
	status int // 0 until the response has started
}

// WrapResponseWriter returns w if it is a *ResponseWriter already, else a
// new one around w.
func WrapResponseWriter(w http.ResponseWriter) *ResponseWriter {
	if rw, ok := w.(*ResponseWriter); ok {
		return rw
	}
	return &ResponseWriter{ResponseWriter: w}
}

// Status is the status the response started with, or 0 if it has not
// started.
func (w *ResponseWriter) Status() int { return w.status }

// Started reports whether the status line has been written (by
// WriteHeader with a final status, a Write or a Flush).
func (w *ResponseWriter) Started() bool { return w.status != 0 }

func (w *ResponseWriter) WriteHeader(code int) {
	// 1xx responses are informational; the final status comes later.
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *ResponseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *ResponseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes the underlying writer, for code that asserts http.Flusher
// and for http.ResponseController, which prefers Flush to Unwrap. A flush
// sends the headers, with 200 if no status was written.
func (w *ResponseWriter) Flush() {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if w.status == 0 && !errors.Is(err, http.ErrNotSupported) {
		w.status = http.StatusOK
	}
}
