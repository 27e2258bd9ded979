package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"

	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/explain"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
	"github.com/mcpgw/gateway/internal/vault"
)

// oauthEnv is a gateway whose upstream "saas" (prefix saas) acts as each
// user with the user's own token from the IdP (auth mode user_oauth),
// the same IdP issuing the clients' gateway tokens.
type oauthEnv struct {
	idp      *testkit.IDP
	up       *testkit.AuthUpstream
	g        *gateway.Gateway
	url      string // the MCP endpoint
	origin   string
	cfg      *config.Config
	listener net.Listener
	// stopGateway stops the gateway running now.
	stopGateway func()
	// logs is everything the gateway logged, at debug level.
	logs testkit.SyncBuffer
}

const gwClient, gwSecret = "gateway", "gateway-secret"

// vaultKey is a fresh vault key, base64.
func vaultKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// oauthClients are the IdP's clients: the gateway's (authorization code,
// redirect to origin) and one client-credentials client per user of the
// gateway, whose tokens name the user (sub) and tenant.
func oauthClients(origin string, ttl time.Duration) []testkit.IDPClient {
	return []testkit.IDPClient{
		{ID: gwClient, Secret: gwSecret, RedirectURIs: []string{origin + "/oauth/callback"}, TTL: ttl},
		{ID: "alice", Secret: "alice-secret", Subject: "alice", Tenant: "acme"},
		{ID: "bob", Secret: "bob-secret", Subject: "bob", Tenant: "acme"},
		{ID: "carol", Secret: "carol-secret", Subject: "carol", Tenant: "globex"},
		// The gateway's own client at its issuer, for vault.login: its
		// tokens are for the gateway (resource server.public_url), of
		// tenant acme, the subject the account that signed in.
		{ID: "gateway-login", Secret: "login-secret", RedirectURIs: []string{origin + "/oauth/callback"}, Tenant: "acme"},
	}
}

// startOAuthEnv starts the IdP (user tokens of ttl), the upstream and a
// gateway; edit changes the gateway's config.
func startOAuthEnv(t *testing.T, ttl time.Duration, edit func(*config.Config)) *oauthEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &oauthEnv{origin: "http://" + ln.Addr().String(), listener: ln}
	e.url = e.origin + "/mcp"
	e.idp = testkit.StartIDP(t, oauthClients(e.origin, ttl))
	e.up = testkit.NewAuthUpstream(t, testkit.AuthUpstreamOptions{Name: "saas", JWKSURL: e.idp.JWKSURL, Issuer: e.idp.Issuer})
	cfg := &config.Config{}
	cfg.Server.PublicURL = e.url
	cfg.Server.DrainDelay = ptr(config.Duration(0))
	cfg.Auth = config.Auth{Issuers: []config.Issuer{{Name: "corp", IssuerURL: e.idp.Issuer, TenantClaim: "tenant"}}}
	cfg.Tenants = []config.Tenant{{ID: "acme"}, {ID: "globex"}}
	cfg.Upstreams = []config.Upstream{{Name: "saas", URL: e.up.URL, Prefix: ptr("saas"), Watch: ptr(false), Auth: &config.UpstreamAuth{
		Mode: config.AuthUserOAuth, Issuer: e.idp.Issuer, ClientID: gwClient, ClientSecret: gwSecret, Scopes: []string{"mcp"},
	}}}
	cfg.Vault.Keys = []config.VaultKey{{ID: "k1", Secret: vaultKey()}}
	if edit != nil {
		edit(cfg)
	}
	e.cfg = cfg
	e.start(t)
	return e
}

// start runs a gateway for e.cfg on e.listener (a new one on the same
// address after the first).
func (e *oauthEnv) start(t *testing.T) {
	t.Helper()
	cfg := *e.cfg
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(&cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(&e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ln := e.listener
	if ln == nil {
		if ln, err = net.Listen("tcp", strings.TrimPrefix(e.origin, "http://")); err != nil {
			t.Fatal(err)
		}
	}
	e.listener = nil
	srv := httptest.NewUnstartedServer(g.Handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	stop := func() {
		srv.CloseClientConnections()
		srv.Close()
		g.Close()
	}
	t.Cleanup(stop)
	e.g = g
	e.stopGateway = stop
}

// token returns a gateway token of the IdP client user.
func (e *oauthEnv) token(t *testing.T, user string) string {
	return e.idp.Token(t, user, e.url, "mcp")
}

// connect opens a session as user; urlMode declares URL-mode elicitation,
// and complete then receives the ids of notifications/elicitation/complete.
func (e *oauthEnv) connect(t *testing.T, user string, urlMode bool) (*mcp.ClientSession, chan string) {
	t.Helper()
	opts := &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + e.token(t, user)}}}
	complete := make(chan string, 8)
	if urlMode {
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
		opts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		opts.ElicitationCompleteHandler = func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			complete <- req.Params.ElicitationID
		}
	}
	return testkit.Connect(t, e.url, opts), complete
}

var linkRE = regexp.MustCompile(`http://[^ ]+/oauth/consent\?id=[A-Za-z0-9_-]+`)

// linkFromResult returns the consent link of an isError result.
func linkFromResult(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "saas__whoami"})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	txt := text(t, res)
	if !res.IsError || !strings.Contains(txt, "retry") {
		t.Fatalf("want an isError result with a link, got %v: %s", res.IsError, txt)
	}
	link := linkRE.FindString(txt)
	if link == "" {
		t.Fatalf("no link in %q", txt)
	}
	return link
}

// elicitation returns the elicitation of a -32042 answer.
func elicitation(t *testing.T, cs *mcp.ClientSession) (id, link string) {
	t.Helper()
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "saas__whoami"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32042 {
		t.Fatalf("want URLElicitationRequiredError, got %v", err)
	}
	var data struct {
		Elicitations []struct {
			Mode, ElicitationID, URL, Message string
		}
	}
	if err := json.Unmarshal(je.Data, &data); err != nil || len(data.Elicitations) != 1 {
		t.Fatalf("data: %s %v", je.Data, err)
	}
	el := data.Elicitations[0]
	if el.Mode != "url" || el.ElicitationID == "" || !linkRE.MatchString(el.URL) || !strings.Contains(el.Message, "saas") {
		t.Fatalf("elicitation: %+v", el)
	}
	return el.ElicitationID, el.URL
}

// consent opens link in b, checks that the page names the principal,
// confirms, signs in at the IdP as login, and returns the last page (the
// gateway's callback).
func (e *oauthEnv) consent(t *testing.T, b *testkit.Browser, link, subject, tenant, login string) *testkit.Page {
	t.Helper()
	page := b.Get(t, link)
	if page.Status != http.StatusOK || !strings.Contains(page.Body, `<strong id="subject">`+subject+`</strong>`) ||
		!strings.Contains(page.Body, `<strong id="tenant">`+tenant+`</strong>`) || !strings.Contains(page.Body, "saas") {
		t.Fatalf("consent page (%d):\n%s", page.Status, page.Body)
	}
	page = b.Submit(t, page, "/oauth/consent", nil)
	return e.idp.SignIn(t, b, page, login)
}

func linked(t *testing.T, page *testkit.Page) {
	t.Helper()
	if page.Status != http.StatusOK || !strings.Contains(page.Body, "Linked") {
		t.Fatalf("callback page %s (%d):\n%s", page.URL, page.Status, page.Body)
	}
}

// TestUserOAuth: the first call asks for consent (URL elicitation for a
// client that declared it, an isError link for one that did not); the
// user consents through the gateway's page and the IdP's; the retried call
// reaches the upstream as that user, and never as another.
func TestUserOAuth(t *testing.T) {
	e := startOAuthEnv(t, 0, nil)
	alice, aliceDone := e.connect(t, "alice", true)
	bob, _ := e.connect(t, "bob", false)

	id, link := elicitation(t, alice)
	bobLink := linkFromResult(t, bob)
	// Users who have yet to link say nothing of the upstream's health.
	rec := httptest.NewRecorder()
	e.g.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("readyz with only unlinked users: %d %s", rec.Code, rec.Body)
	}
	if bobLink == link {
		t.Fatal("two users got one link")
	}

	b := testkit.NewBrowser(t)
	page := e.consent(t, b, link, "alice", "acme", "alice-at-saas")
	linked(t, page)
	select {
	case got := <-aliceDone:
		if got != id {
			t.Fatalf("elicitation complete for %q, want %q", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/elicitation/complete")
	}
	if w := whoami(t, alice, "saas__whoami"); w.Subject != "alice-at-saas" {
		t.Fatalf("alice reached the upstream as %q", w.Subject)
	}

	// Bob has no token yet: his own link, never alice's token.
	if l := linkFromResult(t, bob); l == bobLink {
		t.Fatal("a new call gave the same link")
	}
	// The state replayed (the callback URL again), from the same browser
	// or another: refused. The link, used once: refused.
	if p := b.Get(t, page.URL.String()); p.Status != http.StatusNotFound {
		t.Fatalf("replayed callback: %d %s", p.Status, p.Body)
	}
	if p := testkit.NewBrowser(t).Get(t, page.URL.String()); p.Status != http.StatusNotFound {
		t.Fatalf("replayed callback, other browser: %d", p.Status)
	}
	if p := b.Get(t, link); p.Status != http.StatusNotFound {
		t.Fatalf("used link: %d", p.Status)
	}

	// Bob links his own account, in his own browser.
	linked(t, e.consent(t, testkit.NewBrowser(t), bobLink, "bob", "acme", "bob-at-saas"))
	if w := whoami(t, bob, "saas__whoami"); w.Subject != "bob-at-saas" {
		t.Fatalf("bob reached the upstream as %q", w.Subject)
	}
	if w := whoami(t, alice, "saas__whoami"); w.Subject != "alice-at-saas" {
		t.Fatalf("alice, after bob linked, reached the upstream as %q", w.Subject)
	}
	// Carol, of another tenant, gets neither's.
	carol, _ := e.connect(t, "carol", false)
	linkFromResult(t, carol)

	infos, err := gateway.VaultOf(e.g).List(context.Background(), vault.Filter{})
	if err != nil || len(infos) != 2 {
		t.Fatalf("vault: %+v %v", infos, err)
	}
	// Two codes redeemed, counted.
	rec = httptest.NewRecorder()
	e.g.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if want := `mcpgw_upstream_token_fetches_total{mode="user_oauth",outcome="ok",upstream="saas"} 2`; !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("metrics lack %s", want)
	}
	// explain names the mode, never a token or secret.
	tok, _ := gateway.VaultOf(e.g).Token(context.Background(), e.key("alice", "acme"))
	cfg := *e.cfg
	cfg.ApplyDefaults()
	var out strings.Builder
	if err := explain.Explain(context.Background(), &cfg, "acme", &out, explain.Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "user_oauth") || strings.Contains(out.String(), tok.AccessToken[:16]) || strings.Contains(out.String(), gwSecret) {
		t.Fatalf("explain:\n%s", out.String())
	}
}

// TestUserOAuthStateBound: a state answered in another browser than the
// one that confirmed is refused (and used up); a confirmation without the
// page's CSRF cookie is refused; an expired link is refused.
func TestUserOAuthStateBound(t *testing.T) {
	e := startOAuthEnv(t, 0, func(c *config.Config) { c.Vault.ConsentTTL = config.Duration(2 * time.Second) })
	bob, _ := e.connect(t, "bob", false)

	// A cross-site POST: the form without the page's cookie.
	link := linkFromResult(t, bob)
	attacker := testkit.NewBrowser(t)
	page := attacker.Get(t, link)
	to, form := page.Form(t, "/oauth/consent")
	if p := testkit.NewBrowser(t).Post(t, to, form); p.Status != http.StatusForbidden {
		t.Fatalf("confirmation without the cookie: %d", p.Status)
	}
	// Someone confirms and signs in, but the answer is sent to another
	// browser (say, bob's, lured to it): refused.
	page = attacker.Submit(t, page, "/oauth/consent", nil)
	attacker.Client.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.Contains(req.URL.Path, "/oauth/callback") {
			return http.ErrUseLastResponse
		}
		return nil
	}
	page = e.idp.SignIn(t, attacker, page, "mallory-at-saas")
	if page.Status != http.StatusSeeOther && page.Status != http.StatusFound {
		t.Fatalf("want the IdP's redirect to the callback, got %d %s", page.Status, page.Body)
	}
	cb := page.Header.Get("Location")
	if !strings.HasPrefix(cb, e.origin+"/oauth/callback?") {
		t.Fatalf("redirect to %q", cb)
	}
	if p := testkit.NewBrowser(t).Get(t, cb); p.Status != http.StatusForbidden {
		t.Fatalf("callback in another browser: %d %s", p.Status, p.Body)
	}
	if p := attacker.Get(t, cb); p.Status != http.StatusNotFound {
		t.Fatalf("the state after a refused try: %d", p.Status)
	}
	if l := linkFromResult(t, bob); l == "" {
		t.Fatal("bob got linked")
	}

	// Expired: the page is served, then, once the link's ConsentTTL has
	// passed, refused (a GET of the page uses nothing up).
	link = linkFromResult(t, bob)
	if p := testkit.NewBrowser(t).Get(t, link); p.Status != http.StatusOK {
		t.Fatalf("fresh link: %d", p.Status)
	}
	var status int
	testkit.Eventually(t, 10*time.Second, func() bool {
		status = testkit.NewBrowser(t).Get(t, link).Status
		return status != http.StatusOK
	}, "the link is still served")
	if status != http.StatusNotFound {
		t.Fatalf("expired link: %d", status)
	}
}

// link gives user (tenant) an account login at saas, through the consent
// flow, from a call of a client without URL elicitation.
func (e *oauthEnv) link(t *testing.T, cs *mcp.ClientSession, user, tenant, login string) {
	t.Helper()
	linked(t, e.consent(t, testkit.NewBrowser(t), linkFromResult(t, cs), user, tenant, login))
}

func (e *oauthEnv) key(user, tenant string) vault.Key {
	return vault.Key{Principal: vault.Principal{Issuer: e.idp.Issuer, Subject: user, Tenant: tenant}, Upstream: "saas"}
}

// TestUserOAuthRefresh: a token is refreshed with its refresh token before
// it expires; once the refresh fails (the grant revoked at the IdP), the
// token is dropped and the next call asks for consent again.
func TestUserOAuthRefresh(t *testing.T) {
	e := startOAuthEnv(t, 2*time.Second, nil)
	alice, _ := e.connect(t, "alice", false)
	e.link(t, alice, "alice", "acme", "alice-at-saas")
	if w := whoami(t, alice, "saas__whoami"); w.Subject != "alice-at-saas" {
		t.Fatalf("as %q", w.Subject)
	}
	// Called until the token (2s) is refreshed, as the user it is for.
	var c testkit.IDPCounts
	testkit.Eventually(t, 10*time.Second, func() bool {
		if w := whoami(t, alice, "saas__whoami"); w.Subject != "alice-at-saas" {
			t.Fatalf("as %q", w.Subject)
		}
		c = e.idp.Counts(t)
		return c.RefreshToken[gwClient] >= 1
	}, "the token was not refreshed")
	if w := whoami(t, alice, "saas__whoami"); w.Subject != "alice-at-saas" {
		t.Fatalf("after the refresh, as %q", w.Subject)
	}
	if c.AuthorizationCode[gwClient] != 1 {
		t.Fatalf("counts: %+v", c)
	}
	// The upstream refuses the token (401): refreshed, and the call sent
	// once more.
	refreshed := c.RefreshToken[gwClient]
	e.up.FailNext(1)
	if w := whoami(t, alice, "saas__whoami"); w.Subject != "alice-at-saas" {
		t.Fatalf("after a 401, as %q", w.Subject)
	}
	if c := e.idp.Counts(t); c.RefreshToken[gwClient] != refreshed+1 {
		t.Fatalf("refreshes after a 401: %d, want %d", c.RefreshToken[gwClient], refreshed+1)
	}

	// The grant revoked at the IdP behind the gateway's back.
	tok, err := gateway.VaultOf(e.g).Token(context.Background(), e.key("alice", "acme"))
	if err != nil || tok == nil || tok.RefreshToken == "" {
		t.Fatalf("vault: %v %v", tok, err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.idp.Issuer+"/token/revocation",
		strings.NewReader("token="+tok.RefreshToken+"&token_type_hint=refresh_token"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(gwClient, gwSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("revocation: %v %v", resp, err)
	}
	resp.Body.Close()
	// Called until the token expires and its refresh is refused: then the
	// call asks for consent again.
	testkit.Eventually(t, 10*time.Second, func() bool {
		res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "saas__whoami"})
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		return res.IsError
	}, "the token outlived its revoked grant")
	linkFromResult(t, alice)
	// Never a token in the log, whatever happened.
	if logs := e.logs.String(); strings.Contains(logs, tok.RefreshToken) || strings.Contains(logs, tok.AccessToken) || strings.Contains(logs, "eyJ") {
		t.Fatalf("a token in the log:\n%s", logs)
	}
	if !strings.Contains(e.logs.String(), "refresh refused") {
		t.Fatalf("the refused refresh is not logged:\n%s", e.logs.String())
	}
	if tok, _ := gateway.VaultOf(e.g).Token(context.Background(), e.key("alice", "acme")); tok != nil {
		t.Fatal("a token whose refresh failed is kept")
	}
}

// TestUserOAuthUnlink: a user lists and unlinks their own account at
// /oauth/tokens (revoked at the IdP, RFC 7009); the next call asks for
// consent again. Another user's request cannot see or unlink it.
func TestUserOAuthUnlink(t *testing.T) {
	e := startOAuthEnv(t, 0, nil)
	alice, _ := e.connect(t, "alice", false)
	e.link(t, alice, "alice", "acme", "alice-at-saas")
	do := func(user, method, path string) (int, string) {
		req, _ := http.NewRequest(method, e.origin+path, nil)
		req.Header.Set("Authorization", "Bearer "+e.token(t, user))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}
	if st, body := do("alice", http.MethodGet, "/oauth/tokens"); st != 200 || !strings.Contains(body, `"upstream":"saas"`) || strings.Contains(body, "ey") {
		t.Fatalf("list: %d %s", st, body)
	}
	if st, body := do("bob", http.MethodGet, "/oauth/tokens"); st != 200 || strings.Contains(body, "saas") {
		t.Fatalf("bob's list: %d %s", st, body)
	}
	if st, _ := do("bob", http.MethodDelete, "/oauth/tokens/saas"); st != http.StatusNotFound {
		t.Fatalf("bob unlinks alice's: %d", st)
	}
	if st, _ := (func() (int, string) {
		req, _ := http.NewRequest(http.MethodGet, e.origin+"/oauth/tokens", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, ""
	})(); st != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", st)
	}
	if st, _ := do("alice", http.MethodDelete, "/oauth/tokens/saas"); st != http.StatusNoContent {
		t.Fatalf("unlink: %d", st)
	}
	if c := e.idp.Counts(t); c.Revocation[gwClient] != 1 {
		t.Fatalf("revocations at the IdP: %+v", c.Revocation)
	}
	if st, _ := do("alice", http.MethodDelete, "/oauth/tokens/saas"); st != http.StatusNotFound {
		t.Fatalf("unlink twice: %d", st)
	}
	linkFromResult(t, alice)
}

// TestUserOAuthBounds tries to exhaust each bound: the pending consents of
// one principal (the oldest goes) and in all (the heaviest tenant's
// oldest goes), the tokens of a tenant (refused at the callback), and the
// sizes of the consent page's and the callback's requests.
func TestUserOAuthBounds(t *testing.T) {
	e := startOAuthEnv(t, 0, func(c *config.Config) {
		c.Vault.PendingPerPrincipal, c.Vault.Pending, c.Vault.PendingPerTenant, c.Vault.TokensPerTenant = 2, 3, 3, 1
	})
	alice, _ := e.connect(t, "alice", false)
	bob, _ := e.connect(t, "bob", false)
	carol, _ := e.connect(t, "carol", false)
	l1, l2, l3 := linkFromResult(t, alice), linkFromResult(t, alice), linkFromResult(t, alice)
	b := testkit.NewBrowser(t)
	if p := b.Get(t, l1); p.Status != http.StatusNotFound {
		t.Fatalf("alice's oldest of 3 links (2 per principal): %d", p.Status)
	}
	if p := b.Get(t, l2); p.Status != http.StatusOK {
		t.Fatalf("alice's second: %d", p.Status)
	}
	bobLink := linkFromResult(t, bob)
	// The store is full (3, all acme's): carol, of globex, is not
	// refused; acme, the heaviest tenant, loses its oldest (alice's l2).
	carolLink := linkFromResult(t, carol)
	if p := b.Get(t, l2); p.Status != http.StatusNotFound {
		t.Fatalf("acme's oldest after a newcomer of another tenant filled the store: %d", p.Status)
	}
	if p := testkit.NewBrowser(t).Get(t, carolLink); p.Status != http.StatusOK {
		t.Fatalf("carol's link: %d", p.Status)
	}
	linked(t, e.consent(t, testkit.NewBrowser(t), l3, "alice", "acme", "alice-at-saas"))
	p := e.consent(t, testkit.NewBrowser(t), bobLink, "bob", "acme", "bob-at-saas")
	if p.Status != http.StatusInsufficientStorage {
		t.Fatalf("a 2nd token of a tenant of 1: %d %s", p.Status, p.Body)
	}
	// Carol, of another tenant, links.
	linked(t, e.consent(t, testkit.NewBrowser(t), carolLink, "carol", "globex", "carol-at-saas"))

	big := strings.Repeat("a", 5000)
	if p := b.Get(t, e.origin+"/oauth/consent?id="+big); p.Status != http.StatusRequestURITooLong {
		t.Fatalf("long consent query: %d", p.Status)
	}
	if p := b.Get(t, e.origin+"/oauth/callback?state="+big); p.Status != http.StatusRequestURITooLong {
		t.Fatalf("long callback query: %d", p.Status)
	}
	if p := b.Post(t, e.origin+"/oauth/consent", url.Values{"id": {big}}); p.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("large consent form: %d", p.Status)
	}
}

// runReplica runs a gateway for cfg (defaults applied here) on a new
// listener and returns it, its base URL and its stop.
func runReplica(t *testing.T, cfg config.Config) (*gateway.Gateway, string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(&cfg, gateway.Options{Logger: testLogger(t), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(g.Handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.CloseClientConnections()
			srv.Close()
			g.Close()
		})
	}
	t.Cleanup(stop)
	return g, "http://" + ln.Addr().String(), stop
}

// TestUserOAuthReplicas: two replicas on one Redis behind a round-robin
// load balancer (no affinity): the consent's page, confirmation and
// callback land on either, and the calls on both reach the upstream as
// the user. The tokens in Redis are unreadable without the vault key,
// and survive a restart of every replica.
func TestUserOAuthReplicas(t *testing.T) {
	lb := testkit.StartLB(t, nil)
	idp := testkit.StartIDP(t, oauthClients(lb.URL, 0))
	up := testkit.NewAuthUpstream(t, testkit.AuthUpstreamOptions{Name: "saas", JWKSURL: idp.JWKSURL, Issuer: idp.Issuer})
	var cfg config.Config
	cfg.Server.PublicURL = lb.URL + "/mcp"
	cfg.Server.DrainDelay = ptr(config.Duration(0))
	cfg.Auth = config.Auth{Issuers: []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}}}
	cfg.Tenants = []config.Tenant{{ID: "acme"}}
	// No issuer: found from the upstream's protected resource metadata
	// (RFC 9728); listed, for it is plain http on another origin.
	cfg.Upstreams = []config.Upstream{{Name: "saas", URL: up.URL, Prefix: ptr("saas"), Watch: ptr(false), Auth: &config.UpstreamAuth{
		Mode: config.AuthUserOAuth, ClientID: gwClient, ClientSecret: gwSecret, Scopes: []string{"mcp"},
	}}}
	cfg.Vault.DiscoveredIssuers = []string{idp.Issuer}
	key := vaultKey()
	cfg.Vault.Keys = []config.VaultKey{{ID: "k1", Secret: key}}
	redisStore(t)(&cfg)
	gA, a, stopA := runReplica(t, cfg)
	_, b, stopB := runReplica(t, cfg)
	lb.SetBackends(t, []string{a, b})

	e := &oauthEnv{idp: idp, up: up, url: lb.URL + "/mcp", origin: lb.URL}
	alice, aliceDone := e.connect(t, "alice", true)
	id, link := elicitation(t, alice)
	// The consent goes to the replica that does not hold alice's GET
	// stream: the notification that it is done crosses to the other.
	stream := -1
	lb.WaitLog(t, 5*time.Second, func(log []testkit.LBRequest) bool {
		for _, r := range log {
			if r.Method == http.MethodGet && r.Path == "/mcp" {
				stream = r.Backend
			}
		}
		return stream >= 0
	})
	lb.SetBackends(t, []string{[]string{a, b}[1-stream]})
	linked(t, e.consent(t, testkit.NewBrowser(t), link, "alice", "acme", "alice-at-saas"))
	select {
	case got := <-aliceDone:
		if got != id {
			t.Fatalf("elicitation complete for %q, want %q", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/elicitation/complete across replicas")
	}
	lb.SetBackends(t, []string{a, b})
	for range 4 { // on both replicas
		if w := whoami(t, alice, "saas__whoami"); w.Subject != "alice-at-saas" {
			t.Fatalf("as %q", w.Subject)
		}
	}

	// In Redis: no token, and nothing that decrypts without the key.
	tok, err := gateway.VaultOf(gA).Token(context.Background(), e.key("alice", "acme"))
	if err != nil || tok == nil {
		t.Fatalf("vault: %v", err)
	}
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rc.Close()
	keys, err := rc.Keys(context.Background(), cfg.Sessions.Redis.KeyPrefix+"vault:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("vault keys in Redis: %v %v", keys, err)
	}
	for _, k := range keys {
		if typ, _ := rc.Type(context.Background(), k).Result(); typ != "string" {
			continue
		}
		v, _ := rc.Get(context.Background(), k).Result()
		if strings.Contains(v, tok.AccessToken) || strings.Contains(v, tok.RefreshToken) || strings.Contains(v, tok.AccessToken[:20]) {
			t.Fatalf("a token in clear in Redis at %s", k)
		}
	}
	other, _ := vault.NewCipher([]vault.KeyMaterial{{ID: "k1", Secret: make([]byte, 32)}})
	stranger := vault.New(vault.NewRedis(rc, cfg.Sessions.Redis.KeyPrefix, time.Second, vault.Limits{}), other)
	if got, _ := stranger.Token(context.Background(), e.key("alice", "acme")); got != nil {
		t.Fatal("read with another key")
	}

	// Every replica restarts; the token is still there. The new key goes
	// first (rotation): the old one still decrypts.
	stopA()
	stopB()
	cfg.Vault.Keys = []config.VaultKey{{ID: "k2", Secret: vaultKey()}, {ID: "k1", Secret: key}}
	_, a, _ = runReplica(t, cfg)
	_, b, _ = runReplica(t, cfg)
	lb.SetBackends(t, []string{a, b})
	again, _ := e.connect(t, "alice", false)
	for range 2 {
		if w := whoami(t, again, "saas__whoami"); w.Subject != "alice-at-saas" {
			t.Fatalf("after the restart, as %q", w.Subject)
		}
	}
}

// TestUserOAuth2026: a 2026-07-28 client that declared URL-mode
// elicitation gets an input_required result with a URL-mode
// elicitation/create; its retry, once the user consented, succeeds. A
// non-tool method of a client without the capability gets a JSON-RPC
// error naming the link.
func TestUserOAuth2026(t *testing.T) {
	e := startOAuthEnv(t, 0, nil)
	tok := e.token(t, "alice")
	call := func(extra string) string {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"},` +
			`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}`
		req := post(t, e.url, "", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{`+meta+`,"name":"saas__whoami","arguments":{}`+extra+`}}`)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "saas__whoami")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, body := do(t, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		return body
	}
	body := call("")
	if !strings.Contains(body, `"resultType":"input_required"`) || !strings.Contains(body, `"mode":"url"`) || !strings.Contains(body, `"elicitation/create"`) {
		t.Fatalf("first call: %s", body)
	}
	link := linkRE.FindString(body)
	linked(t, e.consent(t, testkit.NewBrowser(t), link, "alice", "acme", "alice-at-saas"))
	body = call(`,"inputResponses":{"consent-saas":{"action":"accept"}}`)
	if !strings.Contains(body, `alice-at-saas`) {
		t.Fatalf("retry: %s", body)
	}

	bob, _ := e.connect(t, "bob", false)
	_, err := bob.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "saas__any"})
	if err == nil || !linkRE.MatchString(err.Error()) {
		t.Fatalf("prompts/get without the capability: %v", err)
	}
}

// TestUserOAuthLogin: with vault.login, whoever opens a consent link signs
// in at the gateway's own issuer first, and the link is honoured only for
// the principal it was made for: another user who opens it (phishing, or
// a mistake) links nothing.
func TestUserOAuthLogin(t *testing.T) {
	e := startOAuthEnv(t, 0, func(c *config.Config) {
		c.Vault.Login = &config.VaultLogin{Issuer: c.Auth.Issuers[0].IssuerURL, ClientID: "gateway-login", ClientSecret: "login-secret", Scopes: []string{"mcp"}}
	})
	alice, _ := e.connect(t, "alice", false)

	// Bob opens alice's link, confirms, signs in as himself: refused.
	link := linkFromResult(t, alice)
	bobs := testkit.NewBrowser(t)
	page := bobs.Submit(t, bobs.Get(t, link), "/oauth/consent", nil)
	page = e.idp.SignIn(t, bobs, page, "bob")
	if page.Status != http.StatusForbidden || !strings.Contains(page.Body, "made for someone else") {
		t.Fatalf("bob with alice's link: %d %s", page.Status, page.Body)
	}
	if p := bobs.Get(t, link); p.Status != http.StatusNotFound {
		t.Fatalf("the link after: %d", p.Status)
	}
	linkFromResult(t, alice)
	if c := e.idp.Counts(t); c.AuthorizationCode[gwClient] != 0 {
		t.Fatalf("the upstream's authorization went on: %+v", c.AuthorizationCode)
	}

	// Alice opens her own: signed in as alice, on to the upstream.
	page = e.consent(t, testkit.NewBrowser(t), linkFromResult(t, alice), "alice", "acme", "alice")
	linked(t, page)
	if w := whoami(t, alice, "saas__whoami"); w.Subject != "alice" {
		t.Fatalf("as %q", w.Subject)
	}
}
