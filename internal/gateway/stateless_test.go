package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/testkit"
)

// TestStatelessClientThroughGateway drives the gateway with the Go SDK in
// the 2026-07-28 revision (server/discover, no initialize, no session) to
// Go SDK upstreams the gateway reaches with 2025-11-25 sessions.
func TestStatelessClientThroughGateway(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	b := testkit.NewUpstreamWith(t, "beta", testkit.UpstreamOptions{JSONResponse: true})
	url := startGateway(t, []upstreamSpec{spec(a), spec(b)})
	var progress []string
	done := make(chan struct{}, 10)
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{
		ProtocolVersion: "2026-07-28",
		ProgressHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress = append(progress, req.Params.Message)
			done <- struct{}{}
		},
	})
	ctx := context.Background()
	if v := cs.InitializeResult(); v == nil || v.ServerInfo == nil || v.ServerInfo.Name != "mcp-gateway" {
		t.Fatalf("discover result: %+v", v)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 2*len(testkit.UpstreamTools) {
		t.Errorf("got %d tools", len(tools.Tools))
	}
	for _, up := range []string{"alpha", "beta"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: up + "__echo", Arguments: map[string]any{"text": "stateless"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != up+":stateless" {
			t.Errorf("%s__echo = %q", up, got)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__progress", Arguments: map[string]any{"steps": 2}, Meta: mcp.Meta{"progressToken": "p"}}); err != nil {
		t.Fatal(err)
	}
	<-done
	<-done
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "beta+test://beta/readme"})
	if err != nil || rr.Contents[0].Text != "readme of beta" {
		t.Fatalf("read: %v %+v", err, rr)
	}
	// The gateway opened one upstream session per upstream for this
	// principal, and reused it.
	inits := 0
	for _, r := range a.Requests() {
		if r.RPCMethod == "initialize" {
			inits++
		}
		if strings.Contains(string(r.Body), "io.modelcontextprotocol/protocolVersion") {
			t.Errorf("the client's protocol _meta reached a 2025-11-25 upstream: %s", r.Body)
		}
	}
	if inits != 1 {
		t.Errorf("alpha saw %d initialize requests, want 1", inits)
	}
}
