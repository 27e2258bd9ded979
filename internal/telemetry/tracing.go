package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpgw/gateway/internal/config"
)

// DefaultServiceName is the service.name of the gateway's spans unless
// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says
// otherwise.
const DefaultServiceName = "mcp-gateway"

var noopProvider trace.TracerProvider = noop.NewTracerProvider()

// SetupTracing returns the tracer provider the gateway traces with, and a
// function that flushes and stops it (call it on shutdown, with a
// deadline). It never installs anything globally.
//
// Tracing is off, and the provider a no-op one, unless cfg.Enabled; the
// environment's OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn
// it off even then. A no-op provider still passes an incoming span context
// through, so upstreams join the client's trace with tracing off.
//
// When on, spans are batched to an OTLP/HTTP (protobuf) exporter. The
// environment, read through getenv (os.Getenv when nil), wins over cfg:
//   - the endpoint is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else
//     OTEL_EXPORTER_OTLP_ENDPOINT or cfg.Endpoint with "/v1/traces"
//     appended to its path, else the SDK's default
//     (http://localhost:4318/v1/traces);
//   - the sampler is OTEL_TRACES_SAMPLER with OTEL_TRACES_SAMPLER_ARG, else
//     parent-based with a trace-id ratio of cfg.SampleRatio (default 1);
//   - service.name is OTEL_SERVICE_NAME, else service.name in
//     OTEL_RESOURCE_ATTRIBUTES, else "mcp-gateway"; service.version is
//     serviceVersion, and OTEL_RESOURCE_ATTRIBUTES adds to the resource.
//
// The exporter itself still reads its other settings
// (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, certificates) from
// the process environment. Settings it cannot honour (another
// OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_PROTOCOL, an unknown sampler,
// a bad URL) are errors, so a typo does not silently lose every trace.
func SetupTracing(ctx context.Context, cfg config.Tracing, serviceVersion string, getenv func(string) string) (trace.TracerProvider, func(context.Context) error, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	noShutdown := func(context.Context) error { return nil }
	if !cfg.Enabled || strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return noopProvider, noShutdown, nil
	}
	switch e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e {
	case "", "otlp":
	case "none":
		return noopProvider, noShutdown, nil
	default:
		return nil, nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q is not supported (want otlp or none)", e)
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(k)); p != "" {
			if p != "http/protobuf" {
				return nil, nil, fmt.Errorf("tracing: %s=%q is not supported (want http/protobuf)", k, p)
			}
			break
		}
	}

	endpoint, err := tracesEndpoint(cfg.Endpoint, getenv)
	if err != nil {
		return nil, nil, err
	}
	sampler, err := newSampler(cfg.SampleRatio, getenv)
	if err != nil {
		return nil, nil, err
	}
	res, err := newResource(serviceVersion, getenv)
	if err != nil {
		return nil, nil, err
	}

	var opts []otlptracehttp.Option
	if endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(endpoint))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: creating the OTLP exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(res),
	)
	return tp, tp.Shutdown, nil
}

// tracesEndpoint returns the full URL spans are posted to, or "" for the
// exporter's default.
func tracesEndpoint(cfgEndpoint string, getenv func(string) string) (string, error) {
	if u := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); u != "" {
		if err := checkEndpoint(u); err != nil {
			return "", fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: %w", err)
		}
		return u, nil
	}
	base, from := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")), "OTEL_EXPORTER_OTLP_ENDPOINT"
	if base == "" {
		base, from = cfgEndpoint, "telemetry.tracing.endpoint"
	}
	if base == "" {
		return "", nil
	}
	if err := checkEndpoint(base); err != nil {
		return "", fmt.Errorf("tracing: %s: %w", from, err)
	}
	// The OTLP spec: the base URL's path gets "v1/traces" appended, with
	// one slash between.
	u, _ := url.Parse(base)
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	u.RawPath = ""
	return u.String(), nil
}

func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http or https URL", s)
	}
	return nil
}

// newSampler builds the sampler named by OTEL_TRACES_SAMPLER, or the
// parent-based ratio sampler of the config.
func newSampler(ratio *float64, getenv func(string) string) (sdktrace.Sampler, error) {
	name := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))
	if name == "" {
		r := 1.0
		if ratio != nil {
			r = *ratio
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	arg := func() (float64, error) {
		s := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
		if s == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", s)
		}
		return r, nil
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		r, err := arg()
		return sdktrace.TraceIDRatioBased(r), err
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		r, err := arg()
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), err
	}
	return nil, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER=%q is not supported (want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio)", name)
}

// newResource describes the gateway process: service name and version,
// OTEL_RESOURCE_ATTRIBUTES, and the SDK.
func newResource(serviceVersion string, getenv func(string) string) (*resource.Resource, error) {
	attrs, err := parseResourceAttributes(getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(getenv("OTEL_SERVICE_NAME"))
	if name == "" {
		for _, kv := range attrs {
			if kv.Key == "service.name" {
				name = kv.Value.AsString()
			}
		}
	}
	if name == "" {
		name = DefaultServiceName
	}
	attrs = append(attrs, attribute.String("service.name", name))
	if serviceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", serviceVersion))
	}
	sdk, err := resource.New(context.Background(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// Later attributes win within NewSchemaless, and the second resource
	// wins in Merge, so service.name and version are ours.
	return resource.Merge(sdk, resource.NewSchemaless(attrs...))
}

// parseResourceAttributes parses OTEL_RESOURCE_ATTRIBUTES: key=value pairs
// separated by commas, values percent-encoded.
func parseResourceAttributes(s string) ([]attribute.KeyValue, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var attrs []attribute.KeyValue
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("tracing: OTEL_RESOURCE_ATTRIBUTES: %q is not key=value", strings.TrimSpace(pair))
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("tracing: OTEL_RESOURCE_ATTRIBUTES: value of %q: %w", k, err)
		}
		attrs = append(attrs, attribute.String(k, val))
	}
	return attrs, nil
}
