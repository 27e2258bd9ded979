package console_test

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/console"
)

const (
	fakeIssuer  = "https://idp.test"
	adminOrigin = "https://admin.example"
)

// fakeIdP is an OpenID provider in memory, reached through its RoundTrip
// (no network: the tests run in a synctest bubble). Its authorization
// endpoint is not served: a test reads the console's redirect and calls
// authorize, as the provider would after a sign-in.
type fakeIdP struct {
	t   *testing.T
	key *rsa.PrivateKey

	mu    sync.Mutex
	codes map[string]grant
	// issued holds every credential the provider handed out or was sent:
	// none may show up in a page, a log or a cookie.
	issued []string
	// tokenCalls counts token requests.
	tokenCalls int
	// badNonce makes the next ID tokens carry another nonce.
	badNonce bool
	// down makes discovery fail.
	down bool
}

type grant struct {
	challenge, nonce, sub string
	claims                map[string]any
}

func newFakeIdP(t *testing.T) *fakeIdP {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeIdP{t: t, key: key, codes: map[string]grant{}}
}

func (p *fakeIdP) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

func (p *fakeIdP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		if p.down {
			http.Error(w, "internal detail that must not be shown", http.StatusInternalServerError)
			return
		}
		writeJSON(w, map[string]any{
			"issuer": fakeIssuer, "authorization_endpoint": fakeIssuer + "/authorize", "token_endpoint": fakeIssuer + "/token",
			"jwks_uri": fakeIssuer + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"},
		})
	case "/jwks":
		writeJSON(w, map[string]any{"keys": []any{map[string]any{
			"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
			"n": b64(p.key.N.Bytes()), "e": b64(big.NewInt(int64(p.key.E)).Bytes()),
		}}})
	case "/token":
		p.tokenCalls++
		p.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (p *fakeIdP) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok || id != "console" || secret != "console-secret" {
		w.WriteHeader(http.StatusUnauthorized)
		writeJSON(w, map[string]any{"error": "invalid_client"})
		return
	}
	_ = r.ParseForm()
	g, ok := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code"))
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if !ok || r.PostForm.Get("grant_type") != "authorization_code" || r.PostForm.Get("redirect_uri") != adminOrigin+console.CallbackPath ||
		b64(sum[:]) != g.challenge {
		w.WriteHeader(http.StatusBadRequest)
		// An unregistered error and a description with the code: the
		// console logs neither.
		writeJSON(w, map[string]any{"error": "x_" + r.PostForm.Get("code"), "error_description": "bad " + r.PostForm.Get("code")})
		return
	}
	p.issued = append(p.issued, r.PostForm.Get("code_verifier"))
	nonce := g.nonce
	if p.badNonce {
		nonce = "another"
	}
	now := time.Now()
	claims := map[string]any{"iss": fakeIssuer, "sub": g.sub, "aud": "console", "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "nonce": nonce}
	for k, v := range g.claims {
		claims[k] = v
	}
	idt := p.sign(claims)
	at, rt := "at-"+randomString(), "rt-"+randomString()
	p.issued = append(p.issued, idt, at, rt)
	writeJSON(w, map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": 300, "refresh_token": rt, "id_token": idt})
}

func (p *fakeIdP) sign(claims map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"})
	c, _ := json.Marshal(claims)
	input := b64(h) + "." + b64(c)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, p.key, crypto.SHA256, sum[:])
	if err != nil {
		p.t.Fatal(err)
	}
	return input + "." + b64(sig)
}

// authorize is the provider's side of a sign-in as sub, with extra
// claims, at the authorization URL the console sent the browser to: it
// checks the request and returns the callback URL the provider would
// send the browser back to.
func (p *fakeIdP) authorize(t *testing.T, location, sub string, claims map[string]any) string {
	t.Helper()
	u, err := url.Parse(location)
	if err != nil || !strings.HasPrefix(location, fakeIssuer+"/authorize?") {
		t.Fatalf("not sent to the provider: %q", location)
	}
	q := u.Query()
	for k, want := range map[string]string{"response_type": "code", "client_id": "console", "redirect_uri": adminOrigin + console.CallbackPath, "code_challenge_method": "S256"} {
		if q.Get(k) != want {
			t.Errorf("authorization request: %s=%q, want %q", k, q.Get(k), want)
		}
	}
	if !strings.Contains(" "+q.Get("scope")+" ", " openid ") || q.Get("state") == "" || q.Get("nonce") == "" || len(q.Get("code_challenge")) != 43 {
		t.Errorf("authorization request: %s", u.RawQuery)
	}
	code := "code-" + randomString()
	p.mu.Lock()
	p.codes[code] = grant{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), sub: sub, claims: claims}
	p.issued = append(p.issued, code)
	p.mu.Unlock()
	return adminOrigin + console.CallbackPath + "?" + url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {fakeIssuer}}.Encode()
}

func (p *fakeIdP) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tokenCalls
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func randomString() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b64(b)
}

// oidcEnv is a console signing in at a fakeIdP.
type oidcEnv struct {
	idp  *fakeIdP
	cfg  *config.ConsoleOIDC
	h    http.Handler
	logs *bytes.Buffer
	// bodies are every page the console answered.
	bodies []string
}

func newOIDCEnv(t *testing.T, edit func(*config.ConsoleOIDC)) *oidcEnv {
	e := &oidcEnv{idp: newFakeIdP(t), logs: &bytes.Buffer{}}
	e.cfg = &config.ConsoleOIDC{Issuer: fakeIssuer, ClientID: "console", ClientSecret: "console-secret",
		RedirectURL: adminOrigin + console.CallbackPath, Subjects: []string{"alice"}}
	if edit != nil {
		edit(e.cfg)
	}
	e.h = console.New(console.Options{
		Source: fake{}, Access: func() console.Access { return console.Access{OIDC: e.cfg} },
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)), HTTPClient: &http.Client{Transport: e.idp},
	})
	return e
}

// do serves method path with the given cookies, as a browser at the
// console's origin sends it.
func (e *oidcEnv) do(method, target string, hdr http.Header, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	if !strings.HasPrefix(target, "https://") {
		target = adminOrigin + target
	}
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	e.bodies = append(e.bodies, rec.Body.String())
	return rec
}

func cookie(rec *httptest.ResponseRecorder, name string) *http.Cookie {
	for _, c := range rec.Result().Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// begin asks for path without a session and returns the redirect to the
// provider and the flow cookie.
func (e *oidcEnv) begin(t *testing.T, path string) (string, *http.Cookie) {
	t.Helper()
	rec := e.do(http.MethodGet, path, nil)
	flow := cookie(rec, "mcpgw_console_oidc")
	if rec.Code != http.StatusSeeOther || flow == nil {
		t.Fatalf("GET %s without a session: %d, cookies %v\n%s", path, rec.Code, rec.Result().Cookies(), rec.Body)
	}
	return rec.Header().Get("Location"), flow
}

// signIn signs in as sub (with extra claims) from path and returns the
// callback's answer.
func (e *oidcEnv) signIn(t *testing.T, path, sub string, claims map[string]any) *httptest.ResponseRecorder {
	t.Helper()
	loc, flow := e.begin(t, path)
	return e.do(http.MethodGet, e.idp.authorize(t, loc, sub, claims), nil, flow)
}

// noLeak checks that no credential of the provider shows up in a page,
// the log or a cookie.
func (e *oidcEnv) noLeak(t *testing.T, cookies ...*http.Cookie) {
	t.Helper()
	e.idp.mu.Lock()
	defer e.idp.mu.Unlock()
	if len(e.idp.issued) == 0 {
		t.Fatal("the provider issued nothing")
	}
	for _, s := range e.idp.issued {
		for _, b := range e.bodies {
			if strings.Contains(b, s) {
				t.Errorf("a page holds a credential %.12s…", s)
			}
		}
		if strings.Contains(e.logs.String(), s) {
			t.Errorf("the log holds a credential %.12s…:\n%s", s, e.logs)
		}
		for _, c := range cookies {
			if c != nil && strings.Contains(c.Value, s) {
				t.Errorf("cookie %s holds a credential", c.Name)
			}
		}
	}
	if strings.Contains(e.logs.String(), "console-secret") {
		t.Error("the log holds the client secret")
	}
}

// TestOIDCSignIn: a page without a session sends the browser to the
// provider (code, PKCE S256, state, nonce); the callback redeems the code
// and sets a session cookie of the subject only, which then reads the
// console until it expires or the reader signs out.
func TestOIDCSignIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newOIDCEnv(t, nil)
		loc, flow := e.begin(t, "/console/upstreams?x=1")
		if flow.Path != console.CallbackPath || !flow.HttpOnly || !flow.Secure || flow.SameSite != http.SameSiteLaxMode || flow.MaxAge <= 0 || flow.MaxAge > 600 {
			t.Errorf("flow cookie %+v", flow)
		}
		u, _ := url.Parse(loc)
		if state := u.Query().Get("state"); strings.Contains(flow.Value, state) {
			t.Error("the flow cookie shows the state: it is sealed")
		}
		rec := e.do(http.MethodGet, e.idp.authorize(t, loc, "alice", map[string]any{"email": "alice@example.com"}), nil, flow)
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/console/upstreams?x=1" {
			t.Fatalf("callback: %d to %q\n%s\n%s", rec.Code, rec.Header().Get("Location"), rec.Body, e.logs)
		}
		if c := cookie(rec, "mcpgw_console_oidc"); c == nil || c.MaxAge >= 0 {
			t.Errorf("the callback keeps the flow cookie: %+v", c)
		}
		sess := cookie(rec, console.CookieName)
		if sess == nil || sess.Path != console.Path || !sess.HttpOnly || !sess.Secure || sess.SameSite != http.SameSiteLaxMode || sess.MaxAge != int(console.SessionTTL.Seconds()) {
			t.Fatalf("session cookie %+v", sess)
		}
		rec = e.do(http.MethodGet, "/console/upstreams", nil, sess)
		body := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.Contains(body, "delete_all") || !strings.Contains(body, "alice") || !strings.Contains(body, `action="/console/logout"`) {
			t.Fatalf("with the session: %d\n%s", rec.Code, body)
		}
		if strings.Contains(body, "alice@example.com") {
			t.Error("the page shows a claim beyond the subject")
		}
		if rec.Header().Get("Content-Security-Policy") != console.CSP {
			t.Error("no CSP")
		}
		e.noLeak(t, sess, flow)

		// A forged cookie: another subject under the same MAC, garbage,
		// the bearer sign-in's form of cookie.
		parts := strings.Split(sess.Value, ".")
		for name, v := range map[string]string{
			"other subject": b64([]byte("root")) + "." + parts[1] + "." + parts[2],
			"later expiry":  parts[0] + "." + "99999999999" + "." + parts[2],
			"garbage":       "x.y.z",
			"bearer form":   "c2lnbmVkLWJ5LWEtYmVhcmVy",
		} {
			if rec := e.do(http.MethodGet, "/console/", nil, &http.Cookie{Name: console.CookieName, Value: v}); rec.Code != http.StatusSeeOther {
				t.Errorf("%s cookie: %d", name, rec.Code)
			}
		}

		// The session ends after SessionTTL.
		time.Sleep(console.SessionTTL - time.Minute)
		if rec := e.do(http.MethodGet, "/console/", nil, sess); rec.Code != http.StatusOK {
			t.Errorf("before expiry: %d", rec.Code)
		}
		time.Sleep(time.Minute)
		if rec := e.do(http.MethodGet, "/console/", nil, sess); rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), fakeIssuer) {
			t.Errorf("expired session: %d to %q", rec.Code, rec.Header().Get("Location"))
		}

		// Signing out clears the cookie and starts no sign-in.
		rec = e.signIn(t, "/console/", "alice", nil)
		sess = cookie(rec, console.CookieName)
		if rec := e.do(http.MethodPost, "/console/logout", http.Header{"Origin": {"https://evil.example"}}, sess); rec.Code != http.StatusForbidden {
			t.Errorf("cross-origin sign-out: %d", rec.Code)
		}
		rec = e.do(http.MethodPost, "/console/logout", http.Header{"Sec-Fetch-Site": {"same-origin"}}, sess)
		if c := cookie(rec, console.CookieName); rec.Code != http.StatusOK || c == nil || c.MaxAge >= 0 || !strings.Contains(rec.Body.String(), "signed out") {
			t.Errorf("sign-out: %d, cookie %+v\n%s", rec.Code, c, rec.Body)
		}
		e.noLeak(t)
	})
}

// TestOIDCRefusals: a subject off the allow-list, an answer that does not
// match the sign-in this browser started (state, nonce, issuer, cookie of
// another process, an expired sign-in) and a request that is no page
// navigation are refused, with no session, nothing leaked.
func TestOIDCRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newOIDCEnv(t, nil)

		rec := e.signIn(t, "/console/", "bob", map[string]any{"email": "bob@example.com", "groups": []string{"staff"}})
		if rec.Code != http.StatusForbidden || cookie(rec, console.CookieName) != nil || !strings.Contains(rec.Body.String(), "You signed in as bob,") {
			t.Errorf("bob: %d, cookies %v\n%s", rec.Code, rec.Result().Cookies(), rec.Body)
		}
		for _, s := range []string{"bob@example.com", "staff"} {
			if strings.Contains(rec.Body.String(), s) {
				t.Errorf("the refusal echoes the claim %q", s)
			}
		}
		if !strings.Contains(e.logs.String(), "subject=bob") {
			t.Errorf("the refusal is not logged with the subject:\n%s", e.logs)
		}

		calls := e.idp.calls()
		loc, flow := e.begin(t, "/console/")
		cb, _ := url.Parse(e.idp.authorize(t, loc, "alice", nil))
		q := cb.Query()
		q.Set("state", "forged")
		if rec := e.do(http.MethodGet, console.CallbackPath+"?"+q.Encode(), nil, flow); rec.Code != http.StatusForbidden || cookie(rec, console.CookieName) != nil {
			t.Errorf("state mismatch: %d", rec.Code)
		}
		if rec := e.do(http.MethodGet, cb.String(), nil); rec.Code != http.StatusBadRequest {
			t.Errorf("no flow cookie: %d", rec.Code)
		}
		other := newOIDCEnv(t, nil)
		_, otherFlow := other.begin(t, "/console/")
		if rec := e.do(http.MethodGet, cb.String(), nil, otherFlow); rec.Code != http.StatusBadRequest {
			t.Errorf("flow cookie of another process: %d", rec.Code)
		}
		q = cb.Query()
		q.Set("iss", "https://evil.example")
		if rec := e.do(http.MethodGet, console.CallbackPath+"?"+q.Encode(), nil, flow); rec.Code != http.StatusForbidden {
			t.Errorf("another issuer: %d", rec.Code)
		}
		loc, flow = e.begin(t, "/console/")
		time.Sleep(11 * time.Minute)
		if rec := e.do(http.MethodGet, e.idp.authorize(t, loc, "alice", nil), nil, flow); rec.Code != http.StatusBadRequest {
			t.Errorf("a sign-in of 11 minutes: %d", rec.Code)
		}
		loc, flow = e.begin(t, "/console/")
		u, _ := url.Parse(loc)
		denied := console.CallbackPath + "?" + url.Values{"error": {"access_denied"}, "state": {u.Query().Get("state")}}.Encode()
		if rec := e.do(http.MethodGet, denied, nil, flow); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "access_denied") {
			t.Errorf("denied: %d\n%s", rec.Code, rec.Body)
		}
		if e.idp.calls() != calls {
			t.Errorf("the console redeemed %d codes of refused answers", e.idp.calls()-calls)
		}

		e.idp.mu.Lock()
		e.idp.badNonce = true
		e.idp.mu.Unlock()
		if rec := e.signIn(t, "/console/", "alice", nil); rec.Code != http.StatusForbidden || cookie(rec, console.CookieName) != nil {
			t.Errorf("nonce mismatch: %d", rec.Code)
		}
		e.idp.mu.Lock()
		e.idp.badNonce = false
		e.idp.mu.Unlock()

		// A code redeemed twice: the provider refuses it; the log says
		// how, without the code it echoes.
		loc, flow = e.begin(t, "/console/")
		cbURL := e.idp.authorize(t, loc, "alice", nil)
		if rec := e.do(http.MethodGet, cbURL, nil, flow); rec.Code != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", rec.Code)
		}
		if rec := e.do(http.MethodGet, cbURL, nil, flow); rec.Code != http.StatusBadGateway || cookie(rec, console.CookieName) != nil {
			t.Errorf("a code redeemed twice: %d", rec.Code)
		}
		if !strings.Contains(e.logs.String(), "token request refused (HTTP 400): an unregistered error code") {
			t.Errorf("log:\n%s", e.logs)
		}

		// Only a navigation starts a sign-in.
		for name, hdr := range map[string]http.Header{"fetch": {"Sec-Fetch-Mode": {"cors"}}} {
			if rec := e.do(http.MethodGet, "/console/", hdr); rec.Code != http.StatusUnauthorized || cookie(rec, "mcpgw_console_oidc") != nil {
				t.Errorf("%s: %d", name, rec.Code)
			}
		}
		if rec := e.do(http.MethodPost, "/console/", http.Header{"Sec-Fetch-Site": {"same-origin"}}); rec.Code != http.StatusUnauthorized {
			t.Errorf("POST: %d", rec.Code)
		}
		if rec := e.do(http.MethodGet, "/console/static/console.css", nil); rec.Code != http.StatusOK {
			t.Errorf("the stylesheet: %d", rec.Code)
		}
		e.noLeak(t)
	})
}

// TestOIDCGroups: a reader whose groups claim (a nested one here) names
// an allowed group gets in; a reload that changes who may read the
// console ends every session.
func TestOIDCGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newOIDCEnv(t, func(o *config.ConsoleOIDC) {
			o.Subjects, o.GroupsClaim, o.Groups = nil, "realm.roles", []string{"ops"}
		})
		rec := e.signIn(t, "/console/", "carol", map[string]any{"realm": map[string]any{"roles": []string{"dev", "ops"}}})
		sess := cookie(rec, console.CookieName)
		if rec.Code != http.StatusSeeOther || sess == nil {
			t.Fatalf("carol of ops: %d\n%s", rec.Code, rec.Body)
		}
		if rec := e.signIn(t, "/console/", "dave", map[string]any{"realm": map[string]any{"roles": "dev"}}); rec.Code != http.StatusForbidden {
			t.Errorf("dave of dev: %d", rec.Code)
		}
		if rec := e.do(http.MethodGet, "/console/", nil, sess); rec.Code != http.StatusOK {
			t.Fatalf("carol's session: %d", rec.Code)
		}
		next := *e.cfg
		next.Groups = []string{"ops", "sre"}
		e.cfg = &next
		if rec := e.do(http.MethodGet, "/console/", nil, sess); rec.Code != http.StatusSeeOther {
			t.Errorf("a session of the config before: %d", rec.Code)
		}
		e.noLeak(t, sess)
	})
}

// TestOIDCProviderDown: the provider's failure is told without its
// details.
func TestOIDCProviderDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newOIDCEnv(t, nil)
		e.idp.mu.Lock()
		e.idp.down = true
		e.idp.mu.Unlock()
		rec := e.do(http.MethodGet, "/console/", nil)
		if rec.Code != http.StatusBadGateway || strings.Contains(rec.Body.String(), "internal detail") || cookie(rec, "mcpgw_console_oidc") != nil {
			t.Errorf("provider down: %d\n%s", rec.Code, rec.Body)
		}
		e.idp.mu.Lock()
		e.idp.down = false
		e.idp.mu.Unlock()
		if rec := e.signIn(t, "/console/", "alice", nil); rec.Code != http.StatusSeeOther {
			t.Errorf("provider back: %d", rec.Code)
		}
	})
}
