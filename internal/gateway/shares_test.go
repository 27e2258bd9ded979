package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestUpstreamStreamsShare: one principal with many GET streams holds at
// most its share of limits.upstream_streams (refusals counted under
// upstream_streams_per_principal), and another principal still gets its
// upstream stream.
func TestUpstreamStreamsShare(t *testing.T) {
	idp := testkit.StartIDP(t, idpClients)
	u := newListenUpstream(t)
	g, url := startGatewayG(t, []upstreamSpec{{name: "up", url: u.url}}, func(c *config.Config) {
		c.Auth = config.Auth{
			Issuers:        []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}},
			RequiredScopes: []string{"mcp"},
		}
		c.Tenants = []config.Tenant{
			{ID: "acme", Upstreams: []config.TenantUpstream{{Name: "up"}}},
			{ID: "globex", Upstreams: []config.TenantUpstream{{Name: "up"}}},
		}
		c.Limits.UpstreamStreams = 8
		c.Limits.UpstreamStreamsPerPrincipal = 2
	})
	connect := func(client string) {
		tok := idp.Token(t, client, url, "mcp")
		// testkit.Connect declares roots (the SDK's default): every
		// upstream session of the session is heard on a GET stream.
		testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}})
	}
	for range 4 {
		connect("acme-app")
	}
	waitFor(t, func() bool { return limitCount(t, g, "upstream_streams_per_principal") >= 2 })
	if got := upstreamStreamsOpen(t, g); got != "2" {
		t.Fatalf("acme-app holds %s upstream streams, want its share of 2", got)
	}
	connect("globex-app")
	waitUpstreamStreams(t, g, 3)
}

// upstreamStreamsOpen reads mcpgw_upstream_streams_open.
func upstreamStreamsOpen(t *testing.T, g interface{ AdminHandler() http.Handler }) string {
	t.Helper()
	rec := httptest.NewRecorder()
	g.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(line, "mcpgw_upstream_streams_open "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
