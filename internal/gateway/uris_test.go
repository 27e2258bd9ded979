package gateway_test

//lint:file-ignore SA1019 sampling is deprecated only from 2026-07-28; the gateway still relays it, and a test here uses it

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/testkit"
)

// appsMIME is the MIME type of an MCP Apps view.
const appsMIME = "text/html;profile=mcp-app"

// newAppsUpstream starts a go-sdk upstream in the shape of an MCP App: a
// tool whose _meta.ui.resourceUri names its ui:// view, a result holding a
// resource link and an embedded resource, a prompt holding both, and the
// resources they point at.
func newAppsUpstream(t *testing.T) string {
	t.Helper()
	const (
		view   = "ui://weather/view"
		report = "file:///reports/today.txt"
	)
	srv := mcp.NewServer(&mcp.Implementation{Name: "apps"}, nil)
	srv.AddResource(&mcp.Resource{URI: view, Name: "view", MIMEType: appsMIME},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: view, MIMEType: appsMIME, Text: "<html>view</html>"}}}, nil
		})
	srv.AddResource(&mcp.Resource{URI: report, Name: "report", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: report, MIMEType: "text/plain", Text: "sunny"}}}, nil
		})
	ui := mcp.Meta{"ui": map[string]any{"resourceUri": view}}
	mcp.AddTool(srv, &mcp.Tool{Name: "weather", Meta: ui},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{
				Meta: ui,
				Content: []mcp.Content{
					&mcp.TextContent{Text: "see the report"},
					&mcp.ResourceLink{URI: report, Name: "report"},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: view, MIMEType: appsMIME, Text: "<html>view</html>"}},
				},
			}, nil, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "brief"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.TextContent{Text: "read these"}},
			{Role: "user", Content: &mcp.ResourceLink{URI: report, Name: "report"}},
			{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: view, Text: "<html>view</html>"}}},
		}}, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(up.Close)
	return up.URL
}

// TestResourceURIsInsideResults: the resource URIs an upstream hands out
// inside results (a tool's MCP Apps view in tools/list, resource links
// and embedded resources in a tool result and in a prompt) come in their
// exposed form, and the client reads each back through the gateway, in
// either revision; an upstream without a prefix keeps its URIs as they are.
func TestResourceURIsInsideResults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix *string
		tool   string
		prompt string
		view   string
		report string
	}{
		{name: "prefixed", tool: "apps__weather", prompt: "apps__brief", view: "apps+ui://weather/view", report: "apps+file:///reports/today.txt"},
		{name: "no prefix", prefix: ptr(""), tool: "weather", prompt: "brief", view: "ui://weather/view", report: "file:///reports/today.txt"},
	} {
		for _, version := range []string{"2025-11-25", "2026-07-28"} {
			t.Run(tc.name+" "+version, func(t *testing.T) {
				url := startGateway(t, []upstreamSpec{{name: "apps", url: newAppsUpstream(t), prefix: tc.prefix}})
				cs := testkit.Connect(t, url, &testkit.ConnectOptions{ProtocolVersion: version})
				ctx := context.Background()
				read := func(uri, wantText string) {
					t.Helper()
					res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
					if err != nil {
						t.Fatalf("reading %s back: %v", uri, err)
					}
					if len(res.Contents) != 1 || res.Contents[0].URI != uri || res.Contents[0].Text != wantText {
						t.Errorf("reading %s back: %+v", uri, res.Contents)
					}
				}

				// The host finds the tool's view in tools/list and loads it.
				tools, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var viewURI any
				for _, tl := range tools.Tools {
					if tl.Name == tc.tool {
						ui, _ := tl.Meta["ui"].(map[string]any)
						viewURI = ui["resourceUri"]
					}
				}
				if viewURI != tc.view {
					t.Fatalf("tools/list: %s's _meta.ui.resourceUri = %v, want %s", tc.tool, viewURI, tc.view)
				}
				read(tc.view, "<html>view</html>")

				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Content) != 3 {
					t.Fatalf("tools/call: %d content blocks", len(res.Content))
				}
				if tx, ok := res.Content[0].(*mcp.TextContent); !ok || tx.Text != "see the report" {
					t.Errorf("tools/call: content[0] = %+v", res.Content[0])
				}
				if l, ok := res.Content[1].(*mcp.ResourceLink); !ok || l.URI != tc.report {
					t.Errorf("tools/call: content[1] = %+v, want a link to %s", res.Content[1], tc.report)
				} else {
					read(l.URI, "sunny")
				}
				if e, ok := res.Content[2].(*mcp.EmbeddedResource); !ok || e.Resource.URI != tc.view || e.Resource.Text != "<html>view</html>" {
					t.Errorf("tools/call: content[2] = %+v, want %s embedded", res.Content[2], tc.view)
				}
				if ui, _ := res.Meta["ui"].(map[string]any); ui["resourceUri"] != tc.view {
					t.Errorf("tools/call: _meta = %v, want ui.resourceUri %s", res.Meta, tc.view)
				}

				p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: tc.prompt})
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Messages) != 3 {
					t.Fatalf("prompts/get: %d messages", len(p.Messages))
				}
				if l, ok := p.Messages[1].Content.(*mcp.ResourceLink); !ok || l.URI != tc.report {
					t.Errorf("prompts/get: messages[1].content = %+v, want a link to %s", p.Messages[1].Content, tc.report)
				} else {
					read(l.URI, "sunny")
				}
				if e, ok := p.Messages[2].Content.(*mcp.EmbeddedResource); !ok || e.Resource.URI != tc.view {
					t.Errorf("prompts/get: messages[2].content = %+v, want %s embedded", p.Messages[2].Content, tc.view)
				}
			})
		}
	}
}

// TestResourceURIsInsideSamplingRequests: an upstream that asks the client
// for a completion over a tool result holding a resource link sends the
// link's URI in its own namespace; the client sees it in the gateway's,
// and reads it back through the gateway, in either revision.
func TestResourceURIsInsideSamplingRequests(t *testing.T) {
	const report = "file:///reports/today.txt"
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker"}, nil)
	srv.AddResource(&mcp.Resource{URI: report, Name: "report", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: report, MIMEType: "text/plain", Text: "sunny"}}}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "summarize"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.CreateMessageWithTools(ctx, &mcp.CreateMessageWithToolsParams{MaxTokens: 10, Messages: []*mcp.SamplingMessageV2{
				{Role: "assistant", Content: []mcp.Content{&mcp.ToolUseContent{ID: "u1", Name: "fetch", Input: map[string]any{}}}},
				{Role: "user", Content: []mcp.Content{&mcp.ToolResultContent{ToolUseID: "u1", Content: []mcp.Content{&mcp.ResourceLink{URI: report, Name: "report"}}}}},
			}})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: res.Content}, nil, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(up.Close)
	url := startGateway(t, []upstreamSpec{{name: "asker", url: up.URL}})
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			var seen string
			client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, &mcp.ClientOptions{
				CreateMessageWithToolsHandler: func(_ context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
					for _, m := range req.Params.Messages {
						for _, c := range m.Content {
							if tr, ok := c.(*mcp.ToolResultContent); ok {
								for _, in := range tr.Content {
									if l, ok := in.(*mcp.ResourceLink); ok {
										seen = l.URI
									}
								}
							}
						}
					}
					return &mcp.CreateMessageWithToolsResult{Model: "m", Role: "assistant", Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
				},
			})
			ctx := context.Background()
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "asker__summarize"}); err != nil {
				t.Fatal(err)
			}
			if want := "asker+" + report; seen != want {
				t.Fatalf("the client saw %q in the sampling request, want %q", seen, want)
			}
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: seen})
			if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "sunny" {
				t.Errorf("reading %s back: %v %+v", seen, err, res)
			}
		})
	}
}
