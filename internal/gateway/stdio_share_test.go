package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestStdioProcessShares: with isolation: session, one user's idle
// sessions cannot take every process of an upstream: another tenant's
// session still gets one (the idle process of the user holding the most
// is stopped to make room), and a user at its share with every process
// busy is refused, counted under the bound's limit label.
func TestStdioProcessShares(t *testing.T) {
	zero := 0
	for _, tc := range []struct {
		name  string
		stdio config.UpstreamStdio
	}{
		{"no shares, pool full", config.UpstreamStdio{MaxProcessesPerPrincipal: &zero, MaxProcessesPerTenant: &zero}},
		{"default shares", config.UpstreamStdio{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab := newLabIssuer(t)
			bin := testkit.StdioServer(t)
			st := tc.stdio
			st.Isolation, st.MaxProcesses, st.StopGrace = config.IsolationSession, 4, config.Duration(time.Second)
			g, url := startGatewayG(t, nil, labAuth(lab), func(c *config.Config) {
				c.Upstreams = append(c.Upstreams, config.Upstream{Name: "fs", Command: []string{bin}, Stdio: &st})
			})
			admin := httptest.NewServer(g.AdminHandler())
			t.Cleanup(admin.Close)
			aliceTok, bobTok := labToken(t, lab, url, "alice", "acme"), labToken(t, lab, url, "bob", "globex")
			ctx := context.Background()
			call := func(p *stdioPeer, tool string) (string, error) {
				r, err := p.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}})
				if err != nil {
					return "", err
				}
				if r.IsError {
					return "", &toolError{text(t, r)}
				}
				return text(t, r), nil
			}
			// Alice opens as many sessions as the upstream has processes;
			// each runs a call, then idles.
			var alice []*stdioPeer
			for range 4 {
				p := connectStdioPeer(t, url, aliceTok, "")
				if _, err := call(p, "fs__echo"); err != nil {
					t.Fatalf("alice: %v", err)
				}
				alice = append(alice, p)
			}
			// Bob, of another tenant, still gets a process.
			bob := connectStdioPeer(t, url, bobTok, "")
			if got, err := call(bob, "fs__echo"); err != nil || got != "x" {
				t.Fatalf("bob with alice's sessions idle on every process: %q, %v", got, err)
			}
			if tc.stdio.MaxProcessesPerPrincipal != nil {
				return
			}
			// At her share (1 of 4), with her process busy, alice's next
			// session is refused, and the bound is named.
			stop := alice[0].blockCall(t)
			defer stop()
			_, err := call(alice[1], "fs__echo")
			if err == nil {
				t.Fatal("alice beyond her share with her process busy: the call succeeded")
			}
			resp, err2 := http.Get(admin.URL + "/metrics")
			if err2 != nil {
				t.Fatal(err2)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if m := string(b); !strings.Contains(m, `mcpgw_limit_rejections_total{limit="max_processes_per_principal",tenant="acme"}`) {
				t.Errorf("refusal %v not counted under max_processes_per_principal:\n%s", err, grepLines(m, "limit_rejections"))
			}
		})
	}
}

type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }
