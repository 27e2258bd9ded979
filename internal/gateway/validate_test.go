package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// schemaUpstream is an MCP server whose tools declare schemas, with raw
// handlers that check nothing themselves, and that counts the calls it
// gets.
type schemaUpstream struct {
	url   string
	calls atomic.Int64
}

func newSchemaUpstream(t *testing.T) *schemaUpstream {
	t.Helper()
	su := &schemaUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "schemas", Version: "0.0.1"}, nil)
	echo := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		su.calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	}
	s.AddTool(&mcp.Tool{Name: "create_issue", InputSchema: json.RawMessage(`{"type":"object",
		"properties":{"owner":{"type":"string"},"title":{"type":"string","maxLength":20}},
		"required":["owner","title"],"additionalProperties":false}`)}, echo)
	// A dialect the gateway does not know: skipped, so the call goes on.
	s.AddTool(&mcp.Tool{Name: "odd", InputSchema: json.RawMessage(`{"$schema":"https://example.com/dialect","type":"object","required":["x"]}`)}, echo)
	// A reference to a file: never followed, so the schema is skipped.
	s.AddTool(&mcp.Tool{Name: "sneaky", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"file:///etc/passwd"}}}`)}, echo)
	s.AddTool(&mcp.Tool{Name: "draft7", InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","required":["x"]}`)}, echo)
	// stats returns its "out" argument as structured content.
	s.AddTool(&mcp.Tool{Name: "stats", InputSchema: json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			su.calls.Add(1)
			var in struct {
				Out json.RawMessage `json:"out"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &in)
			res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(in.Out)}}}
			if len(in.Out) > 0 {
				res.StructuredContent = in.Out
			}
			return res, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	su.url = srv.URL
	return su
}

func callText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestArgumentValidation: arguments that do not match the tool's
// inputSchema get a tool error naming the problems, and the upstream is
// never called; conforming ones go through; schemas the gateway does not
// enforce let the call through.
func TestArgumentValidation(t *testing.T) {
	su := newSchemaUpstream(t)
	g, url := startGatewayG(t, []upstreamSpec{{name: "s", url: su.url}})
	cs := testkit.Connect(t, url, nil)
	ctx := context.Background()

	for _, tc := range []struct {
		name, tool string
		args       any
		want       []string // in the error text; nil: the call goes through
	}{
		{"missing", "s__create_issue", map[string]any{"owner": "acme"}, []string{`missing property 'title'`}},
		{"wrong type and extra", "s__create_issue", map[string]any{"owner": 7, "title": "t", "repo": "x"},
			[]string{`"arguments/owner"`, `want string`, `additional properties 'repo' not allowed`}},
		{"too long", "s__create_issue", map[string]any{"owner": "a", "title": strings.Repeat("x", 21)}, []string{`maxLength`}},
		{"no arguments", "s__create_issue", nil, []string{`missing properties 'owner', 'title'`}},
		{"draft-07", "s__draft7", map[string]any{}, []string{`missing property 'x'`}},
		{"valid", "s__create_issue", map[string]any{"owner": "acme", "title": "bug"}, nil},
		{"unsupported dialect", "s__odd", map[string]any{}, nil},
		{"external ref", "s__sneaky", map[string]any{"x": 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := su.calls.Load()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if err != nil {
				t.Fatal(err)
			}
			text := callText(t, res)
			if tc.want == nil {
				if res.IsError || su.calls.Load() != before+1 {
					t.Fatalf("isError %v, upstream calls %d: want the call relayed; text %q", res.IsError, su.calls.Load()-before, text)
				}
				return
			}
			if !res.IsError {
				t.Fatalf("want isError, got %q", text)
			}
			if n := su.calls.Load() - before; n != 0 {
				t.Errorf("the upstream got %d calls, want none", n)
			}
			if !strings.HasPrefix(text, "Invalid arguments for tool \""+tc.tool+"\":") {
				t.Errorf("text %q", text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("text %q lacks %q", text, w)
				}
			}
		})
	}
	m := scrape(t, g)
	if v := metricValue(m, `mcpgw_schema_violations_total{schema="input",tenant="default",upstream="s"}`); v != 5 {
		t.Errorf("input violations counted: %v, want 5", v)
	}
}

// TestArgumentValidationOff: with validation.arguments off, arguments go
// to the upstream unchecked.
func TestArgumentValidationOff(t *testing.T) {
	su := newSchemaUpstream(t)
	url := startGateway(t, []upstreamSpec{{name: "s", url: su.url}}, func(c *config.Config) {
		c.Upstreams[0].Validation = &config.UpstreamValidation{Arguments: config.ValidationOff}
	})
	cs := testkit.Connect(t, url, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "s__create_issue", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || su.calls.Load() != 1 {
		t.Fatalf("isError %v, calls %d: want relayed", res.IsError, su.calls.Load())
	}
}

// TestResultValidation: structuredContent is checked against the
// outputSchema as validation.results says.
func TestResultValidation(t *testing.T) {
	su := newSchemaUpstream(t)
	for _, mode := range []string{config.ValidationOff, config.ValidationWarn, config.ValidationEnforce} {
		t.Run(mode, func(t *testing.T) {
			g, url := startGatewayG(t, []upstreamSpec{{name: "s", url: su.url}}, func(c *config.Config) {
				c.Upstreams[0].Validation = &config.UpstreamValidation{Results: mode}
			})
			cs := testkit.Connect(t, url, nil)
			for i, tc := range []struct {
				out  any
				good bool
			}{
				{map[string]any{"n": 3}, true},
				{map[string]any{"n": "three"}, false},
				{nil, false}, // no structuredContent at all
			} {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "s__stats", Arguments: map[string]any{"out": tc.out}})
				if err != nil {
					t.Fatalf("%d: %v", i, err)
				}
				wantErr := !tc.good && mode == config.ValidationEnforce
				if res.IsError != wantErr {
					t.Errorf("%d: isError %v, want %v (%q)", i, res.IsError, wantErr, callText(t, res))
				}
				if wantErr && !strings.Contains(callText(t, res), "did not match its output schema") {
					t.Errorf("%d: text %q", i, callText(t, res))
				}
			}
			want := 0.0
			if mode != config.ValidationOff {
				want = 2
			}
			if v := metricValue(scrape(t, g), `mcpgw_schema_violations_total{schema="output",tenant="default",upstream="s"}`); v != want {
				t.Errorf("output violations counted: %v, want %v", v, want)
			}
		})
	}
}

// TestArgumentValidationSpendsNoBudget: a call refused for its arguments
// spends no rate limit: the one call a minute allowed is still there.
func TestArgumentValidationSpendsNoBudget(t *testing.T) {
	su := newSchemaUpstream(t)
	url := startGateway(t, []upstreamSpec{{name: "s", url: su.url}}, func(c *config.Config) {
		c.Budgets.RateLimits = []config.RateLimit{{Name: "one", Tools: []string{"create_issue"}, Requests: 1, Interval: config.Duration(time.Minute)}}
	})
	cs := testkit.Connect(t, url, nil)
	ctx := context.Background()
	for range 3 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "s__create_issue", Arguments: map[string]any{}})
		if err != nil || !res.IsError || !strings.HasPrefix(callText(t, res), "Invalid arguments") {
			t.Fatalf("invalid call: %v %v", res, err)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "s__create_issue", Arguments: map[string]any{"owner": "a", "title": "t"}})
	if err != nil || res.IsError || su.calls.Load() != 1 {
		t.Fatalf("the valid call after invalid ones: %v %v (upstream calls %d)", res, err, su.calls.Load())
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "s__create_issue", Arguments: map[string]any{"owner": "a", "title": "t"}})
	if err != nil || !res.IsError || su.calls.Load() != 1 {
		t.Fatalf("a second valid call should meet the rate limit: %v %v", res, err)
	}
}
