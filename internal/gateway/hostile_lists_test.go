package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

// Issue 13: hostile upstream lists. Each test puts a testkit.HostileUpstream
// behind the gateway and asserts the bound or the refusal through HTTP.

func hostileSpec(name string, h *testkit.HostileUpstream, prefix string) upstreamSpec {
	return upstreamSpec{name: name, url: h.URL, prefix: &prefix}
}

// scrape returns the gateway's /metrics text.
func scrape(t *testing.T, g *gateway.Gateway) string {
	t.Helper()
	admin := httptest.NewServer(g.AdminHandler())
	defer admin.Close()
	resp, err := http.Get(admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricValue returns the value of the first sample of /metrics text whose
// line starts with series, or 0.
func metricValue(metrics, series string) float64 {
	for _, line := range strings.Split(metrics, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// TestHostileListPagesAndBytes: an upstream whose nextCursor never ends is
// read for limits.list_pages pages and no more; one whose pages are huge is
// read until limits.list_bytes is passed and no further. Each cut is
// counted, the healthy upstream's tools are listed all the same, and the
// failure is remembered: listing again at once does not ask the upstream.
func TestHostileListPagesAndBytes(t *testing.T) {
	alpha := testkit.NewUpstream(t, "alpha")
	endless := testkit.NewHostileUpstream(t, testkit.Hostile{EndlessPages: true})
	huge := testkit.NewHostileUpstream(t, testkit.Hostile{Pages: 100, PageBytes: 1_000_000})
	g, url := startGatewayG(t, []upstreamSpec{spec(alpha), hostileSpec("endless", endless, "endless"), hostileSpec("huge", huge, "huge")},
		func(c *config.Config) {
			c.Limits.ListPages = 10
			c.Limits.ListBytes = 4 << 20
			c.Server.ListCacheTTL = config.Duration(time.Hour)
		})
	cs := testkit.Connect(t, url, nil)
	// The failures are remembered from the first walk on: the time since
	// then bounds the walks allowed below.
	start := time.Now()
	got := toolNames(t, cs)
	want := slices.Clone(testkit.UpstreamTools)
	for i := range want {
		want[i] = "alpha__" + want[i]
	}
	if !slices.Equal(got, want) {
		t.Errorf("tools = %v, want alpha's only %v", got, want)
	}
	if n := endless.Count("tools/list"); n != 10 {
		t.Errorf("endless upstream got %d tools/list, want limits.list_pages = 10", n)
	}
	// 1 MB pages against 4 MiB: the fifth page passes the bound.
	if n := huge.Count("tools/list"); n != 5 {
		t.Errorf("huge upstream got %d tools/list, want 5 (the page that passed 4 MiB ends the walk)", n)
	}
	// Remembered: no walk again at once, whatever the client does. The
	// failure is remembered for 1 s at first: on a loaded machine the
	// loop may outlast it, and each second past allows one walk more.
	for range 5 {
		toolNames(t, cs)
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "endless__echo"}); err == nil {
			t.Error("a call to an upstream whose list failed succeeded")
		}
	}
	walks := 1 + int(time.Since(start)/time.Second)
	if n := endless.Count("tools/list"); n > 10*walks {
		t.Errorf("endless upstream got %d tools/list after retries, want at most %d (negative cache)", n, 10*walks)
	}
	if n := huge.Count("tools/list"); n > 5*walks {
		t.Errorf("huge upstream got %d tools/list after retries, want at most %d (negative cache)", n, 5*walks)
	}
	m := scrape(t, g)
	// Four list kinds each: tools, prompts, resources, templates.
	if v := metricValue(m, `mcpgw_limit_rejections_total{limit="list_pages",tenant="none"}`); v < 1 {
		t.Errorf("list_pages rejections = %v\n%s", v, grepLines(m, "mcpgw_limit"))
	}
	if v := metricValue(m, `mcpgw_limit_rejections_total{limit="list_bytes",tenant="none"}`); v < 1 {
		t.Errorf("list_bytes rejections = %v\n%s", v, grepLines(m, "mcpgw_limit"))
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestHostileSlowListDoesNotHoldOthers: an upstream that pages slowly and
// forever neither holds a tools/list past the catalog's wait (5 s) nor
// withholds the healthy upstream's tools; its walk goes on in the
// background, after the client has its answer and left, until the
// upstream's timeout for the whole walk, and no further. A list while it
// runs does not wait for it again.
func TestHostileSlowListDoesNotHoldOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a walk to time out")
	}
	alpha := testkit.NewUpstream(t, "alpha")
	slow := testkit.NewHostileUpstream(t, testkit.Hostile{EndlessPages: true, PageDelay: 500 * time.Millisecond})
	ss := hostileSpec("slow", slow, "slow")
	ss.timeout = 7 * time.Second
	g, url := startGatewayG(t, []upstreamSpec{spec(alpha), ss})
	cs := testkit.Connect(t, url, nil)

	start := time.Now()
	got := toolNames(t, cs)
	took := time.Since(start)
	if took > 6500*time.Millisecond {
		t.Errorf("tools/list took %v with a slow upstream, want about the catalog's 5 s wait", took)
	}
	if len(got) != len(testkit.UpstreamTools) || !strings.HasPrefix(got[0], "alpha__") {
		t.Errorf("tools = %v, want alpha's", got)
	}
	// The walk is past its wait: the next list answers at once.
	start = time.Now()
	toolNames(t, cs)
	if took := time.Since(start); took > time.Second {
		t.Errorf("a second tools/list took %v while the slow walk ran", took)
	}
	// The walk ends at the upstream timeout (7 s), counted as list_time,
	// and asks for no page after.
	waitFor(t, func() bool {
		return metricValue(scrape(t, g), `mcpgw_limit_rejections_total{limit="list_time",tenant="none"}`) >= 1
	})
	n := slow.Count("tools/list")
	if n > 16 {
		t.Errorf("slow upstream got %d pages in 7 s at 0.5 s a page", n)
	}
	time.Sleep(time.Second)
	if m := slow.Count("tools/list"); m != n {
		t.Errorf("the walk went on after its timeout: %d pages, then %d", n, m)
	}
}

// TestHostileForeignNamespace: an upstream with an empty prefix lists
// beta__echo, a name in beta's namespace. It is dropped from its listing:
// a tenant that sees beta too gets beta's own beta__echo (no conflict), a
// tenant that may not use beta neither sees nor reaches it, and the drop is
// counted.
func TestHostileForeignNamespace(t *testing.T) {
	idp := testkit.StartIDP(t, idpClients)
	beta := testkit.NewUpstream(t, "beta")
	imp := testkit.NewHostileUpstream(t, testkit.Hostile{ForeignNames: []string{"beta__echo", "beta__other"}})
	g, url := startGatewayG(t, []upstreamSpec{spec(beta), hostileSpec("plain", imp, "")}, func(c *config.Config) {
		c.Auth = config.Auth{
			Issuers:        []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}},
			RequiredScopes: []string{"mcp"},
		}
		c.Tenants = []config.Tenant{
			{ID: "acme", Upstreams: []config.TenantUpstream{{Name: "beta"}, {Name: "plain"}}},
			{ID: "globex", Upstreams: []config.TenantUpstream{{Name: "plain"}}},
		}
	})
	ctx := context.Background()
	connect := func(client string) *mcp.ClientSession {
		return testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + idp.Token(t, client, url, "mcp")}}})
	}
	acme, globex := connect("acme-app"), connect("globex-app")

	if got := toolNames(t, acme); !slices.Contains(got, "beta__echo") || slices.Contains(got, "beta__other") {
		t.Errorf("acme sees %v: want beta's beta__echo, and no beta__other", got)
	}
	res, err := acme.CallTool(ctx, &mcp.CallToolParams{Name: "beta__echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || text(t, res) != "beta:x" {
		t.Errorf("acme's beta__echo answered %v %v, want beta's", res, err)
	}
	if got := toolNames(t, globex); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("globex sees %v, want only the plain upstream's echo", got)
	}
	for _, name := range []string{"beta__echo", "beta__other"} {
		if res, err := globex.CallTool(ctx, &mcp.CallToolParams{Name: name}); err == nil {
			t.Errorf("globex called %s: %v", name, res)
		} else if !strings.Contains(err.Error(), "Unknown tool: "+name) {
			t.Errorf("globex %s: %v", name, err)
		}
	}
	// Reads route by prefix, not by listing: a URI in beta's namespace
	// never goes to the unprefixed upstream either, whatever its case.
	for _, uri := range []string{"beta+mem://shared", "BETA+mem://shared"} {
		if _, err := globex.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("globex read %s", uri)
		}
	}
	if imp.Count("tools/call") != 0 || imp.Count("resources/read") != 0 {
		t.Error("the impostor answered a call or a read")
	}
	m := scrape(t, g)
	if v := metricValue(m, `mcpgw_upstream_names_flagged_total{reason="foreign_namespace",upstream="plain"}`); v < 2 {
		t.Errorf("foreign_namespace flagged %v, want ≥ 2\n%s", v, grepLines(m, "names_flagged"))
	}
}

// TestHostileControlCharacterNames: tool and prompt names and resource URIs
// with control, format or bidi characters are never shown and never
// routed; names that are only outside the recommended characters are kept
// and counted.
func TestHostileControlCharacterNames(t *testing.T) {
	h := testkit.NewHostileUpstream(t, testkit.Hostile{ControlNames: true})
	g, url := startGatewayG(t, []upstreamSpec{hostileSpec("h", h, "h")})
	cs := testkit.Connect(t, url, nil)
	ctx := context.Background()
	want := []string{"h__echo", "h__nbsp\u00a0ok-ish", "h__unicode-é-nonstd"}
	if got := toolNames(t, cs); !slices.Equal(got, want) {
		t.Errorf("tools = %q, want %q", got, want)
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pn []string
	for _, p := range prompts.Prompts {
		pn = append(pn, p.Name)
	}
	if wantP := []string{"h__greet", "h__nbsp\u00a0ok-ish", "h__unicode-é-nonstd"}; !slices.Equal(pn, wantP) {
		t.Errorf("prompts = %q, want %q", pn, wantP)
	}
	resources, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resources.Resources) != 1 || resources.Resources[0].URI != "h+mem://shared" {
		t.Errorf("resources = %v, want h+mem://shared only", resources.Resources)
	}
	for _, name := range testkit.HostileControlNames[:8] {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "h__" + name}); err == nil {
			t.Errorf("%q was callable", name)
		}
	}
	if h.Count("tools/call") != 0 {
		t.Error("a control-character tool reached the upstream")
	}
	m := scrape(t, g)
	if v := metricValue(m, `mcpgw_upstream_names_flagged_total{reason="control_character",upstream="h"}`); v < 8 {
		t.Errorf("control_character flagged %v\n%s", v, grepLines(m, "names_flagged"))
	}
	if v := metricValue(m, `mcpgw_upstream_names_flagged_total{reason="nonstandard",upstream="h"}`); v < 2 {
		t.Errorf("nonstandard flagged %v\n%s", v, grepLines(m, "names_flagged"))
	}
}

// TestHostileHiddenAndUnknownAlike: a hidden tool and an unknown one get
// the same answer, byte for byte but the name, and the same cost: calling
// either in a loop makes the gateway list the upstream once (the cold
// catalog) and never again before the TTL.
func TestHostileHiddenAndUnknownAlike(t *testing.T) {
	h := testkit.NewHostileUpstream(t, testkit.Hostile{ForeignNames: []string{"secret"}})
	url := startGateway(t, []upstreamSpec{hostileSpec("h", h, "h")}, func(c *config.Config) {
		c.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{
			Name: "h", Tools: config.Rules{Deny: []string{"secret"}},
		}}}}
		c.Server.ListCacheTTL = config.Duration(time.Hour)
	})
	sid := initialize(t, url)
	call := func(id int, name string) string {
		return postJSON(t, url, sid, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"`+name+`"}}`)
	}
	// Cold catalog: a hidden name costs the list an unknown one costs.
	call(1000, "h__secret")
	if n := h.Count("tools/list"); n != 1 {
		t.Errorf("a hidden name on a cold catalog caused %d tools/list, want 1, as an unknown name", n)
	}
	for i := range 20 {
		if i == 10 {
			// Past the old 1 s refetch interval: still no re-list.
			time.Sleep(1100 * time.Millisecond)
		}
		hidden := call(2*i, "h__secret")
		unknown := call(2*i+1, "h__nosuch")
		norm := func(body, name string, id int) string {
			body = strings.ReplaceAll(body, name, "NAME")
			return regexp.MustCompile(`"id":`+strconv.Itoa(id)+`\b`).ReplaceAllString(body, `"id":ID`)
		}
		if a, b := norm(hidden, "h__secret", 2*i), norm(unknown, "h__nosuch", 2*i+1); a != b {
			t.Fatalf("hidden and unknown differ:\n%s\n%s", hidden, unknown)
		}
		if !strings.Contains(hidden, `"code":-32602`) {
			t.Fatalf("hidden: %s", hidden)
		}
	}
	if n := h.Count("tools/list"); n != 1 {
		t.Errorf("41 calls to hidden and unknown names over 1.1 s caused %d tools/list, want 1", n)
	}
	if n := h.Count("tools/call"); n != 0 {
		t.Errorf("%d calls reached the upstream", n)
	}
}

// TestHostileSessionResources: an upstream that lists a resource only to
// the upstream session whose tool call created it. With lists: per_session
// (and, whatever lists says, when the upstream marks its lists cacheScope
// private), another principal of another tenant never sees it, and neither
// does the owner's next session. With lists: shared, the documented
// behaviour: one copy per replica, served to every tenant that sees the
// upstream, so whoever fetched it first decides what all see.
func TestHostileSessionResources(t *testing.T) {
	for _, tc := range []struct {
		name, lists, scope string
		leaks              bool
	}{
		{"per_session", config.ListsPerSession, "", false},
		{"private", config.ListsShared, "private", false},
		{"shared", config.ListsShared, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idp := testkit.StartIDP(t, idpClients)
			h := testkit.NewHostileUpstream(t, testkit.Hostile{SessionResources: true, CacheScope: tc.scope})
			url := startGateway(t, []upstreamSpec{hostileSpec("h", h, "h")}, func(c *config.Config) {
				c.Auth = config.Auth{
					Issuers:        []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}},
					RequiredScopes: []string{"mcp"},
				}
				c.Tenants = []config.Tenant{
					{ID: "acme", Upstreams: []config.TenantUpstream{{Name: "h"}}},
					{ID: "globex", Upstreams: []config.TenantUpstream{{Name: "h"}}},
				}
				c.Upstreams[0].Lists = tc.lists
				c.Server.ListCacheTTL = config.Duration(time.Hour)
			})
			ctx := context.Background()
			connect := func(client string) *mcp.ClientSession {
				return testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + idp.Token(t, client, url, "mcp")}}})
			}
			uris := func(cs *mcp.ClientSession) []string {
				res, err := cs.ListResources(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, r := range res.Resources {
					out = append(out, r.URI)
				}
				return out
			}
			a := connect("acme-app")
			res, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "h__create"})
			if err != nil {
				t.Fatal(err)
			}
			mine := "h+" + text(t, res)
			if got := uris(a); !slices.Contains(got, mine) {
				t.Fatalf("the owner does not see its resource %s: %v", mine, got)
			}
			b := connect("globex-app")
			got := uris(b)
			if leaked := slices.Contains(got, mine); leaked != tc.leaks {
				t.Errorf("globex sees %v (leaked %v, want %v)", got, leaked, tc.leaks)
			}
			if !slices.Contains(got, "h+mem://shared") {
				t.Errorf("globex misses the shared resource: %v", got)
			}
			if tc.leaks {
				return
			}
			// The owner's next session does not see it either, once the
			// first one ended.
			a.Close()
			a2 := connect("acme-app")
			if got := uris(a2); slices.Contains(got, mine) {
				t.Errorf("the owner's next session sees %s: %v", mine, got)
			}
		})
	}
}
