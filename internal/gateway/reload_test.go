package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
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

// TestReloadOneGenerationPerRequest flips the config between two
// generations that differ in which tenants exist and which upstreams they
// see, while principals of every tenant list tools (run it with -race).
// Generation A has acme (alpha) and globex (beta); B has acme (beta) and
// initech (alpha). Each answer must come whole from the generation whose
// auth admitted the request: the router never refuses a tenant the auth
// accepted, and no list holds the other generation's tools. Where a
// reload lands in a request is left to chance here;
// TestReloadMidRequestKeepsItsGeneration pins it.
func TestReloadOneGenerationPerRequest(t *testing.T) {
	lab := newLabIssuer(t)
	a := testkit.NewUpstreamWith(t, "alpha", testkit.UpstreamOptions{JSONResponse: true})
	b := testkit.NewUpstreamWith(t, "beta", testkit.UpstreamOptions{JSONResponse: true})
	sees := func(up string) []config.TenantUpstream { return []config.TenantUpstream{{Name: up}} }
	genA := []config.Tenant{{ID: "acme", Upstreams: sees("alpha")}, {ID: "globex", Upstreams: sees("beta")}}
	genB := []config.Tenant{{ID: "acme", Upstreams: sees("beta")}, {ID: "initech", Upstreams: sees("alpha")}}
	g, url := startGatewayG(t, []upstreamSpec{spec(a), spec(b)}, labAuth(lab), func(c *config.Config) { c.Tenants = genA })

	// What each tenant may see: the prefix of every tool of one answer,
	// per generation that has the tenant.
	want := map[string][]string{"acme": {"alpha__", "beta__"}, "globex": {"beta__"}, "initech": {"alpha__"}}
	// list sends a 2026-07-28 tools/list; it runs outside the test's
	// goroutine, so it reports a failed exchange as status 0.
	list := func(token string) (status int, challenge, body string, names []string) {
		req := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/list")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err.Error(), nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var res struct {
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal(b, &res) == nil {
			for _, tl := range res.Result.Tools {
				names = append(names, tl.Name)
			}
		}
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b), names
	}

	ctx, cancel := context.WithCancel(context.Background())
	var answered, refused atomic.Int64
	var wg sync.WaitGroup
	for _, tn := range []string{"acme", "globex", "initech"} {
		for i := range 2 {
			token := labToken(t, lab, url, fmt.Sprintf("%s-%d", tn, i), tn)
			wg.Go(func() {
				for ctx.Err() == nil {
					status, challenge, body, names := list(token)
					switch {
					case status == http.StatusForbidden && strings.Contains(challenge, "tenant not configured") && tn != "acme":
						refused.Add(1) // the auth's refusal: a generation without the tenant
						continue
					case status != http.StatusOK || len(names) == 0:
						t.Errorf("%s: %d %s", tn, status, body)
						cancel()
						return
					}
					answered.Add(1)
					up, _, _ := strings.Cut(names[0], "__")
					prefix := up + "__"
					if !slices.Contains(want[tn], prefix) {
						t.Errorf("%s sees %v", tn, names)
					}
					for _, n := range names {
						if !strings.HasPrefix(n, prefix) {
							t.Errorf("%s: one answer mixes the generations: %v", tn, names)
							break
						}
					}
				}
			})
		}
	}
	for i := 0; i < 200 && ctx.Err() == nil; i++ {
		next := *g.Config()
		next.Tenants = genB
		if i%2 == 1 {
			next.Tenants = genA
		}
		if err := g.Reload(&next); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	t.Logf("%d answers, %d refusals by the auth over 200 reloads", answered.Load(), refused.Load())
	if answered.Load() == 0 || refused.Load() == 0 {
		t.Errorf("%d answers, %d refusals by the auth: the flips were not observed", answered.Load(), refused.Load())
	}
}

// TestReloadMidRequestKeepsItsGeneration reloads while a request is held
// inside its authentication (the issuer's key set is being fetched): the
// request is authenticated, checked and routed with the generation it
// entered with, never the one that replaced it meanwhile. Generation A has
// acme (alpha) and globex (beta); B has acme (beta) and initech (alpha).
func TestReloadMidRequestKeepsItsGeneration(t *testing.T) {
	sees := func(up string) []config.TenantUpstream { return []config.TenantUpstream{{Name: up}} }
	genA := []config.Tenant{{ID: "acme", Upstreams: sees("alpha")}, {ID: "globex", Upstreams: sees("beta")}}
	genB := []config.Tenant{{ID: "acme", Upstreams: sees("beta")}, {ID: "initech", Upstreams: sees("alpha")}}
	a := testkit.NewUpstreamWith(t, "alpha", testkit.UpstreamOptions{JSONResponse: true})
	b := testkit.NewUpstreamWith(t, "beta", testkit.UpstreamOptions{JSONResponse: true})
	for _, tc := range []struct {
		tenant     string
		status     int
		tool       string // the first tool listed, with status 200
		challenged string // in WWW-Authenticate, with status 403
	}{
		{tenant: "acme", status: http.StatusOK, tool: "alpha__"},                               // B would list beta's
		{tenant: "globex", status: http.StatusOK, tool: "beta__"},                              // B would refuse the tenant
		{tenant: "initech", status: http.StatusForbidden, challenged: "tenant not configured"}, // B would list alpha's
	} {
		t.Run(tc.tenant, func(t *testing.T) {
			// The first request's key set fetch is held until the
			// reload is done; the issuer is fetched once (the verifier
			// outlives the reload: its settings are unchanged).
			fetching, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			lab := newLabIssuerWith(t, func() {
				once.Do(func() { close(fetching) })
				<-release
			})
			g, url := startGatewayG(t, []upstreamSpec{spec(a), spec(b)}, labAuth(lab), func(c *config.Config) { c.Tenants = genA })
			req := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
			req.Header.Set("Authorization", "Bearer "+labToken(t, lab, url, "held", tc.tenant))
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/list")
			type answer struct {
				resp *http.Response
				body string
			}
			done := make(chan answer, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					done <- answer{body: err.Error()}
					return
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				done <- answer{resp, string(body)}
			}()
			select {
			case <-fetching:
			case <-time.After(10 * time.Second):
				close(release)
				t.Fatal("the request never fetched the issuer's keys")
			}
			next := *g.Config()
			next.Tenants = genB
			err := g.Reload(&next)
			close(release)
			if err != nil {
				t.Fatal(err)
			}
			ans := <-done
			if ans.resp == nil {
				t.Fatal(ans.body)
			}
			if ans.resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", ans.resp.StatusCode, tc.status, ans.body)
			}
			if c := ans.resp.Header.Get("WWW-Authenticate"); !strings.Contains(c, tc.challenged) {
				t.Errorf("challenge %q, want one with %q", c, tc.challenged)
			}
			if tc.tool != "" && !strings.Contains(ans.body, `"name":"`+tc.tool) {
				t.Errorf("listed %s, want %s tools only", ans.body, tc.tool)
			}
			if tc.tool != "" {
				other := map[string]string{"alpha__": "beta__", "beta__": "alpha__"}[tc.tool]
				if strings.Contains(ans.body, `"name":"`+other) {
					t.Errorf("listed the other generation's tools: %s", ans.body)
				}
			}
		})
	}
}
