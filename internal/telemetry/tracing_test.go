package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpgw/gateway/internal/config"
)

func envMap(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func ptr[T any](v T) *T { return &v }

// collector is an OTLP/HTTP endpoint that records the paths posted to.
type collector struct {
	*httptest.Server
	mu    sync.Mutex
	posts []string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		if len(body) > 0 && r.Method == http.MethodPost && r.Header.Get("Content-Type") == "application/x-protobuf" {
			c.posts = append(c.posts, r.URL.Path)
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) paths() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.posts...)
}

func TestSetupTracingOff(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Tracing
		env  map[string]string
	}{
		{name: "default", cfg: config.Tracing{}},
		{name: "disabled with settings", cfg: config.Tracing{Endpoint: "http://127.0.0.1:1", SampleRatio: ptr(1.0)}},
		{name: "OTEL_SDK_DISABLED wins", cfg: config.Tracing{Enabled: true}, env: map[string]string{"OTEL_SDK_DISABLED": "TRUE"}},
		{name: "exporter none", cfg: config.Tracing{Enabled: true}, env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, shutdown, err := SetupTracing(context.Background(), tt.cfg, "v1", envMap(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := tp.(noop.TracerProvider); !ok {
				t.Errorf("provider is %T, want noop.TracerProvider", tp)
			}
			_, span := Tracer(tp).Start(context.Background(), "x")
			if span.IsRecording() || span.SpanContext().IsValid() {
				t.Error("no-op provider made a real span")
			}
			span.End()
			if err := shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
}

func TestSetupTracingExports(t *testing.T) {
	tests := []struct {
		name     string
		endpoint func(c *collector) (cfg string, env map[string]string)
		wantPath string
	}{
		{
			name:     "config endpoint",
			endpoint: func(c *collector) (string, map[string]string) { return c.URL, nil },
			wantPath: "/v1/traces",
		},
		{
			name:     "config endpoint with a base path",
			endpoint: func(c *collector) (string, map[string]string) { return c.URL + "/otlp/", nil },
			wantPath: "/otlp/v1/traces",
		},
		{
			name: "OTEL_EXPORTER_OTLP_ENDPOINT wins",
			endpoint: func(c *collector) (string, map[string]string) {
				return "http://127.0.0.1:1", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL + "/base"}
			},
			wantPath: "/base/v1/traces",
		},
		{
			name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as is",
			endpoint: func(c *collector) (string, map[string]string) {
				return "http://127.0.0.1:1", map[string]string{
					"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://127.0.0.1:1",
					"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": c.URL + "/custom/traces",
					"OTEL_EXPORTER_OTLP_PROTOCOL":        "http/protobuf",
				}
			},
			wantPath: "/custom/traces",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCollector(t)
			endpoint, env := tt.endpoint(c)
			tp, shutdown, err := SetupTracing(context.Background(), config.Tracing{Enabled: true, Endpoint: endpoint}, "1.2.3", envMap(env))
			if err != nil {
				t.Fatal(err)
			}
			_, span := Tracer(tp).Start(context.Background(), "tools/call echo")
			if !span.IsRecording() || !span.SpanContext().IsSampled() {
				t.Error("span not recorded and sampled with the default ratio of 1")
			}
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := shutdown(ctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			if got := c.paths(); len(got) != 1 || got[0] != tt.wantPath {
				t.Errorf("collector got posts to %v, want one to %s", got, tt.wantPath)
			}
		})
	}
}

func TestSetupTracingSampler(t *testing.T) {
	tid, _ := trace.TraceIDFromHex(traceIDHex)
	sid, _ := trace.SpanIDFromHex(spanIDHex)
	sampledParent := trace.ContextWithRemoteSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
	tests := []struct {
		name           string
		ratio          *float64
		env            map[string]string
		wantRoot       bool // a new trace is sampled
		wantWithParent bool // a span under a sampled remote parent is
	}{
		{name: "default ratio", wantRoot: true, wantWithParent: true},
		{name: "ratio 0 is parent-based", ratio: ptr(0.0), wantRoot: false, wantWithParent: true},
		{name: "env always_off wins", ratio: ptr(1.0), env: map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}},
		{name: "env traceidratio ignores parents", env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}},
		{name: "env parentbased_traceidratio", env: map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}, wantWithParent: true},
		{name: "env parentbased_always_on", ratio: ptr(0.0), env: map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_always_on"}, wantRoot: true, wantWithParent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCollector(t)
			tp, shutdown, err := SetupTracing(context.Background(), config.Tracing{Enabled: true, Endpoint: c.URL, SampleRatio: tt.ratio}, "", envMap(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			defer shutdown(context.Background())
			_, root := Tracer(tp).Start(context.Background(), "root")
			_, child := Tracer(tp).Start(sampledParent, "child")
			if got := root.SpanContext().IsSampled(); got != tt.wantRoot {
				t.Errorf("root sampled = %v, want %v", got, tt.wantRoot)
			}
			if got := child.SpanContext().IsSampled(); got != tt.wantWithParent {
				t.Errorf("child of a sampled parent sampled = %v, want %v", got, tt.wantWithParent)
			}
			root.End()
			child.End()
		})
	}
}

func TestSetupTracingErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Tracing
		env  map[string]string
		want string
	}{
		{name: "exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, want: `OTEL_TRACES_EXPORTER="zipkin" is not supported`},
		{name: "protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: `OTEL_EXPORTER_OTLP_PROTOCOL="grpc" is not supported`},
		{
			name: "traces protocol wins",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			want: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json" is not supported`,
		},
		{name: "sampler", env: map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, want: `OTEL_TRACES_SAMPLER="jaeger_remote" is not supported`},
		{name: "sampler arg", env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, want: "OTEL_TRACES_SAMPLER_ARG=\"2\""},
		{name: "endpoint env", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, want: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "traces endpoint env", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://x"}, want: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{name: "config endpoint", cfg: config.Tracing{Endpoint: "nope"}, want: "telemetry.tracing.endpoint"},
		{name: "resource attributes", env: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "a=1,novalue"}, want: `"novalue" is not key=value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Enabled = true
			_, _, err := SetupTracing(context.Background(), tt.cfg, "", envMap(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestNewResource(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want map[string]string
	}{
		{name: "defaults", want: map[string]string{"service.name": "mcp-gateway", "service.version": "1.2.3"}},
		{
			name: "OTEL_SERVICE_NAME",
			env:  map[string]string{"OTEL_SERVICE_NAME": "gw-eu", "OTEL_RESOURCE_ATTRIBUTES": "service.name=ignored,deployment.environment=prod%20eu"},
			want: map[string]string{"service.name": "gw-eu", "deployment.environment": "prod eu"},
		},
		{
			name: "service.name from OTEL_RESOURCE_ATTRIBUTES",
			env:  map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs"},
			want: map[string]string{"service.name": "from-attrs"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := newResource("1.2.3", envMap(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.want {
				v, ok := res.Set().Value(attribute.Key(k))
				if !ok || v.AsString() != want {
					t.Errorf("%s = %q, want %q", k, v.AsString(), want)
				}
			}
			if _, ok := res.Set().Value("telemetry.sdk.name"); !ok {
				t.Error("resource lacks telemetry.sdk.name")
			}
		})
	}
}

func TestNewTestTracerProvider(t *testing.T) {
	tp, exp := NewTestTracerProvider()
	_, span := Tracer(tp).Start(context.Background(), "x")
	span.End()
	if spans := exp.GetSpans(); len(spans) != 1 || spans[0].Name != "x" {
		t.Errorf("exported %v", spans)
	}
}
