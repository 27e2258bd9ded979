package console_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/console"
	"github.com/mcpgw/gateway/internal/testkit"
)

// lockedBuffer is a buffer written by the server's goroutines and read by
// the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// teeWriter copies what a handler writes to a buffer.
type teeWriter struct {
	http.ResponseWriter
	to io.Writer
}

func (w teeWriter) Write(p []byte) (int, error) {
	_, _ = w.to.Write(p)
	return w.ResponseWriter.Write(p)
}

// recordingTransport keeps what the console sent to the token endpoint
// and what it got back.
type recordingTransport struct {
	tokenURL string
	mu       sync.Mutex
	seen     []string
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.String() != rt.tokenURL {
		return http.DefaultTransport.RoundTrip(req)
	}
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	var tok map[string]any
	_ = json.Unmarshal(answer, &tok)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.seen = append(rt.seen, form.Get("code"), form.Get("code_verifier"))
	for _, k := range []string{"access_token", "id_token", "refresh_token"} {
		if s, ok := tok[k].(string); ok && s != "" {
			rt.seen = append(rt.seen, s)
		}
	}
	return resp, nil
}

// TestOIDCWithIdP signs in to the console at a real OpenID provider
// (oidc-provider, testkit.StartIDP) through its forms: a subject on the
// allow-list and a member of an allowed group read the console, anyone
// else is refused; a forged cookie and an answer whose state was changed
// are refused; no code, verifier or token shows up in a page, a log line
// or a cookie.
func TestOIDCWithIdP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://" + ln.Addr().String()
	const secret = "console-client-secret-e2e"
	idp := testkit.StartIDP(t, []testkit.IDPClient{{ID: "console", Secret: secret, RedirectURIs: []string{origin + console.CallbackPath}}})

	rt := &recordingTransport{tokenURL: idp.TokenURL}
	var logs, bodies lockedBuffer
	cfg := &config.ConsoleOIDC{
		Issuer: idp.Issuer, ClientID: "console", ClientSecret: secret, RedirectURL: origin + console.CallbackPath,
		Scopes: []string{"openid", "groups"}, Subjects: []string{"alice"}, GroupsClaim: "groups", Groups: []string{testkit.IDPGroups[0]},
	}
	h := console.New(console.Options{
		Source: fake{}, Access: func() console.Access { return console.Access{OIDC: cfg} },
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), HTTPClient: &http.Client{Transport: rt},
	})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(teeWriter{w, &bodies}, r)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	signIn := func(login string) (*testkit.Browser, *testkit.Page) {
		b := testkit.NewBrowser(t)
		page := b.Get(t, origin+"/console/budgets")
		return b, idp.SignIn(t, b, page, login)
	}
	b, page := signIn("alice")
	if page.Status != http.StatusOK || page.URL.Path != "/console/budgets" || !strings.Contains(page.Body, "daily") || !strings.Contains(page.Body, "alice") {
		t.Fatalf("alice: %d at %s\n%s\nlog:\n%s", page.Status, page.URL, page.Body, logs.String())
	}
	// The session goes on without the provider.
	if page := b.Get(t, origin+"/console/upstreams"); page.Status != http.StatusOK || !strings.Contains(page.Body, "delete_all") {
		t.Errorf("alice's next page: %d at %s", page.Status, page.URL)
	}
	u, _ := url.Parse(origin + "/console/")
	var sess *http.Cookie
	for _, c := range b.Client.Jar.Cookies(u) {
		if c.Name == console.CookieName {
			sess = c
		}
	}
	if sess == nil {
		t.Fatal("no session cookie")
	}

	if _, page := signIn(testkit.IDPGroupsAccount); page.Status != http.StatusOK || !strings.Contains(page.Body, "daily") {
		t.Errorf("%s of group %s: %d\n%s", testkit.IDPGroupsAccount, testkit.IDPGroups[0], page.Status, page.Body)
	}
	if _, page := signIn("mallory"); page.Status != http.StatusForbidden || !strings.Contains(page.Body, "You signed in as mallory,") || strings.Contains(page.Body, "daily") {
		t.Errorf("mallory: %d\n%s", page.Status, page.Body)
	}

	// A forged session: another subject under alice's MAC.
	forged := b64([]byte("root")) + sess.Value[strings.IndexByte(sess.Value, '.'):]
	req, _ := http.NewRequest(http.MethodGet, origin+"/console/", nil)
	req.AddCookie(&http.Cookie{Name: console.CookieName, Value: forged})
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), idp.Issuer) {
		t.Errorf("forged cookie: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// An answer with another state: the browser stops at the provider's
	// redirect to the callback, which is changed.
	b = testkit.NewBrowser(t)
	b.Client.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == console.CallbackPath {
			return http.ErrUseLastResponse
		}
		return nil
	}
	page = idp.SignIn(t, b, b.Get(t, origin+"/console/"), "alice")
	cb, err := url.Parse(page.Header.Get("Location"))
	if err != nil || cb.Path != console.CallbackPath || cb.Query().Get("code") == "" {
		t.Fatalf("the provider's answer: %d %q", page.Status, page.Header.Get("Location"))
	}
	q := cb.Query()
	q.Set("state", "forged-"+q.Get("state"))
	cb.RawQuery = q.Encode()
	if page := b.Get(t, cb.String()); page.Status != http.StatusForbidden {
		t.Errorf("state mismatch: %d\n%s", page.Status, page.Body)
	}

	rt.mu.Lock()
	seen := rt.seen
	rt.mu.Unlock()
	if len(seen) < 3*4 {
		t.Fatalf("the token endpoint answered %d values, want codes, verifiers and tokens of 3 sign-ins", len(seen))
	}
	for _, s := range append(seen, secret) {
		if s == "" {
			t.Error("a token request or answer lacks a value")
			continue
		}
		switch {
		case strings.Contains(bodies.String(), s):
			t.Errorf("a page holds %.12s…", s)
		case strings.Contains(logs.String(), s):
			t.Errorf("the log holds %.12s…", s)
		case strings.Contains(sess.Value, s):
			t.Errorf("the session cookie holds %.12s…", s)
		}
	}
	if !strings.Contains(logs.String(), "subject=mallory") {
		t.Errorf("log:\n%s", logs.String())
	}
}
