package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/gateway/internal/jsonx"
)

const (
	traceIDHex = "0af7651916cd43dd8448eb211c80319c"
	spanIDHex  = "00f067aa0ba902b7"
	// traceparent is a valid, sampled W3C traceparent.
	traceparent = "00-" + traceIDHex + "-" + spanIDHex + "-01"
)

// withSpanContext returns a context whose span context is traceparent's,
// with tracestate ts if not "".
func withSpanContext(t *testing.T, ts string) context.Context {
	t.Helper()
	tid, _ := trace.TraceIDFromHex(traceIDHex)
	sid, _ := trace.SpanIDFromHex(spanIDHex)
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}
	if ts != "" {
		state, err := trace.ParseTraceState(ts)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TraceState = state
	}
	return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(cfg))
}

func TestInjectMeta(t *testing.T) {
	tests := []struct {
		name   string
		ts     string // tracestate in ctx
		params string
		want   string
	}{
		{
			name:   "no _meta",
			params: `{"name":"echo","arguments":{"b":2,"a":[1, 2.50]}}`,
			want:   `{"name":"echo","arguments":{"b":2,"a":[1, 2.50]},"_meta":{"traceparent":"` + traceparent + `"}}`,
		},
		{
			name:   "unknown _meta members keep their order and bytes",
			params: `{"_meta":{"progressToken":"p-1","com.example/x":{"z":1,"a":"\u00e9"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","zz":null}`,
			want:   `{"_meta":{"progressToken":"p-1","com.example/x":{"z":1,"a":"\u00e9"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","traceparent":"` + traceparent + `"},"name":"echo","zz":null}`,
		},
		{
			name:   "existing traceparent replaced in place, stale tracestate dropped",
			params: `{"_meta":{"a":1,"traceparent":"00-11111111111111111111111111111111-2222222222222222-00","tracestate":"old=1","b":2}}`,
			want:   `{"_meta":{"a":1,"traceparent":"` + traceparent + `","b":2}}`,
		},
		{
			name:   "tracestate",
			ts:     "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
			params: `{"name":"x"}`,
			want:   `{"name":"x","_meta":{"traceparent":"` + traceparent + `","tracestate":"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"}}`,
		},
		{name: "absent params", params: ``, want: `{"_meta":{"traceparent":"` + traceparent + `"}}`},
		{name: "null params", params: ` null `, want: `{"_meta":{"traceparent":"` + traceparent + `"}}`},
		{name: "empty params", params: `{}`, want: `{"_meta":{"traceparent":"` + traceparent + `"}}`},
		{name: "null _meta", params: `{"_meta":null,"x":1}`, want: `{"_meta":{"traceparent":"` + traceparent + `"},"x":1}`},
		{name: "empty _meta", params: `{"_meta":{}}`, want: `{"_meta":{"traceparent":"` + traceparent + `"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := InjectMeta(withSpanContext(t, tt.ts), json.RawMessage(tt.params))
			if err != nil {
				t.Fatalf("InjectMeta: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("InjectMeta =\n%s\nwant\n%s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("result is not valid JSON: %s", got)
			}
		})
	}
}

func TestInjectMetaBaggage(t *testing.T) {
	m, _ := baggage.NewMember("userId", "alice")
	b, _ := baggage.New(m)
	ctx := baggage.ContextWithBaggage(withSpanContext(t, ""), b)
	got, err := InjectMeta(ctx, json.RawMessage(`{"_meta":{"baggage":"old=1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"_meta":{"baggage":"userId=alice","traceparent":"` + traceparent + `"}}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}

	// Baggage alone is injected too, and a stale tracestate stays: it
	// goes with the traceparent, which is not touched.
	got, err = InjectMeta(baggage.ContextWithBaggage(context.Background(), b), json.RawMessage(`{"_meta":{"tracestate":"a=1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"_meta":{"tracestate":"a=1","baggage":"userId=alice"}}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestInjectMetaNothingToInject(t *testing.T) {
	for _, params := range []string{``, `{"a" : 1}`, `[1]`, `{"_meta":"x"}`} {
		got, err := InjectMeta(context.Background(), json.RawMessage(params))
		if err != nil || string(got) != params {
			t.Errorf("InjectMeta(no context, %q) = %q, %v; want it unchanged", params, got, err)
		}
	}
}

func TestInjectMetaErrors(t *testing.T) {
	ctx := withSpanContext(t, "")
	for _, params := range []string{`[1,2]`, `"x"`, `{"_meta":"x"}`, `{"_meta":[1]}`, `{"a":1,"a":2}`, `{"a":`, `{"_meta":{"a":1,"a":2}}`} {
		got, err := InjectMeta(ctx, json.RawMessage(params))
		if !errors.Is(err, ErrParamsNotObject) {
			t.Errorf("InjectMeta(%s): error %v, want ErrParamsNotObject", params, err)
		}
		if string(got) != params {
			t.Errorf("InjectMeta(%s) = %s, want params unchanged", params, got)
		}
	}
}

func TestExtractMeta(t *testing.T) {
	ambient := withSpanContext(t, "")
	otherTrace := "4bf92f3577b34da6a3ce929d0e0e4736"
	tests := []struct {
		name      string
		params    string
		wantTrace string // "" means the ambient context is kept
		wantState string
	}{
		{name: "traceparent", params: `{"_meta":{"traceparent":"00-` + otherTrace + `-00f067aa0ba902b7-01"}}`, wantTrace: otherTrace},
		{
			name:      "tracestate",
			params:    `{"name":"x","_meta":{"x":1,"tracestate":"rojo=00f067aa0ba902b7","traceparent":"00-` + otherTrace + `-00f067aa0ba902b7-00"}}`,
			wantTrace: otherTrace, wantState: "rojo=00f067aa0ba902b7",
		},
		{name: "malformed traceparent", params: `{"_meta":{"traceparent":"00-zz-00f067aa0ba902b7-01"}}`},
		{name: "all-zero trace id", params: `{"_meta":{"traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}`},
		{name: "traceparent not a string", params: `{"_meta":{"traceparent":123}}`},
		{name: "traceparent key in another case", params: `{"_meta":{"Traceparent":"00-` + otherTrace + `-00f067aa0ba902b7-01"}}`},
		{name: "no _meta", params: `{"name":"x"}`},
		{name: "_meta not an object", params: `{"_meta":"traceparent"}`},
		{name: "absent params", params: ``},
		{name: "params not an object", params: `[1]`},
		{name: "invalid JSON", params: `{"_meta":{"traceparent":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ExtractMeta(ambient, json.RawMessage(tt.params))
			sc := trace.SpanContextFromContext(ctx)
			if tt.wantTrace == "" {
				if !sc.Equal(trace.SpanContextFromContext(ambient)) {
					t.Errorf("span context = %v, want the ambient one kept", sc)
				}
				return
			}
			if got := sc.TraceID().String(); got != tt.wantTrace {
				t.Errorf("trace id = %s, want %s", got, tt.wantTrace)
			}
			if !sc.IsRemote() {
				t.Error("extracted span context is not remote")
			}
			if got := sc.TraceState().String(); got != tt.wantState {
				t.Errorf("tracestate = %q, want %q", got, tt.wantState)
			}
		})
	}
}

func TestExtractMetaBaggage(t *testing.T) {
	ctx := ExtractMeta(context.Background(), json.RawMessage(`{"_meta":{"baggage":"userId=alice,serverNode=DF%2028"}}`))
	b := baggage.FromContext(ctx)
	if got := b.Member("userId").Value(); got != "alice" {
		t.Errorf("userId = %q", got)
	}
	if got := b.Member("serverNode").Value(); got != "DF 28" {
		t.Errorf("serverNode = %q", got)
	}
}

func TestMetaRoundTrip(t *testing.T) {
	ctx := withSpanContext(t, "a=1")
	params, err := InjectMeta(ctx, json.RawMessage(`{"name":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	got := trace.SpanContextFromContext(ExtractMeta(context.Background(), params))
	if want := trace.SpanContextFromContext(ctx); !got.Equal(want) {
		t.Errorf("round trip: got %v, want %v", got, want)
	}
}

func TestHeadersRoundTrip(t *testing.T) {
	ctx := withSpanContext(t, "a=1")
	h := http.Header{}
	InjectHeaders(ctx, h)
	if got := h.Get("Traceparent"); got != traceparent {
		t.Errorf("traceparent header = %q, want %q", got, traceparent)
	}
	if got := h.Get("Tracestate"); got != "a=1" {
		t.Errorf("tracestate header = %q", got)
	}
	got := trace.SpanContextFromContext(ExtractHeaders(context.Background(), h))
	if want := trace.SpanContextFromContext(ctx); !got.Equal(want) {
		t.Errorf("round trip: got %v, want %v", got, want)
	}

	h = http.Header{}
	InjectHeaders(context.Background(), h)
	if len(h) != 0 {
		t.Errorf("no context injected %v", h)
	}
}

func FuzzInjectMeta(f *testing.F) {
	f.Add([]byte(`{"name":"x","_meta":{"a":1}}`))
	f.Add([]byte(``))
	f.Add([]byte(`{"_meta":null}`))
	f.Add([]byte(`[1]`))
	tid, _ := trace.TraceIDFromHex(traceIDHex)
	sid, _ := trace.SpanIDFromHex(spanIDHex)
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	f.Fuzz(func(t *testing.T, params []byte) {
		got, err := InjectMeta(ctx, params)
		if err != nil {
			if string(got) != string(params) {
				t.Fatalf("on error, params changed: %q -> %q", params, got)
			}
			return
		}
		if !json.Valid(params) {
			// The gateway validates every message before it injects into
			// its params (InjectMeta parses with jsonx.ParseValidObject):
			// on invalid input only "no panic" is required.
			return
		}
		if !json.Valid(got) {
			t.Fatalf("InjectMeta(%q) = %q: invalid JSON", params, got)
		}
		sc := trace.SpanContextFromContext(ExtractMeta(context.Background(), got))
		if sc.TraceID() != tid || sc.SpanID() != sid {
			t.Fatalf("InjectMeta(%q) = %q: extracts %v", params, got, sc)
		}
	})
}

// TestInjectMetaObject: the object form returns an object that encodes
// as InjectMeta returns the given one's encoding, byte for byte: the
// given one itself when there is nothing to inject or on error, else a
// copy, the given one unchanged.
func TestInjectMetaObject(t *testing.T) {
	m, _ := baggage.NewMember("userId", "alice")
	b, _ := baggage.New(m)
	ctxs := []context.Context{context.Background(), withSpanContext(t, ""), withSpanContext(t, "rojo=00f067aa0ba902b7"),
		baggage.ContextWithBaggage(withSpanContext(t, ""), b)}
	for i, ctx := range ctxs {
		for _, params := range []string{`{}`, `{ "name" : "echo", "arguments" : {"b":2} }`, `{"_meta":null,"x":1}`,
			`{"_meta":{"a":1,"traceparent":"x","tracestate":"old=1","baggage":"old=1"},"name":"e"}`, `{"_meta":"x"}`, `{"_meta":[1]}`} {
			o, err := jsonx.ParseObject([]byte(params))
			if err != nil {
				t.Fatal(err)
			}
			before := string(o.Bytes())
			want, wantErr := InjectMeta(ctx, o.Bytes())
			q, err := InjectMetaObject(ctx, o)
			if (err == nil) != (wantErr == nil) || err != nil && !errors.Is(err, ErrParamsNotObject) {
				t.Errorf("ctx %d, %s: error %v, InjectMeta's %v", i, params, err, wantErr)
			}
			if got := string(q.Bytes()); got != string(want) {
				t.Errorf("ctx %d, %s: object encodes as %s, InjectMeta gives %s", i, params, got, want)
			}
			if string(o.Bytes()) != before {
				t.Errorf("ctx %d, %s: the object given changed", i, params)
			}
			if (q == o) != (i == 0 || err != nil) {
				t.Errorf("ctx %d, %s: the object given returned: %v", i, params, q == o)
			}
		}
	}
}
