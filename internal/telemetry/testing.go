package telemetry

import (
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// NewTestTracerProvider returns a tracer provider that samples every span
// and hands it, once ended, to the returned in-memory exporter, for tests
// to read with GetSpans. It is for tests of any package; it is here rather
// than in a _test.go file so that they can share it.
func NewTestTracerProvider() (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSyncer(exp),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	return tp, exp
}
