package credentials_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
)

func TestForUpstreamNil(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tenants []config.Tenant
	}{
		{"no tenants", nil},
		{"tenant without entries", []config.Tenant{{ID: "a"}}},
		{"tenant without this upstream", []config.Tenant{{ID: "a", Upstreams: []config.TenantUpstream{{Name: "other", Headers: map[string]string{"X": "y"}}}}}},
		{"tenant entry with rules only", []config.Tenant{{ID: "a", Upstreams: []config.TenantUpstream{{Name: "up", Tools: config.Rules{Deny: []string{"x"}}}}}}},
		{"tenant entry with empty headers", []config.Tenant{{ID: "a", Upstreams: []config.TenantUpstream{{Name: "up", Headers: map[string]string{}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config1(upstream(nil), tc.tenants...)
			if src := credentials.ForUpstream(cfg, &cfg.Upstreams[0], credentials.Options{}); src != nil {
				t.Fatalf("ForUpstream = %T, want nil: the upstream's static headers alone", src)
			}
		})
	}
}

func TestForUpstreamTenantHeaders(t *testing.T) {
	cfg := config1(upstream(nil),
		config.Tenant{ID: "a", Upstreams: []config.TenantUpstream{{Name: "up", Headers: map[string]string{
			"x-api-key": "tenant-a-key", "X-Tenant-Extra": "extra",
		}}}},
		config.Tenant{ID: "b", Upstreams: []config.TenantUpstream{{Name: "up"}}},
	)
	src := source(t, cfg, credentials.Options{})
	shared := http.Header{"X-Api-Key": {"shared-key"}}
	for _, tc := range []struct {
		name string
		c    *credentials.Caller
		want http.Header
		part string
	}{
		{"tenant a", caller("iss", "alice", "a", "tok"), http.Header{"X-Api-Key": {"tenant-a-key"}, "X-Tenant-Extra": {"extra"}}, "t:a/"},
		{"tenant b", caller("iss", "bob", "b", "tok"), shared, ""},
		{"tenant without entry", caller("iss", "carol", "c", "tok"), shared, ""},
		{"no tenant", caller("iss", "dave", "", "tok"), shared, ""},
		{"no caller", nil, shared, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.c
			if c != nil {
				ctx = credentials.With(ctx, c)
			} else {
				c = credentials.From(ctx)
			}
			h, err := apply(ctx, src)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !equalHeader(h, tc.want) {
				t.Errorf("headers = %v, want %v", h, tc.want)
			}
			if got := src.Mode(c); got != credentials.ModeStatic {
				t.Errorf("Mode = %q, want static", got)
			}
			if got := src.Partition(c); got != tc.part {
				t.Errorf("Partition = %q, want %q", got, tc.part)
			}
			if src.Invalidate(ctx) {
				t.Error("Invalidate = true for static headers: another attempt gets the same")
			}
		})
	}
	if src.NeedsCaller(&credentials.Caller{}) {
		t.Error("NeedsCaller = true for static headers")
	}
	// What one request was given must not change what the next one gets.
	h, _ := apply(ctxOf(caller("iss", "alice", "a", "tok")), src)
	h.Set("X-Api-Key", "changed")
	h, _ = apply(ctxOf(caller("iss", "alice", "a", "tok")), src)
	if got := h.Get("X-Api-Key"); got != "tenant-a-key" {
		t.Errorf("after a request changed its header, the next gets %q", got)
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || strings.Join(v, "\x00") != strings.Join(w, "\x00") {
			return false
		}
	}
	return true
}

// A tenant's auth replaces the upstream's key by key: the tenant here sets
// only its own client, and keeps the upstream's token endpoint, scopes and
// resource.
func TestForUpstreamTenantAuthMerged(t *testing.T) {
	as := startAS(t)
	a := ccAuth(as)
	a.Scopes = []string{"mcp:read", "mcp:write"}
	a.Resource = "https://up.example/"
	cfg := config1(upstream(a),
		config.Tenant{ID: "a", Upstreams: []config.TenantUpstream{{Name: "up", Auth: &config.UpstreamAuth{ClientID: tenClient, ClientSecret: tenSecret}}}},
		config.Tenant{ID: "b", Upstreams: []config.TenantUpstream{{Name: "up"}}},
		config.Tenant{ID: "c", Upstreams: []config.TenantUpstream{{Name: "up", Auth: &config.UpstreamAuth{Scopes: []string{"c:only"}}}}},
	)
	src := source(t, cfg, credentials.Options{})
	ca, cb, cc := caller("iss", "alice", "a", "t1"), caller("iss", "bob", "b", "t2"), caller("iss", "carol", "c", "t3")

	ta := mustToken(t, ctxOf(ca), src)
	tb := mustToken(t, ctxOf(cb), src)
	tc := mustToken(t, ctxOf(cc), src)
	if !strings.HasPrefix(ta, "cc-"+tenClient+"-") || !strings.HasPrefix(tb, "cc-"+gwClient+"-") || !strings.HasPrefix(tc, "cc-"+gwClient+"-") {
		t.Fatalf("tokens a=%q b=%q c=%q: want tenant a's own client's, the others the gateway's", ta, tb, tc)
	}
	if tb == tc {
		t.Errorf("tenant c (own scopes) got the shared token %q", tc)
	}
	reqs := as.requests("/token")
	if len(reqs) != 3 {
		t.Fatalf("%d token requests, want 3", len(reqs))
	}
	want := []struct{ client, secret, scope string }{
		{tenClient, tenSecret, "mcp:read mcp:write"},
		{gwClient, gwSecret, "mcp:read mcp:write"},
		{gwClient, gwSecret, "c:only"},
	}
	for i, r := range reqs {
		w := want[i]
		if r.Client != w.client || r.Secret != w.secret {
			t.Errorf("request %d authenticated as %q/%q, want %q/%q", i, r.Client, r.Secret, w.client, w.secret)
		}
		if got := r.Form.Get("scope"); got != w.scope {
			t.Errorf("request %d scope = %q, want %q", i, got, w.scope)
		}
		if got := r.Form.Get("resource"); got != a.Resource {
			t.Errorf("request %d resource = %q, want the upstream's %q", i, got, a.Resource)
		}
	}
	// Partitions: shared for b (and anyone without an override), distinct
	// for a and c.
	pa, pb, pc := src.Partition(ca), src.Partition(cb), src.Partition(cc)
	if pb != "" {
		t.Errorf("Partition(b) = %q, want \"\" (shared)", pb)
	}
	if pa == "" || pc == "" || pa == pc {
		t.Errorf("Partition(a) = %q, Partition(c) = %q: want two distinct non-empty values", pa, pc)
	}
	if p := src.Partition(caller("iss", "zed", "a", "t9")); p != pa {
		t.Errorf("another caller of tenant a: Partition = %q, want %q (client credentials are the tenant's)", p, pa)
	}
}

func TestForUpstreamModeAndNeedsCaller(t *testing.T) {
	as := startAS(t)
	cc, x := ccAuth(as), xAuth(as)
	signed := &config.UpstreamAuth{Mode: config.AuthSignedIdentity}
	override := func(id string, a *config.UpstreamAuth, hs map[string]string) config.Tenant {
		return config.Tenant{ID: id, Upstreams: []config.TenantUpstream{{Name: "up", Auth: a, Headers: hs}}}
	}
	tenants := []config.Tenant{
		override("to-cc", &config.UpstreamAuth{Mode: config.AuthClientCredentials, TokenURL: as.url + "/token", ClientID: tenClient, ClientSecret: tenSecret}, nil),
		override("to-x", &config.UpstreamAuth{Mode: config.AuthTokenExchange, TokenURL: as.url + "/token", ClientID: tenClient, ClientSecret: tenSecret}, nil),
		override("to-signed", &config.UpstreamAuth{Mode: config.AuthSignedIdentity}, nil),
		override("headers", nil, map[string]string{"X-Tenant": "h"}),
		{ID: "plain"},
	}
	for _, tc := range []struct {
		name  string
		auth  *config.UpstreamAuth
		needs bool
		modes map[string]string // tenant → mode
	}{
		{"no auth", nil, false, map[string]string{"": "static", "plain": "static", "headers": "static",
			"to-cc": "client_credentials", "to-x": "token_exchange", "to-signed": "signed_identity"}},
		{"client_credentials", cc, false, map[string]string{"": "client_credentials", "plain": "client_credentials", "headers": "client_credentials",
			"to-cc": "client_credentials", "to-x": "token_exchange", "to-signed": "signed_identity"}},
		{"token_exchange", x, true, map[string]string{"": "token_exchange", "plain": "token_exchange", "headers": "token_exchange",
			"to-cc": "client_credentials", "to-x": "token_exchange", "to-signed": "signed_identity"}},
		{"signed_identity", signed, true, map[string]string{"": "signed_identity", "plain": "signed_identity", "headers": "signed_identity",
			"to-cc": "client_credentials", "to-x": "token_exchange", "to-signed": "signed_identity"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config1(upstream(tc.auth), tenants...)
			src := source(t, cfg, credentials.Options{})
			// NeedsCaller is about the requests that have none (the
			// gateway's own), which get the upstream's own auth.
			if got := src.NeedsCaller(&credentials.Caller{}); got != tc.needs {
				t.Errorf("NeedsCaller = %v, want %v", got, tc.needs)
			}
			for tenant, want := range tc.modes {
				if got := src.Mode(caller("iss", "sub", tenant, "tok")); got != want {
					t.Errorf("Mode(tenant %q) = %q, want %q", tenant, got, want)
				}
			}
		})
	}
}

func TestForUpstreamPartitionPerCaller(t *testing.T) {
	as := startAS(t)
	for _, a := range []*config.UpstreamAuth{xAuth(as), {Mode: config.AuthSignedIdentity}} {
		t.Run(a.Mode, func(t *testing.T) {
			cfg := config1(upstream(a),
				config.Tenant{ID: "t2", Upstreams: []config.TenantUpstream{{Name: "up", Headers: map[string]string{"X-T": "2"}}}})
			src := source(t, cfg, credentials.Options{})
			callers := []*credentials.Caller{
				caller("https://idp1", "alice", "t1", "x"),
				caller("https://idp2", "alice", "t1", "x"),
				caller("https://idp1", "bob", "t1", "x"),
				caller("https://idp1", "alice", "t2", "x"),
				caller("https://idp1", "alice", "", "x"),
				caller("https://idp1", "alicet1", "", "x"), // no ambiguity between fields
				caller("https://idp1a", "lice", "t1", "x"),
				caller("", "", "", ""),
			}
			seen := map[string]int{}
			for i, c := range callers {
				p := src.Partition(c)
				if p == "" {
					t.Errorf("caller %d: Partition = \"\", want one proper to the caller", i)
				}
				if j, ok := seen[p]; ok {
					t.Errorf("callers %d and %d share partition %q", j, i, p)
				}
				seen[p] = i
				for _, id := range []string{c.Subject, c.Issuer} {
					if len(id) > 3 && strings.Contains(p, id) {
						t.Errorf("Partition %q shows the caller's identifier %q", p, id)
					}
				}
			}
			// The same principal with other scopes or another token is the
			// same partition.
			same := caller("https://idp1", "alice", "t1", "another-token", "s1", "s2")
			if a, b := src.Partition(callers[0]), src.Partition(same); a != b {
				t.Errorf("same principal, other scopes/token: Partition %q != %q", b, a)
			}
		})
	}
}

// Tenant headers on top of a token mode: both are set, the token last.
func TestForUpstreamHeadersAndToken(t *testing.T) {
	as := startAS(t)
	cfg := config1(upstream(ccAuth(as)),
		config.Tenant{ID: "a", Upstreams: []config.TenantUpstream{{Name: "up", Headers: map[string]string{
			"X-Api-Key": "tenant-a-key", "Authorization": "Basic dGVuYW50OmE=",
		}}}})
	src := source(t, cfg, credentials.Options{})
	h, err := apply(ctxOf(caller("iss", "alice", "a", "tok")), src)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("X-Api-Key"); got != "tenant-a-key" {
		t.Errorf("X-Api-Key = %q, want the tenant's", got)
	}
	if tok := bearer(t, h); !strings.HasPrefix(tok, "cc-gateway-") {
		t.Errorf("token %q, want the client-credentials token", tok)
	}
	if got := src.Partition(caller("iss", "alice", "a", "tok")); got != "t:a/" {
		t.Errorf("Partition = %q, want t:a/", got)
	}
	if got := src.Mode(caller("iss", "alice", "a", "tok")); got != credentials.ModeClientCredentials {
		t.Errorf("Mode = %q", got)
	}
	h, err = apply(ctxOf(caller("iss", "bob", "b", "tok")), src)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("X-Api-Key"); got != "shared-key" {
		t.Errorf("tenant b: X-Api-Key = %q, want the upstream's", got)
	}
}

// TestForUpstreamStdioTenantEnv: a tenant's env for a stdio upstream makes
// the tenant's partition its own (lists and sessions are not shared with
// other tenants) and sets no header.
func TestForUpstreamStdioTenantEnv(t *testing.T) {
	u := config.Upstream{Name: "up", Command: []string{"server"}}
	cfg := config1(u,
		config.Tenant{ID: "a", Upstreams: []config.TenantUpstream{{Name: "up", Env: map[string]string{"KEY": "a-key"}}}},
		config.Tenant{ID: "b", Upstreams: []config.TenantUpstream{{Name: "up"}}},
	)
	src := credentials.ForUpstream(cfg, &cfg.Upstreams[0], credentials.Options{})
	if src == nil {
		t.Fatal("ForUpstream = nil")
	}
	defer src.Close()
	if p := src.Partition(caller("iss", "alice", "a", "")); p != "t:a/" {
		t.Errorf("tenant a's partition %q", p)
	}
	if p := src.Partition(caller("iss", "bob", "b", "")); p != "" {
		t.Errorf("tenant b's partition %q", p)
	}
	h := http.Header{}
	if err := src.Apply(credentials.With(context.Background(), caller("iss", "alice", "a", "")), h); err != nil || len(h) != 0 {
		t.Errorf("Apply set %v, %v", h, err)
	}
	// Without any tenant env, nothing.
	cfg = config1(u, config.Tenant{ID: "b", Upstreams: []config.TenantUpstream{{Name: "up"}}})
	if src := credentials.ForUpstream(cfg, &cfg.Upstreams[0], credentials.Options{}); src != nil {
		t.Errorf("ForUpstream = %T, want nil", src)
	}
}
