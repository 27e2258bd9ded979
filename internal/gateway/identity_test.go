package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/testkit"
)

// whoami calls <prefix>__whoami and returns what the upstream verified.
func whoami(t *testing.T, cs *mcp.ClientSession, name string) testkit.Whoami {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, text(t, res))
	}
	var w testkit.Whoami
	if err := json.Unmarshal([]byte(text(t, res)), &w); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return w
}

// identityGateway runs a gateway trusting idp for client tokens, in front
// of ups, with tenants acme and globex seeing every upstream.
func identityGateway(t *testing.T, idp *testkit.IDP, ups []upstreamSpec, edit func(*config.Config)) (string, func(tenantClient string) *mcp.ClientSession) {
	t.Helper()
	url := startGateway(t, ups, func(c *config.Config) {
		c.Auth = config.Auth{Issuers: []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}}}
		c.Tenants = []config.Tenant{{ID: "acme"}, {ID: "globex"}}
		edit(c)
	})
	connect := func(client string) *mcp.ClientSession {
		tok := idp.Token(t, client, url, "mcp")
		return testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}})
	}
	return url, connect
}

// TestStaticCredentialsPerTenant: two tenants reach one upstream with their
// own API keys (tenants[].upstreams[].headers): the upstream sees each
// tenant's key, and neither tenant's lists or sessions serve the other.
func TestStaticCredentialsPerTenant(t *testing.T) {
	idp := testkit.StartIDP(t, idpClients)
	up := testkit.NewAuthUpstream(t, testkit.AuthUpstreamOptions{Name: "saas", Static: map[string]testkit.AuthIdentity{
		"key-acme":   {Subject: "acme-key", Tenant: "acme"},
		"key-globex": {Subject: "globex-key", Tenant: "globex"},
	}})
	_, connect := identityGateway(t, idp, []upstreamSpec{{name: "saas", url: up.URL}}, func(c *config.Config) {
		c.Tenants = []config.Tenant{
			{ID: "acme", Upstreams: []config.TenantUpstream{{Name: "saas", Headers: map[string]string{"Authorization": "Bearer key-acme"}}}},
			{ID: "globex", Upstreams: []config.TenantUpstream{{Name: "saas", Headers: map[string]string{"Authorization": "Bearer key-globex"}}}},
		}
	})
	acme, globex := connect("acme-app"), connect("globex-app")
	for range 2 {
		if w := whoami(t, acme, "saas__whoami"); w.Subject != "acme-key" {
			t.Errorf("acme reached the upstream as %+v", w)
		}
		if w := whoami(t, globex, "saas__whoami"); w.Subject != "globex-key" {
			t.Errorf("globex reached the upstream as %+v", w)
		}
	}
	for _, cs := range []*mcp.ClientSession{acme, globex} {
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	c := up.Counts()
	if len(c.Rejected) != 0 {
		t.Errorf("the upstream refused requests: %v", c.Rejected)
	}
	// Each tenant listed the tools with its own key (a shared listing
	// would have been fetched with one of them only).
	if c.Accepted["acme-key"] == 0 || c.Accepted["globex-key"] == 0 {
		t.Errorf("accepted: %v", c.Accepted)
	}
}

// TestClientCredentials: the gateway's own client gets a token from the
// authorization server (client_credentials), once however many calls need
// it at the same moment, and a new one when the upstream refuses it (401)
// or it expires; the caller's token never reaches the upstream.
func TestClientCredentials(t *testing.T) {
	clients := append([]testkit.IDPClient{{ID: "gateway", Secret: "gateway-secret", TTL: 40 * time.Second}}, idpClients...)
	idp := testkit.StartIDP(t, clients)
	up := testkit.NewAuthUpstream(t, testkit.AuthUpstreamOptions{Name: "svc", JWKSURL: idp.JWKSURL, Issuer: idp.Issuer, Audience: "https://svc.example"})
	_, connect := identityGateway(t, idp, []upstreamSpec{{name: "svc", url: up.URL}}, func(c *config.Config) {
		c.Upstreams[0].Auth = &config.UpstreamAuth{
			Mode: config.AuthClientCredentials, Issuer: idp.Issuer, ClientID: "gateway", ClientSecret: "gateway-secret",
			Scopes: []string{"mcp"}, Resource: "https://svc.example",
		}
	})
	acme := connect("acme-app")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if w := whoami(t, acme, "svc__whoami"); w.Subject != "gateway" || w.ClientID != "gateway" {
				t.Errorf("the upstream saw %+v, want the gateway's own client", w)
			}
		})
	}
	wg.Wait()
	if n := idp.Counts(t).ClientCredentials["gateway"]; n != 1 {
		t.Errorf("%d token requests for concurrent calls, want 1", n)
	}
	globex := connect("globex-app")
	if w := whoami(t, globex, "svc__whoami"); w.Subject != "gateway" {
		t.Errorf("globex: %+v", w)
	}
	if n := idp.Counts(t).ClientCredentials["gateway"]; n != 1 {
		t.Errorf("%d token requests, want 1: the token serves every caller", n)
	}

	// A 401 from the upstream: a new token, and the call sent again.
	up.FailNext(1)
	if w := whoami(t, acme, "svc__whoami"); w.Subject != "gateway" {
		t.Errorf("after a 401: %+v", w)
	}
	if n := idp.Counts(t).ClientCredentials["gateway"]; n != 2 {
		t.Errorf("%d token requests after a 401, want 2", n)
	}
	// Nothing the upstream accepted was the clients' own token.
	for sub := range up.Counts().Accepted {
		if sub != "gateway" {
			t.Errorf("the upstream accepted a token of %q", sub)
		}
	}
}

// TestClientCredentialsRefused: a token the authorization server refuses is
// a clear error naming the upstream and the mode, never the secret.
func TestClientCredentialsRefused(t *testing.T) {
	idp := testkit.StartIDP(t, idpClients)
	up := testkit.NewAuthUpstream(t, testkit.AuthUpstreamOptions{Name: "svc", JWKSURL: idp.JWKSURL})
	_, connect := identityGateway(t, idp, []upstreamSpec{{name: "svc", url: up.URL}}, func(c *config.Config) {
		c.Upstreams[0].Auth = &config.UpstreamAuth{
			Mode: config.AuthClientCredentials, TokenURL: idp.TokenURL, ClientID: "nobody", ClientSecret: "s3cret-value",
		}
	})
	acme := connect("acme-app")
	res, err := acme.CallTool(context.Background(), &mcp.CallToolParams{Name: "svc__whoami"})
	if err == nil {
		t.Fatalf("the call succeeded: %+v", res)
	}
	msg := err.Error()
	if !strings.Contains(msg, "svc") || !strings.Contains(msg, "client_credentials") || strings.Contains(msg, "s3cret-value") {
		t.Errorf("error %q: want the upstream and the mode named, and no secret", msg)
	}
}

// TestTokenExchange: each user reaches the upstream with their own token,
// exchanged (RFC 8693) at the authorization server that issued the
// caller's, cached per user; a refused exchange is a clean error.
func TestTokenExchange(t *testing.T) {
	clients := append([]testkit.IDPClient{
		{ID: "gateway", Secret: "gateway-secret", TokenExchange: true},
		{ID: "refused-app", Secret: "refused-secret", Tenant: "globex", Subject: "refused-user"},
	}, idpClients...)
	idp := testkit.StartIDP(t, clients)
	up := testkit.NewAuthUpstream(t, testkit.AuthUpstreamOptions{Name: "svc", JWKSURL: idp.JWKSURL, Issuer: idp.Issuer, Audience: "https://svc.example"})
	_, connect := identityGateway(t, idp, []upstreamSpec{{name: "svc", url: up.URL}}, func(c *config.Config) {
		c.Upstreams[0].Auth = &config.UpstreamAuth{
			Mode: config.AuthTokenExchange, TokenURL: idp.TokenURL, ClientID: "gateway", ClientSecret: "gateway-secret",
			Resource: "https://svc.example",
		}
	})
	acme, globex := connect("acme-app"), connect("globex-app")
	for range 3 {
		if w := whoami(t, acme, "svc__whoami"); w.Subject != "acme-app" || w.Tenant != "acme" {
			t.Errorf("acme reached the upstream as %+v", w)
		}
		if w := whoami(t, globex, "svc__whoami"); w.Subject != "globex-app" || w.Tenant != "globex" {
			t.Errorf("globex reached the upstream as %+v", w)
		}
	}
	counts := idp.Counts(t)
	for _, sub := range []string{"acme-app", "globex-app"} {
		if n := counts.Exchanges("gateway", sub); n != 1 {
			t.Errorf("%d exchanges for %s, want 1 (cached)", n, sub)
		}
	}
	refused := connect("refused-app")
	_, err := refused.CallTool(context.Background(), &mcp.CallToolParams{Name: "svc__whoami"})
	if err == nil || !strings.Contains(err.Error(), "token_exchange") {
		t.Errorf("a refused exchange: %v", err)
	}
}

// TestClientCredentialsExpiry: a token is fetched again once it expires.
func TestClientCredentialsExpiry(t *testing.T) {
	clients := append([]testkit.IDPClient{{ID: "gateway", Secret: "gateway-secret", TTL: 2 * time.Second}}, idpClients...)
	idp := testkit.StartIDP(t, clients)
	up := testkit.NewAuthUpstream(t, testkit.AuthUpstreamOptions{Name: "svc", JWKSURL: idp.JWKSURL, Audience: "https://svc.example"})
	_, connect := identityGateway(t, idp, []upstreamSpec{{name: "svc", url: up.URL}}, func(c *config.Config) {
		c.Upstreams[0].Auth = &config.UpstreamAuth{
			Mode: config.AuthClientCredentials, TokenURL: idp.TokenURL, ClientID: "gateway", ClientSecret: "gateway-secret",
			Resource: "https://svc.example",
		}
	})
	acme := connect("acme-app")
	whoami(t, acme, "svc__whoami")
	// The token lives 2 s (the IdP's clock counts whole seconds): past it,
	// the next call needs a new one.
	time.Sleep(2100 * time.Millisecond)
	whoami(t, acme, "svc__whoami")
	if n := idp.Counts(t).ClientCredentials["gateway"]; n < 2 {
		t.Errorf("%d token requests across the token's expiry, want 2", n)
	}
	if r := up.Counts().Rejected; len(r) != 0 {
		t.Errorf("the upstream refused expired tokens: %v", r)
	}
}

// TestSignedIdentity: an upstream that trusts the gateway verifies the token
// it signs against /.well-known/jwks.json and sees each caller's subject and
// tenant, never the caller's own token.
func TestSignedIdentity(t *testing.T) {
	idp := testkit.StartIDP(t, idpClients)
	// The upstream is configured before the gateway runs, so its key set
	// URL points here, which forwards to the gateway's once known.
	var jwksURL atomic.Value
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(jwksURL.Load().(string))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(keys.Close)
	up := testkit.NewAuthUpstream(t, testkit.AuthUpstreamOptions{Name: "internal", JWKSURL: keys.URL})
	url, connect := identityGateway(t, idp, []upstreamSpec{{name: "internal", url: up.URL}}, func(c *config.Config) {
		c.Upstreams[0].Auth = &config.UpstreamAuth{Mode: config.AuthSignedIdentity}
	})
	jwksURL.Store(strings.TrimSuffix(url, "/mcp") + "/.well-known/jwks.json")
	acme, globex := connect("acme-app"), connect("globex-app")
	for range 2 {
		if w := whoami(t, acme, "internal__whoami"); w.Subject != "acme-app" || w.Tenant != "acme" || w.ClientID != "mcp-gateway" {
			t.Errorf("acme reached the upstream as %+v", w)
		}
		if w := whoami(t, globex, "internal__whoami"); w.Subject != "globex-app" || w.Tenant != "globex" {
			t.Errorf("globex reached the upstream as %+v", w)
		}
	}
	if r := up.Counts().Rejected; len(r) != 0 {
		t.Errorf("the upstream refused: %v", r)
	}
}

// TestFetchedTokenScrubbed: an upstream that echoes the request's
// credentials in an error does not hand a fetched token to the client.
func TestFetchedTokenScrubbed(t *testing.T) {
	clients := append([]testkit.IDPClient{{ID: "gateway", Secret: "gateway-secret"}}, idpClients...)
	idp := testkit.StartIDP(t, clients)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "denied; you sent: "+r.Header.Get("Authorization"), http.StatusInternalServerError)
	}))
	t.Cleanup(echo.Close)
	_, connect := identityGateway(t, idp, []upstreamSpec{{name: "echo", url: echo.URL + "/mcp"}}, func(c *config.Config) {
		c.Upstreams[0].Auth = &config.UpstreamAuth{
			Mode: config.AuthClientCredentials, TokenURL: idp.TokenURL, ClientID: "gateway", ClientSecret: "gateway-secret",
			Resource: "https://echo.example",
		}
	})
	acme := connect("acme-app")
	_, err := acme.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo__anything"})
	if err == nil {
		t.Fatal("the call succeeded")
	}
	tok := idp.Token(t, "gateway", "https://echo.example")
	head := tok[:strings.LastIndexByte(tok, '.')] // header and claims: the same for any token of this client but iat/exp/jti
	if strings.Contains(err.Error(), "eyJ") || strings.Contains(err.Error(), head[:20]) {
		t.Errorf("the client got the upstream's token: %v", err)
	}
	if !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("want the echoed token redacted: %v", err)
	}
}

// TestCredentialsReloadAuditMetrics: a reload that rotates the client secret
// takes effect on the next call; token fetches are counted per upstream,
// mode and outcome; the audit log names the mode of each call, never a
// credential.
func TestCredentialsReloadAuditMetrics(t *testing.T) {
	clients := append([]testkit.IDPClient{{ID: "gateway", Secret: "gateway-secret-2"}}, idpClients...)
	idp := testkit.StartIDP(t, clients)
	up := testkit.NewAuthUpstream(t, testkit.AuthUpstreamOptions{Name: "svc", JWKSURL: idp.JWKSURL, Audience: "https://svc.example"})
	var auditLog syncBuffer
	var cfg *config.Config
	g, url := startGatewayWith(t, gateway.Options{Audit: audit.New(&auditLog)}, []upstreamSpec{{name: "svc", url: up.URL}}, func(c *config.Config) {
		c.Auth = config.Auth{Issuers: []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}}}
		c.Tenants = []config.Tenant{{ID: "acme"}}
		c.Upstreams[0].Auth = &config.UpstreamAuth{
			Mode: config.AuthClientCredentials, TokenURL: idp.TokenURL, ClientID: "gateway", ClientSecret: "gateway-secret-1",
			Resource: "https://svc.example",
		}
		cfg = c
	})
	tok := idp.Token(t, "acme-app", url, "mcp")
	acme := testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}})
	if _, err := acme.CallTool(context.Background(), &mcp.CallToolParams{Name: "svc__whoami"}); err == nil {
		t.Fatal("a call with a secret the IdP does not know succeeded")
	}

	next := *cfg
	next.Upstreams = slices.Clone(cfg.Upstreams)
	a := *cfg.Upstreams[0].Auth
	a.ClientSecret = "gateway-secret-2"
	next.Upstreams[0].Auth = &a
	if err := g.Reload(&next); err != nil {
		t.Fatal(err)
	}
	// A new session: the first one's upstream session failed to open.
	acme = testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}})
	if w := whoami(t, acme, "svc__whoami"); w.Subject != "gateway" {
		t.Errorf("after the reload: %+v", w)
	}

	rec := httptest.NewRecorder()
	g.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	metrics := rec.Body.String()
	for _, want := range []string{
		`mcpgw_upstream_token_fetches_total{mode="client_credentials",outcome="ok",upstream="svc"} 1`,
		`mcpgw_upstream_token_fetches_total{mode="client_credentials",outcome="error",upstream="svc"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	log := auditLog.String()
	if !strings.Contains(log, `"credentials":"client_credentials"`) {
		t.Errorf("no audit record names the mode:\n%s", log)
	}
	for _, secret := range []string{"gateway-secret-1", "gateway-secret-2", "eyJ"} {
		if strings.Contains(log, secret) {
			t.Errorf("the audit log holds %q", secret)
		}
	}
}

// TestListsPerTenantCredentials: an upstream that lists per credential
// (each key its own tools) shows each tenant its own list: a listing
// fetched with one tenant's key is never served to the other.
func TestListsPerTenantCredentials(t *testing.T) {
	idp := testkit.StartIDP(t, idpClients)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.Method != http.MethodPost || key == "" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.Decode(body)
		if err != nil || msg.Kind != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := `{}`
		switch msg.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"keyed","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"only_` + key + `","inputSchema":{"type":"object"}}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jsonrpc.AppendResult(nil, msg.ID, []byte(result)))
	}))
	t.Cleanup(up.Close)
	_, connect := identityGateway(t, idp, []upstreamSpec{{name: "keyed", url: up.URL + "/mcp"}}, func(c *config.Config) {
		c.Tenants = []config.Tenant{
			{ID: "acme", Upstreams: []config.TenantUpstream{{Name: "keyed", Headers: map[string]string{"Authorization": "Bearer acmekey"}}}},
			{ID: "globex", Upstreams: []config.TenantUpstream{{Name: "keyed", Headers: map[string]string{"Authorization": "Bearer globexkey"}}}},
		}
	})
	for _, c := range []struct{ client, want string }{
		{"acme-app", "keyed__only_acmekey"}, {"globex-app", "keyed__only_globexkey"},
		{"acme-other", "keyed__only_acmekey"}, {"globex-app", "keyed__only_globexkey"},
	} {
		res, err := connect(c.client).ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) != 1 || res.Tools[0].Name != c.want {
			var names []string
			for _, tl := range res.Tools {
				names = append(names, tl.Name)
			}
			t.Errorf("%s sees %v, want [%s]", c.client, names, c.want)
		}
	}
}

// TestTokenExchangeActor: with auth.actor, the exchanged token names the
// gateway's client as the party acting for the user.
func TestTokenExchangeActor(t *testing.T) {
	clients := append([]testkit.IDPClient{{ID: "gateway", Secret: "gateway-secret", TokenExchange: true}}, idpClients...)
	idp := testkit.StartIDP(t, clients)
	up := testkit.NewAuthUpstream(t, testkit.AuthUpstreamOptions{Name: "svc", JWKSURL: idp.JWKSURL, Audience: "https://svc.example"})
	_, connect := identityGateway(t, idp, []upstreamSpec{{name: "svc", url: up.URL}}, func(c *config.Config) {
		c.Upstreams[0].Auth = &config.UpstreamAuth{
			Mode: config.AuthTokenExchange, TokenURL: idp.TokenURL, ClientID: "gateway", ClientSecret: "gateway-secret",
			Resource: "https://svc.example", Actor: true,
		}
	})
	w := whoami(t, connect("acme-app"), "svc__whoami")
	if w.Subject != "acme-app" || w.Actor["sub"] != "gateway" {
		t.Errorf("the upstream saw %+v, want acme-app acted for by the gateway", w)
	}
}

// TestSigningKeyRotation: a reload picks up a signing key file rotated in
// place; /.well-known/jwks.json then publishes the new key.
func TestSigningKeyRotation(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "identity.pem")
	writeKey := func() { testkit.WriteSigningKey(t, keyFile) }
	writeKey()
	raw := testkit.NewRawUpstream(t)
	var cfg *config.Config
	g, url := startGatewayG(t, []upstreamSpec{{name: "raw", url: raw.URL}}, func(c *config.Config) {
		c.Upstreams[0].Auth = &config.UpstreamAuth{Mode: config.AuthSignedIdentity}
		c.Identity.SigningKeys = []string{keyFile}
		cfg = c
	})
	kids := func() string {
		resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/.well-known/jwks.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var set struct {
			Keys []struct {
				Kid string `json:"kid"`
			} `json:"keys"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) != 1 {
			t.Fatalf("jwks: %+v %v", set, err)
		}
		return set.Keys[0].Kid
	}
	before := kids()
	if err := g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if kids() != before {
		t.Error("a reload with the same key file changed the key")
	}
	writeKey()
	if err := g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if after := kids(); after == before {
		t.Error("the key file was rotated and reloaded, but the old key is still published")
	}
}

// TestReloadWithUnusableKeysChangesNothing: a reload whose signing key
// file can no longer be read is refused as a whole: the error is
// reported (the error, the metric, /readyz), the generation stays, and
// the upstream is still reached with the key in force, which the JWKS
// still publishes.
func TestReloadWithUnusableKeysChangesNothing(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "identity.pem")
	testkit.WriteSigningKey(t, keyFile)
	raw := testkit.NewRawUpstream(t)
	var cfg *config.Config
	g, url := startGatewayG(t, []upstreamSpec{{name: "raw", url: raw.URL}}, func(c *config.Config) {
		c.Upstreams[0].Auth = &config.UpstreamAuth{Mode: config.AuthSignedIdentity}
		c.Identity.SigningKeys = []string{keyFile}
		cfg = c
	})
	cs := testkit.Connect(t, url, nil)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "raw__raw"}); err != nil {
		t.Fatal(err)
	}
	before := raw.LastHeader("tools/call").Get("Authorization")
	if before == "" {
		t.Fatal("the upstream got no signed identity")
	}

	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	next := *cfg
	next.Upstreams = slices.Clone(cfg.Upstreams)
	next.Upstreams[0].Timeout = config.Duration(7 * time.Second) // a change, so that the upstream would be rebuilt
	err := g.Reload(&next)
	if err == nil || !strings.Contains(err.Error(), "identity") {
		t.Fatalf("reload with an unusable key file: %v", err)
	}
	if g.Generation() != 1 || !strings.Contains(g.ReloadStatus(), "refused") {
		t.Errorf("after the refused reload: generation %d, status %q", g.Generation(), g.ReloadStatus())
	}
	if n := metricValue(scrape(t, g), `mcpgw_config_reloads_total{result="error"}`); n != 1 {
		t.Errorf("refused reloads counted %v, want 1", n)
	}
	if g.Config().Upstreams[0].Timeout == next.Upstreams[0].Timeout {
		t.Error("the refused config is in force")
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "raw__raw"}); err != nil {
		t.Fatal(err)
	}
	if got := raw.LastHeader("tools/call").Get("Authorization"); got == "" {
		t.Error("after the refused reload, the upstream got no signed identity")
	}
}
