package credentials_test

import (
	"net/http"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
)

// BenchmarkApply measures Apply with a warm cache, for one caller: what
// every upstream request pays.
func BenchmarkApply(b *testing.B) {
	as := startAS(b)
	c := caller("https://idp", "alice", "t1", aliceToken, "mcp:read", "mcp:write")
	tenantHeaders := config.Tenant{ID: "t1", Upstreams: []config.TenantUpstream{{Name: "up", Headers: map[string]string{"X-Api-Key": "tenant-key"}}}}
	for _, bc := range []struct {
		name    string
		auth    *config.UpstreamAuth
		tenants []config.Tenant
	}{
		{"static", nil, []config.Tenant{tenantHeaders}},
		{"client_credentials", ccAuth(as), nil},
		{"token_exchange", xAuth(as), nil},
		{"signed_identity", &config.UpstreamAuth{Mode: config.AuthSignedIdentity}, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := config1(upstream(bc.auth), bc.tenants...)
			src := source(b, cfg, credentials.Options{Signer: newSigner(b)})
			ctx := ctxOf(c)
			h := http.Header{}
			if err := src.Apply(ctx, h); err != nil {
				b.Fatal(err)
			}
			n := as.tokenRequests()
			b.ReportAllocs()
			for b.Loop() {
				clear(h)
				if err := src.Apply(ctx, h); err != nil {
					b.Fatal(err)
				}
			}
			if as.tokenRequests() != n {
				b.Fatal("the cache was not warm")
			}
		})
	}
}
