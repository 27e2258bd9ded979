package gateway_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// openStream opens the session's GET stream and returns the messages it
// carries, one data payload each.
func openStream(t *testing.T, url, sid string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan string, 16)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- d
			}
		}
	}()
	return out
}

func TestReloadChangesPolicyAndNotifiesStreams(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	b := testkit.NewUpstream(t, "beta")
	base := func(c *config.Config) {}
	g, url := startGatewayG(t, []upstreamSpec{spec(a), spec(b)}, base)
	cs := testkit.Connect(t, url, nil)
	ctx := context.Background()
	if init := cs.InitializeResult(); init.Capabilities.Tools == nil || !init.Capabilities.Tools.ListChanged {
		t.Errorf("tools capability does not announce listChanged: %+v", init.Capabilities.Tools)
	}
	sid := initialize(t, url)
	events := openStream(t, url, sid)

	next := *g.Config()
	next.Upstreams = next.Upstreams[:1] // beta is gone
	next.Auth = config.Auth{Anonymous: true}
	next.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{
		Name: "alpha", Tools: config.Rules{Allow: []string{"echo", "meta"}},
	}}}}
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(&next); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < 3 {
		select {
		case m := <-events:
			got[m] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("list_changed notifications not received; got %v", got)
		}
	}
	for _, want := range []string{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`,
		`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`,
	} {
		if !got[want] {
			t.Errorf("missing %s in %v", want, got)
		}
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "alpha__echo,alpha__meta" {
		t.Errorf("tools after reload: %v", names)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__fail"}); err == nil || !strings.Contains(err.Error(), "Unknown tool") {
		t.Errorf("a tool the new policy hides: %v", err)
	}
	if g.Generation() != 2 {
		t.Errorf("generation %d, want 2", g.Generation())
	}

	// An invalid file is refused; nothing changes.
	bad := testkit.WriteFile(t, "bad.yaml", "upstreams:\n  - name: Bad Name\n")
	if err := g.ReloadFile(bad, nil); err == nil {
		t.Fatal("invalid config accepted")
	}
	if g.Generation() != 2 || !strings.Contains(g.ReloadStatus(), "refused") || !strings.Contains(g.ReloadStatus(), "bad.yaml") {
		t.Errorf("after a refused reload: generation %d, status %q", g.Generation(), g.ReloadStatus())
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Errorf("the last good config stopped serving: %v", err)
	}
}

// TestReloadUnderLoad reloads the config over and over while clients call
// tools: no request is lost (run it with -race).
func TestReloadUnderLoad(t *testing.T) {
	a := testkit.NewUpstreamWith(t, "alpha", testkit.UpstreamOptions{JSONResponse: true})
	g, url := startGatewayG(t, []upstreamSpec{spec(a)})
	ctx, cancel := context.WithCancel(context.Background())
	var calls, failures atomic.Int64
	var wg sync.WaitGroup
	for i := range 4 {
		cs := testkit.Connect(t, url, nil)
		wg.Go(func() {
			for ctx.Err() == nil {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "x"}})
				calls.Add(1)
				if err != nil || res.IsError {
					failures.Add(1)
					t.Errorf("client %d: %v", i, err)
				}
			}
		})
	}
	for i := range 30 {
		next := *g.Config()
		next.Server.ListCacheTTL = config.Duration(time.Duration(i+1) * time.Second)
		if i%2 == 0 {
			next.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{Name: "alpha", Tools: config.Rules{Deny: []string{"fail"}}}}}}
		} else {
			next.Tenants = nil
		}
		if err := g.Reload(&next); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if calls.Load() == 0 || failures.Load() != 0 {
		t.Errorf("%d calls, %d failures", calls.Load(), failures.Load())
	}
}
