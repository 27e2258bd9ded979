package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// BenchmarkStdioVsHTTPCall measures one tools/call through an in-process
// gateway to the same Go SDK server (package testkit/stdioserver), reached
// over stdio and over Streamable HTTP. The ratio of the two is the cost of
// the stdio path (the in-process Streamable HTTP endpoint, the pipe, JSON
// id rewriting) against a loopback HTTP upstream.
//
//	go test -run '^$' -bench StdioVsHTTP -benchtime 200x ./internal/gateway/
func BenchmarkStdioVsHTTPCall(b *testing.B) {
	httpURL := testkit.StartStdioServerHTTP(b)
	bin := testkit.StdioServer(b)
	for _, tc := range []struct {
		name string
		up   config.Upstream
	}{
		{"stdio", config.Upstream{Name: "s", Command: []string{bin}, Stdio: &config.UpstreamStdio{StopGrace: config.Duration(time.Second)}}},
		{"http", config.Upstream{Name: "s", URL: httpURL, Watch: ptr(false)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			url := startGateway(b, nil, func(c *config.Config) { c.Upstreams = append(c.Upstreams, tc.up) })
			cs := testkit.Connect(b, url, nil)
			ctx := context.Background()
			params := &mcp.CallToolParams{Name: "s__echo", Arguments: map[string]any{"text": "hello"}}
			if _, err := cs.CallTool(ctx, params); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
