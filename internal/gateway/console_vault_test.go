package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
	"github.com/mcpgw/gateway/internal/vault"
)

// TestConsoleVaultUnlink: a gateway whose vault holds two users linked to
// a user_oauth upstream. With admin.console.vault_unlink off the vault
// page shows the count and no user, and an unlink is refused; once a
// reload turns it on, the page lists both users (never a token), and an
// unlink deletes that user's token and that one only, with one audit
// record naming the operator.
func TestConsoleVaultUnlink(t *testing.T) {
	const bearer = "console-bearer-0123456789abcdef0123"
	const aliceToken, bobToken = "at-alice-secret-value", "at-bob-secret-value"
	cfg := &config.Config{}
	cfg.Auth.Anonymous = true
	cfg.Upstreams = []config.Upstream{{Name: "saas", URL: "http://127.0.0.1:1/mcp", Watch: ptr(false), Auth: &config.UpstreamAuth{
		Mode: config.AuthUserOAuth, Issuer: "https://as.example", ClientID: "gateway", ClientSecret: "gateway-secret",
	}}}
	cfg.Vault.Keys = []config.VaultKey{{ID: "k1", Secret: vaultKey()}}
	cfg.Admin.Console.Auth = &config.ConsoleAuth{Bearer: bearer}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var auditLog, logs testkit.SyncBuffer
	g, err := gateway.New(cfg, gateway.Options{Audit: audit.New(&auditLog), Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	admin := httptest.NewServer(g.AdminHandler())
	t.Cleanup(admin.Close)

	ctx := context.Background()
	v := gateway.VaultOf(g)
	key := func(sub string) vault.Key {
		return vault.Key{Principal: vault.Principal{Issuer: "https://idp.example", Subject: sub, Tenant: "default"}, Upstream: "saas"}
	}
	// Tokens without an issuer: the unlink deletes them without a
	// revocation request anywhere.
	for sub, tok := range map[string]string{"alice": aliceToken, "bob": bobToken} {
		if err := v.Save(ctx, key(sub), &vault.Token{AccessToken: tok, RefreshToken: "rt-" + tok}); err != nil {
			t.Fatal(err)
		}
	}

	do := func(method, path string, form url.Values, hdr http.Header) (int, string, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, admin.URL+path, body)
		req.Header.Set("Authorization", "Bearer "+bearer)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, vs := range hdr {
			req.Header[k] = vs
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}
	noToken := func(where, s string) {
		t.Helper()
		for _, tok := range []string{aliceToken, bobToken, "gateway-secret", bearer} {
			if strings.Contains(s, tok) {
				t.Errorf("%s holds a secret %.8s…", where, tok)
			}
		}
	}
	unlinkAlice := url.Values{"upstream": {"saas"}, "issuer": {"https://idp.example"}, "tenant": {"default"}, "subject": {"alice"}}

	// Off.
	st, _, page := do(http.MethodGet, "/console/vault", nil, nil)
	if st != http.StatusOK || !strings.Contains(page, "<td>saas</td><td>2</td>") || strings.Contains(page, "alice") {
		t.Fatalf("vault page, unlinking off: %d\n%s", st, page)
	}
	if st, _, _ := do(http.MethodPost, "/console/vault/unlink", unlinkAlice, nil); st != http.StatusForbidden {
		t.Fatalf("unlink, unlinking off: %d, want 403", st)
	}

	// On.
	on := *cfg
	on.Admin.Console.VaultUnlink = true
	if err := g.Reload(&on); err != nil {
		t.Fatal(err)
	}
	st, _, page = do(http.MethodGet, "/console/vault", nil, nil)
	if st != http.StatusOK || !strings.Contains(page, `value="alice"`) || !strings.Contains(page, `value="bob"`) {
		t.Fatalf("vault page, unlinking on: %d\n%s", st, page)
	}
	noToken("the vault page", page)
	if st, _, _ := do(http.MethodPost, "/console/vault/unlink", unlinkAlice, http.Header{"Origin": {"https://evil.example"}}); st != http.StatusForbidden {
		t.Fatalf("a cross-origin unlink: %d, want 403", st)
	}
	if tok, err := v.Token(ctx, key("alice")); err != nil || tok == nil {
		t.Fatalf("alice's token after the refused unlinks: %v, %v", tok, err)
	}
	st, loc, _ := do(http.MethodPost, "/console/vault/unlink", unlinkAlice, http.Header{"Sec-Fetch-Site": {"same-origin"}})
	if st != http.StatusSeeOther || loc != "/console/vault?unlinked=done" {
		t.Fatalf("unlink: %d to %q", st, loc)
	}
	if tok, err := v.Token(ctx, key("alice")); err != nil || tok != nil {
		t.Fatalf("alice's token after the unlink: %v, %v", tok, err)
	}
	if tok, err := v.Token(ctx, key("bob")); err != nil || tok == nil {
		t.Fatalf("bob's token after alice's unlink: %v, %v", tok, err)
	}
	_, _, page = do(http.MethodGet, loc, nil, nil)
	if !strings.Contains(page, "Unlinked:") || !strings.Contains(page, "<td>saas</td><td>1</td>") || strings.Contains(page, `value="alice"`) {
		t.Errorf("the vault page after the unlink:\n%s", page)
	}

	var recs []map[string]any
	for line := range strings.Lines(auditLog.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if r["event"] == audit.EventVaultUnlink {
			recs = append(recs, r)
		}
	}
	if len(recs) != 1 {
		t.Fatalf("%d vault_unlink records, want 1:\n%s", len(recs), auditLog.String())
	}
	for k, want := range map[string]string{"operator": "console", "tenant": "default", "subject": "alice", "upstream": "saas", "outcome": audit.OutcomeOK} {
		if recs[0][k] != want {
			t.Errorf("audit record %s = %v, want %q", k, recs[0][k], want)
		}
	}
	noToken("the audit log", auditLog.String())
	noToken("the log", logs.String())
	// The console's audit page shows it too.
	if _, _, page := do(http.MethodGet, "/console/audit", nil, nil); !strings.Contains(page, audit.EventVaultUnlink) {
		t.Error("the console's audit page lacks the unlink")
	}
}
