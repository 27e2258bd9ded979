package gateway_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestEverythingServer runs the reference server
// @modelcontextprotocol/server-everything behind the gateway in its stdio
// mode and in its 2024-11-05 HTTP+SSE mode (given as sse, and found by
// auto): lists, calls and progress through the gateway.
func TestEverythingServer(t *testing.T) {
	sseURL := testkit.StartEverythingSSE(t)
	cases := []struct {
		name string
		up   func() config.Upstream
	}{
		{"stdio", func() config.Upstream {
			return config.Upstream{Name: "ev", Command: testkit.EverythingCommand(t), Env: map[string]string{"EVERYTHING_TOKEN": "tok-123"},
				Stdio: &config.UpstreamStdio{StopGrace: config.Duration(time.Second)}}
		}},
		{"sse", func() config.Upstream {
			return config.Upstream{Name: "ev", URL: sseURL, Transport: config.TransportSSE}
		}},
		{"auto", func() config.Upstream {
			return config.Upstream{Name: "ev", URL: sseURL, Transport: config.TransportAuto}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := startGateway(t, nil, func(c *config.Config) { c.Upstreams = append(c.Upstreams, tc.up()) })
			var progress atomic.Int32
			cs := testkit.Connect(t, url, &testkit.ConnectOptions{
				ProgressHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
			})
			ctx := context.Background()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			for _, want := range []string{"ev__echo", "ev__get-env", "ev__trigger-long-running-operation"} {
				if !strings.Contains(strings.Join(names, " "), want) {
					t.Errorf("%s not listed in %v", want, names)
				}
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__echo", Arguments: map[string]any{"message": "hello"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := text(t, res); !strings.Contains(got, "hello") {
				t.Errorf("echo = %q", got)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__trigger-long-running-operation",
				Arguments: map[string]any{"duration": 0.3, "steps": 3}, Meta: mcp.Meta{"progressToken": "lr"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := text(t, res); !strings.Contains(got, "completed") {
				t.Errorf("long running operation = %q", got)
			}
			for deadline := time.Now().Add(3 * time.Second); progress.Load() < 3 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if n := progress.Load(); n != 3 {
				t.Errorf("%d progress notifications, want 3", n)
			}
			// Cancellation: the client gives up on a long operation; the
			// call ends at once and the session goes on.
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			start := time.Now()
			_, err = cs.CallTool(cctx, &mcp.CallToolParams{Name: "ev__trigger-long-running-operation",
				Arguments: map[string]any{"duration": 20, "steps": 2}})
			cancel()
			if err == nil || time.Since(start) > 5*time.Second {
				t.Errorf("cancelled call: %v after %v", err, time.Since(start))
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__echo", Arguments: map[string]any{"message": "again"}}); err != nil {
				t.Errorf("echo after a cancelled call: %v", err)
			}
			if _, err := cs.ListPrompts(ctx, nil); err != nil {
				t.Errorf("prompts/list: %v", err)
			}
			if tc.name == "stdio" {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__get-env"})
				if err != nil {
					t.Fatal(err)
				}
				env := text(t, res)
				if !strings.Contains(env, "tok-123") {
					t.Errorf("configured env not in the server's: %s", env)
				}
			}
		})
	}
}
