package console_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/gateway/internal/console"
)

// Unlink makes fake a Source: it holds no link, and unlinks nothing.
func (fake) Unlink(context.Context, string, console.VaultUser) (bool, error) {
	return false, errors.New("the fixed source holds no link")
}

// unlinkCall is one call of vaultFake.Unlink.
type unlinkCall struct {
	Operator string
	User     console.VaultUser
}

// vaultFake is a fake whose vault holds linked users, and records the
// unlinks asked of it.
type vaultFake struct {
	fake
	users []console.VaultUser // of upstream github
	err   error               // what Unlink fails with

	mu    sync.Mutex
	calls []unlinkCall
}

func (f *vaultFake) Vault(context.Context) console.Vault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return console.Vault{Enabled: true, Upstreams: []console.VaultUpstream{
		{Upstream: "github", Users: len(f.users), Linked: append([]console.VaultUser(nil), f.users...)},
		{Upstream: "jira"},
	}}
}

func (f *vaultFake) Unlink(_ context.Context, operator string, u console.VaultUser) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, unlinkCall{operator, u})
	if f.err != nil {
		return false, f.err
	}
	for i, v := range f.users {
		if v == u {
			f.users = append(f.users[:i], f.users[i+1:]...)
			return true, nil
		}
	}
	return false, nil
}

func (f *vaultFake) unlinks() []unlinkCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]unlinkCall(nil), f.calls...)
}

var alice = console.VaultUser{Upstream: "github", Issuer: "https://idp.example", Tenant: "acme", Subject: "alice"}

func newVaultFake() *vaultFake {
	return &vaultFake{users: []console.VaultUser{alice, {Upstream: "github", Issuer: "https://idp.example", Tenant: "beta", Subject: "bob"}}}
}

// postUnlink posts the unlink form of u, as arriving on loopback, with
// the headers of hdr.
func postUnlink(h http.Handler, u console.VaultUser, hdr http.Header) *httptest.ResponseRecorder {
	form := url.Values{"upstream": {u.Upstream}, "issuer": {u.Issuer}, "tenant": {u.Tenant}, "subject": {u.Subject}}
	req := httptest.NewRequest(http.MethodPost, "http://localhost/console/vault/unlink", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header[k] = v
	}
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9090}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

var sameSite = http.Header{"Sec-Fetch-Site": {"same-origin"}, "Origin": {"http://localhost"}}

// TestVaultUnlinkOff: without admin.console.vault_unlink the vault page
// shows counts and no user, and an unlink is refused.
func TestVaultUnlinkOff(t *testing.T) {
	src := newVaultFake()
	h := console.New(console.Options{Source: src, Access: func() console.Access { return console.Access{Loopback: true} }})
	body := get(h, "/console/vault", nil).Body.String()
	if !strings.Contains(body, "github") || !strings.Contains(body, "<td>2</td>") {
		t.Errorf("the page lacks the counts:\n%s", body)
	}
	for _, s := range []string{"alice", "bob", "/console/vault/unlink", "Unlink"} {
		if strings.Contains(body, s) {
			t.Errorf("the page shows %q with unlinking off", s)
		}
	}
	if rec := postUnlink(h, alice, sameSite); rec.Code != http.StatusForbidden {
		t.Errorf("unlink with unlinking off: %d, want 403", rec.Code)
	}
	if c := src.unlinks(); len(c) != 0 {
		t.Errorf("the source was asked to unlink: %v", c)
	}
}

// TestVaultUnlink: with admin.console.vault_unlink the page lists each
// upstream's users with an Unlink form; a same-origin post unlinks the
// user it names, as the operator "console", and sends the reader back to
// the page with the result; a cross-origin or incomplete post unlinks
// nothing.
func TestVaultUnlink(t *testing.T) {
	src := newVaultFake()
	h := console.New(console.Options{Source: src, Access: func() console.Access { return console.Access{Loopback: true, VaultUnlink: true} }})
	body := get(h, "/console/vault", nil).Body.String()
	for _, s := range []string{"alice", "bob", "acme", `action="/console/vault/unlink"`, `name="subject" value="alice"`, `name="issuer" value="https://idp.example"`, "No linked users."} {
		if !strings.Contains(body, s) {
			t.Errorf("the page lacks %q:\n%s", s, body)
		}
	}
	if n := strings.Count(body, `type="hidden"`); n != 2*4 {
		t.Errorf("%d hidden fields, want 4 per user: upstream, issuer, tenant and subject only", n)
	}

	for name, hdr := range map[string]http.Header{
		"cross-site":     {"Sec-Fetch-Site": {"cross-site"}},
		"same-site":      {"Sec-Fetch-Site": {"same-site"}},
		"foreign origin": {"Origin": {"https://evil.example"}},
	} {
		if rec := postUnlink(h, alice, hdr); rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, rec.Code)
		}
	}
	for _, u := range []console.VaultUser{
		{Upstream: "github", Tenant: "acme"},
		{Tenant: "acme", Subject: "alice"},
		{Upstream: "github", Subject: "alice"},
		{Upstream: "github", Tenant: "acme", Subject: strings.Repeat("x", 2000)},
	} {
		if rec := postUnlink(h, u, sameSite); rec.Code != http.StatusBadRequest {
			t.Errorf("%+v: %d, want 400", u, rec.Code)
		}
	}
	if c := src.unlinks(); len(c) != 0 {
		t.Fatalf("a refused post unlinked: %v", c)
	}

	rec := postUnlink(h, alice, sameSite)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/console/vault?unlinked=done" {
		t.Fatalf("unlink: %d to %q\n%s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	if diff := cmp.Diff([]unlinkCall{{"console", alice}}, src.unlinks()); diff != "" {
		t.Errorf("unlinks mismatch (-want +got):\n%s", diff)
	}
	body = get(h, rec.Header().Get("Location"), nil).Body.String()
	if !strings.Contains(body, "Unlinked:") || strings.Contains(body, `value="alice"`) || !strings.Contains(body, `value="bob"`) {
		t.Errorf("after the unlink:\n%s", body)
	}

	// Again: nothing left to unlink. A vault that fails: the page says so.
	if rec := postUnlink(h, alice, sameSite); rec.Header().Get("Location") != "/console/vault?unlinked=none" {
		t.Errorf("a second unlink: to %q", rec.Header().Get("Location"))
	}
	src.err = errors.New("redis: connection refused")
	if rec := postUnlink(h, alice, sameSite); rec.Header().Get("Location") != "/console/vault?unlinked=error" {
		t.Errorf("a failed unlink: to %q", rec.Header().Get("Location"))
	}
	if body := get(h, "/console/vault?unlinked=<b>pwned</b>", nil).Body.String(); strings.Contains(body, "pwned") {
		t.Error("the page shows the result parameter as given")
	}
}

// TestVaultUnlinkBounded: the page lists at most VaultUsersMax users per
// upstream, and says how many more there are.
func TestVaultUnlinkBounded(t *testing.T) {
	src := &vaultFake{}
	for i := range console.VaultUsersMax + 7 {
		src.users = append(src.users, console.VaultUser{Upstream: "github", Tenant: "acme", Subject: fmt.Sprintf("user-%03d", i)})
	}
	h := console.New(console.Options{Source: src, Access: func() console.Access { return console.Access{Loopback: true, VaultUnlink: true} }})
	body := get(h, "/console/vault", nil).Body.String()
	if n := strings.Count(body, `action="/console/vault/unlink"`); n != console.VaultUsersMax {
		t.Errorf("%d unlink forms, want %d", n, console.VaultUsersMax)
	}
	if !strings.Contains(body, "7 more not shown") {
		t.Error("the page does not say how many more users there are")
	}
}

// TestVaultUnlinkOIDC: the operator of an unlink is the subject signed in
// with OpenID Connect; a post without a session unlinks nothing.
func TestVaultUnlinkOIDC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newOIDCEnv(t, nil)
		src := newVaultFake()
		e.h = console.New(console.Options{
			Source: src, Access: func() console.Access { return console.Access{OIDC: e.cfg, VaultUnlink: true} },
			Logger: slog.New(slog.NewTextHandler(e.logs, nil)), HTTPClient: &http.Client{Transport: e.idp},
		})
		sess := cookie(e.signIn(t, "/console/vault", "alice", nil), console.CookieName)
		if sess == nil {
			t.Fatal("no session")
		}
		form := url.Values{"upstream": {"github"}, "issuer": {alice.Issuer}, "tenant": {"beta"}, "subject": {"bob"}}.Encode()
		post := func(cookies ...*http.Cookie) *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, adminOrigin+"/console/vault/unlink", strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			for _, c := range cookies {
				req.AddCookie(c)
			}
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			return rec
		}
		if rec := post(); rec.Code != http.StatusUnauthorized {
			t.Errorf("without a session: %d, want 401", rec.Code)
		}
		if rec := post(sess); rec.Code != http.StatusSeeOther {
			t.Fatalf("with a session: %d\n%s", rec.Code, rec.Body)
		}
		want := []unlinkCall{{"alice", console.VaultUser{Upstream: "github", Issuer: alice.Issuer, Tenant: "beta", Subject: "bob"}}}
		if diff := cmp.Diff(want, src.unlinks()); diff != "" {
			t.Errorf("unlinks mismatch (-want +got):\n%s", diff)
		}
	})
}
