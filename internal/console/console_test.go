package console_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/console"
	"github.com/mcpgw/gateway/internal/explain"
)

const bearer = "0123456789abcdef0123456789abcdef"

// fake is a Source of fixed values.
type fake struct{}

func (fake) Overview(context.Context) console.Overview {
	return console.Overview{
		Version: "v9.9.9", Started: time.Now().Add(-time.Hour), Generation: 3, Loaded: time.Now(),
		ReloadErrors: []string{"gateway.yaml:4: upstreams[0].url: is required"}, ReloadFailed: time.Now(),
		Sessions: 7, Streams: 2,
		PerTenant: []console.TenantCounts{{Tenant: "acme", Rejections: map[string]int64{"sessions_per_tenant": 4}}},
		Circuits:  []console.Circuit{{Upstream: "flaky", State: "open"}},
	}
}

func (fake) Upstreams(context.Context) []console.Upstream {
	return []console.Upstream{{
		Name: "files", Transport: "streamable_http", Tried: true, Reachable: true, Credentials: "client_credentials",
		Pinned: true, Pins: []console.Pin{{Kind: "tool", Name: "delete_all", Changed: []string{"description"}, Quarantined: true}},
	}}
}

func (fake) Tenants() []string { return []string{"acme", "beta"} }
func (fake) Issuers() []string { return []string{"corp"} }

func (fake) Explain(_ context.Context, tenant string, _ map[string]any) (*explain.Report, error) {
	if tenant != "acme" {
		return nil, errors.New(`tenant "` + tenant + `": unknown tenant`)
	}
	return &explain.Report{Tenant: "acme", Upstreams: []explain.UpstreamReport{{
		Name: "files", Prefix: "files", Identity: "static headers, the same for every tenant",
		Kinds: []explain.KindReport{{Field: "tools", Items: []explain.Item{{
			Shown: "read", Original: "read_file", Exposed: "files__read_file", Visible: true, Rule: "allowed by tools.allow \"read_*\"",
			Alias: true, FixedArguments: []string{"root"},
		}}}},
	}}}, nil
}

func (fake) Preview(issuer string, claims map[string]any) (console.Preview, error) {
	t, _ := claims["tenant"].(string)
	return console.Preview{Issuer: issuer, Tenant: t, Known: t == "acme", Scopes: []string{"tools"}}, nil
}

func (fake) Budgets(context.Context) []console.Budget {
	return []console.Budget{{Tenant: "acme", Kind: "quota", Name: "daily", Used: 12, Limit: 100}}
}

func (fake) Vault(context.Context) console.Vault {
	return console.Vault{Enabled: true, Upstreams: []console.VaultUpstream{{Upstream: "github", Users: 5}}}
}

func (fake) Audit(n int, f console.AuditFilter) []audit.Record {
	recs := []audit.Record{
		{Time: time.Now(), Event: audit.EventToolCall, Tenant: "acme", Tool: "read_file", Outcome: audit.OutcomeOK},
		{Time: time.Now(), Event: audit.EventPolicyDenial, Tenant: "beta", Tool: "rm", Outcome: audit.OutcomeDenied},
	}
	var out []audit.Record
	for _, r := range recs {
		if (f.Tenant == "" || r.Tenant == f.Tenant) && (f.Outcome == "" || r.Outcome == f.Outcome) && len(out) < n {
			out = append(out, r)
		}
	}
	return out
}

func newHandler(a console.Access) http.Handler {
	return console.New(console.Options{Source: fake{}, Access: func() console.Access { return a }})
}

// get serves a GET of path, as arriving on local (a loopback address by
// default) for host.
func get(h http.Handler, path string, hdr http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "http://localhost"+path, nil)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v[0]
			continue
		}
		req.Header[k] = v
	}
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9090}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestPagesShowTheirData(t *testing.T) {
	h := newHandler(console.Access{Loopback: true})
	for path, wants := range map[string][]string{
		"/console/":                    {"v9.9.9", "generation 3", "upstreams[0].url: is required", "flaky", "open", "sessions_per_tenant: 4"},
		"/console/upstreams":           {"files", "client_credentials", "delete_all", "changed: description", "quarantined"},
		"/console/tenants?tenant=acme": {"files__read_file", "read_file", "root", "allowed by tools.allow"},
		"/console/tenants?issuer=corp&claims=" + url.QueryEscape(`{"tenant":"acme"}`): {`id="preview"`, "files__read_file"},
		"/console/tenants?issuer=corp&claims=" + url.QueryEscape(`{"tenant":"zeta"}`): {"not a tenant this gateway serves"},
		"/console/tenants?claims=" + url.QueryEscape(`[1]`):                           {"one JSON object"},
		"/console/tenants?tenant=nope":                                                {"unknown tenant"},
		"/console/budgets":                                                            {"daily", "12", "100"},
		"/console/vault":                                                              {"github", "5"},
		"/console/audit?outcome=denied":                                               {"policy_denial", "rm"},
	} {
		rec := get(h, path, nil)
		if rec.Code != http.StatusOK {
			t.Errorf("%s: %d\n%s", path, rec.Code, rec.Body)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(rec.Body.String(), w) {
				t.Errorf("%s lacks %q", path, w)
			}
		}
		if got := rec.Header().Get("Content-Security-Policy"); got != console.CSP {
			t.Errorf("%s: CSP %q", path, got)
		}
		if strings.Contains(rec.Body.String(), "<script>") || strings.Contains(rec.Body.String(), "style=") {
			t.Errorf("%s has inline script or style, which the CSP blocks", path)
		}
	}
	if rec := get(h, "/console/audit?tenant=acme", nil); strings.Contains(rec.Body.String(), "policy_denial") {
		t.Error("the audit filter by tenant kept another tenant's record")
	}
	for _, p := range []string{"/console/static/console.css", "/console/static/console.js"} {
		if rec := get(h, p, nil); rec.Code != http.StatusOK || rec.Body.Len() == 0 {
			t.Errorf("%s: %d", p, rec.Code)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	h := newHandler(console.Access{Loopback: true})
	// A rebound name reaches 127.0.0.1 but names itself in Host.
	if rec := get(h, "/console/", http.Header{"Host": {"evil.example"}}); rec.Code == http.StatusOK {
		t.Errorf("foreign Host: %d", rec.Code)
	}
	req := httptest.NewRequest(http.MethodGet, "http://localhost/console/", nil)
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 9090}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("not on loopback: %d, want 403", rec.Code)
	}
	if rec := get(newHandler(console.Access{}), "/console/", nil); rec.Code != http.StatusNotFound || rec.Header().Get("Content-Security-Policy") == "" {
		t.Errorf("console off: %d", rec.Code)
	}
}

func TestBearer(t *testing.T) {
	h := newHandler(console.Access{Bearer: bearer})
	rec := get(h, "/console/upstreams", nil)
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), `action="/console/login"`) || strings.Contains(rec.Body.String(), "delete_all") {
		t.Fatalf("no credential: %d\n%s", rec.Code, rec.Body)
	}
	if rec.Header().Get("Content-Security-Policy") != console.CSP {
		t.Error("the refusal has no CSP")
	}
	if rec := get(h, "/console/upstreams", http.Header{"Authorization": {"Bearer wrong"}}); rec.Code != http.StatusUnauthorized {
		t.Errorf("wrong bearer: %d", rec.Code)
	}
	if rec := get(h, "/console/upstreams", http.Header{"Authorization": {"Bearer " + bearer}}); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "delete_all") {
		t.Errorf("right bearer: %d", rec.Code)
	}

	post := func(form url.Values, origin string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "http://localhost/console/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := post(url.Values{"bearer": {"nope"}}, "http://localhost"); rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
		t.Errorf("wrong sign-in: %d, cookies %v", rec.Code, rec.Result().Cookies())
	}
	if rec := post(url.Values{"bearer": {bearer}}, "http://evil.example"); rec.Code != http.StatusForbidden {
		t.Errorf("cross-origin sign-in: %d", rec.Code)
	}
	rec = post(url.Values{"bearer": {bearer}, "next": {"/console/budgets"}}, "http://localhost")
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/console/budgets" {
		t.Fatalf("sign-in: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || strings.Contains(cookies[0].Value, bearer) {
		t.Fatalf("cookie %+v", cookies)
	}
	if rec := get(h, "/console/budgets", http.Header{"Cookie": {cookies[0].String()}}); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "daily") {
		t.Errorf("with the cookie: %d", rec.Code)
	}
	// A sign-in never sends the browser elsewhere.
	if rec := post(url.Values{"bearer": {bearer}, "next": {"//evil.example/console/"}}, ""); rec.Header().Get("Location") != "/console/" {
		t.Errorf("next elsewhere: Location %q", rec.Header().Get("Location"))
	}
	// Another bearer (a reload) voids the cookie.
	h2 := newHandler(console.Access{Bearer: strings.Repeat("z", 32)})
	if rec := get(h2, "/console/budgets", http.Header{"Cookie": {cookies[0].String()}}); rec.Code != http.StatusUnauthorized {
		t.Errorf("cookie of another bearer: %d", rec.Code)
	}
}
