package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// catalogUpstream serves a known catalog of tools, each answering with
// its own name and arguments.
func catalogUpstream(t *testing.T, tools map[string]string) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "catalog", Version: "0.0.1"}, nil)
	for name, desc := range tools {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"repo":{"type":"string"}}}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " " + string(req.Params.Arguments)}}}, nil
			})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestToolSearch: with tool search in place of the list, a tenant lists
// the gateway's two tools; a search ranks its tools by the query and
// never returns one its policy hides; calling through the call tool obeys
// the same rules as a direct call.
func TestToolSearch(t *testing.T) {
	url0 := catalogUpstream(t, map[string]string{
		"create_issue":       "Open a new issue in a repository.",
		"list_issues":        "List the issues of a repository.",
		"close_issue":        "Close an issue.",
		"get_weather":        "Current weather for a city.",
		"send_email":         "Send an email message.",
		"delete_repo":        "Delete a repository and every issue in it.",
		"search_code":        "Search code across repositories.",
		"list_pull_requests": "List the pull requests of a repository.",
	})
	g, url := startGatewayG(t, []upstreamSpec{{name: "s", url: url0}}, func(c *config.Config) {
		c.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{Name: "s", Tools: config.Rules{Deny: []string{"delete_*"}}}},
			ToolSearch: &config.ToolSearch{MaxResults: 3}}}
	})
	cs := testkit.Connect(t, url, nil)
	ctx := context.Background()

	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, tl := range res.Tools {
		listed = append(listed, tl.Name)
	}
	if strings.Join(listed, ",") != "mcpgw__call_tool,mcpgw__search_tools" {
		t.Fatalf("listed %v", listed)
	}

	search := func(query string, limit int) []string {
		t.Helper()
		args := map[string]any{"query": query}
		if limit > 0 {
			args["limit"] = limit
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcpgw__search_tools", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("search %q: %v %v", query, res, err)
		}
		var sc struct{ Tools []struct{ Name string } }
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &sc); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range sc.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	for _, tc := range []struct {
		query string
		limit int
		first string
		n     int
	}{
		{"open an issue", 0, "s__create_issue", 3},
		{"weather in Paris", 0, "s__get_weather", 1},
		{"pull requests", 0, "s__list_pull_requests", 1},
		{"list issues", 1, "s__list_issues", 1},
		{"email", 0, "s__send_email", 1},
	} {
		got := search(tc.query, tc.limit)
		if len(got) != tc.n || got[0] != tc.first {
			t.Errorf("search %q: %v, want %d results, %s first", tc.query, got, tc.n, tc.first)
		}
	}
	for _, q := range []string{"delete repository", "delete repo"} {
		for _, name := range search(q, 0) {
			if name == "s__delete_repo" {
				t.Errorf("search %q returned a denied tool", q)
			}
		}
	}

	call := func(name string, args any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcpgw__call_tool", Arguments: map[string]any{"name": name, "arguments": args}})
	}
	cres, err := call("s__get_weather", map[string]any{"city": "Paris"})
	if err != nil || cres.IsError || callText(t, cres) != `get_weather {"city":"Paris"}` {
		t.Errorf("call through the call tool: %v %v", cres, err)
	}
	_, errDenied := call("s__delete_repo", nil)
	_, errUnknown := call("s__nope", nil)
	if errDenied == nil || errUnknown == nil ||
		strings.ReplaceAll(errDenied.Error(), "s__delete_repo", "X") != strings.ReplaceAll(errUnknown.Error(), "s__nope", "X") {
		t.Errorf("a denied tool through the call tool: %v; an unknown one: %v", errDenied, errUnknown)
	}
	if res, err := call("mcpgw__call_tool", nil); err != nil || !res.IsError {
		t.Errorf("a nested call: %v %v", res, err)
	}
	// Argument validation applies too: city must be a string.
	if res, err := call("s__get_weather", map[string]any{"city": 7}); err != nil || !res.IsError || !strings.Contains(callText(t, res), "Invalid arguments") {
		t.Errorf("invalid arguments through the call tool: %v %v", res, err)
	}
	m := scrape(t, g)
	if v := metricValue(m, `mcpgw_tool_calls_total{outcome="ok",tenant="default",tool="get_weather",upstream="s"}`); v != 1 {
		t.Errorf("tool calls by original name: %v", v)
	}
	if v := metricValue(m, `mcpgw_policy_denials_total{kind="tool",tenant="default",upstream="s"}`); v != 1 {
		t.Errorf("policy denials: %v", v)
	}
}
