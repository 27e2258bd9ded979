package credentials_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
)

// The grant types and token types of RFC 6749 and RFC 8693.
const (
	grantClientCredentials = "client_credentials"
	grantTokenExchange     = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccessToken   = "urn:ietf:params:oauth:token-type:access_token"
)

// Client credentials the fake authorization server knows. The secrets hold
// characters that HTTP Basic client authentication must form-encode
// (RFC 6749 §2.3.1), so that a client that does not encode them fails.
const (
	gwClient  = "gateway"
	gwSecret  = "gw-s3cr3t:/+&= %"
	tenClient = "tenant-a-client"
	tenSecret = "ten-s3cr3t+&/"
)

// fakeAS is a tiny OAuth authorization server: a token endpoint at /token
// that authenticates its clients with HTTP Basic (form-encoded id and
// secret), grants client_credentials and RFC 8693 token exchange, and the
// two discovery documents. It records every request and can be told to
// fail, to delay or to hold its answers.
type fakeAS struct {
	url     string
	clients map[string]string // client id → secret

	mu sync.Mutex
	// What it answers.
	expiresIn   int    // 0: expires_in left out
	tokenType   string // default "Bearer"
	failStatus  int    // when set, every token request fails with failCode
	failCode    string
	failDesc    string
	delay       time.Duration
	gate        chan struct{}   // when set, token requests wait until it is closed
	refused     map[string]bool // subject tokens refused with invalid_grant
	asMeta      bool            // serve /.well-known/oauth-authorization-server
	oidcMeta    bool            // serve /.well-known/openid-configuration
	metaIssuer  string          // the issuer the metadata names; "" means url
	metaAtPaths map[string]bool // extra paths serving the RFC 8414 metadata
	// What it saw.
	reqs     []seen
	issued   int
	inFlight int
}

// seen is one request the fake server received.
type seen struct {
	Method, Path string
	Header       http.Header
	Form         url.Values
	Body         string
	Client       string // the Basic user, decoded
	Secret       string // the Basic password, decoded
}

func newFakeAS(clients map[string]string) *fakeAS {
	if clients == nil {
		clients = map[string]string{gwClient: gwSecret, tenClient: tenSecret}
	}
	return &fakeAS{clients: clients, expiresIn: 3600, refused: map[string]bool{}}
}

// startAS serves a fake authorization server over loopback HTTP.
func startAS(t testing.TB) *fakeAS {
	t.Helper()
	as := newFakeAS(nil)
	srv := httptest.NewServer(as)
	t.Cleanup(func() {
		as.open()
		srv.Close()
	})
	as.url = srv.URL
	return as
}

// memAS is a fake authorization server reached without a network, through
// [memClient]: for tests in a synctest bubble, where time is fake.
func memAS() (*fakeAS, *http.Client) {
	as := newFakeAS(nil)
	as.url = "http://as.test"
	return as, &http.Client{Transport: handlerTransport{as}}
}

// handlerTransport answers requests with a handler, in the caller's
// goroutine.
type handlerTransport struct{ h http.Handler }

func (ht handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		defer r.Body.Close()
	}
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	sr := r.Clone(r.Context())
	if sr.Body == nil {
		sr.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	ht.h.ServeHTTP(rec, sr)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

func (as *fakeAS) set(f func(as *fakeAS)) {
	as.mu.Lock()
	defer as.mu.Unlock()
	f(as)
}

// hold makes token requests wait until open.
func (as *fakeAS) hold() { as.set(func(as *fakeAS) { as.gate = make(chan struct{}) }) }

// open releases the token requests waiting, and those to come.
func (as *fakeAS) open() {
	as.set(func(as *fakeAS) {
		if as.gate != nil {
			close(as.gate)
			as.gate = nil
		}
	})
}

// requests returns what the server saw, every path or one.
func (as *fakeAS) requests(path string) []seen {
	as.mu.Lock()
	defer as.mu.Unlock()
	var out []seen
	for _, r := range as.reqs {
		if path == "" || r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// tokenRequests counts the requests to the token endpoint.
func (as *fakeAS) tokenRequests() int { return len(as.requests("/token")) }

// waiting counts the token requests being answered.
func (as *fakeAS) waiting() int {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.inFlight
}

func (as *fakeAS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := seen{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()}
	if r.Method == http.MethodPost {
		_ = r.ParseForm()
		s.Form = r.PostForm
		s.Body = r.PostForm.Encode()
	}
	if u, p, ok := r.BasicAuth(); ok {
		s.Client, _ = url.QueryUnescape(u)
		s.Secret, _ = url.QueryUnescape(p)
	}
	as.mu.Lock()
	as.reqs = append(as.reqs, s)
	as.mu.Unlock()

	switch {
	case r.URL.Path == "/token" && r.Method == http.MethodPost:
		as.token(w, r, s)
	case r.Method == http.MethodGet && r.URL.Path == "/.well-known/oauth-authorization-server":
		as.meta(w, as.asMeta)
	case r.Method == http.MethodGet && r.URL.Path == "/.well-known/openid-configuration":
		as.meta(w, as.oidcMeta)
	case r.Method == http.MethodGet && as.metaAtPaths[r.URL.Path]:
		as.meta(w, true)
	default:
		http.NotFound(w, r)
	}
}

func (as *fakeAS) meta(w http.ResponseWriter, serve bool) {
	as.mu.Lock()
	iss := as.metaIssuer
	as.mu.Unlock()
	if !serve {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if iss == "" {
		iss = as.url
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                 iss,
		"token_endpoint":         as.url + "/token",
		"grant_types_supported":  []string{grantClientCredentials, grantTokenExchange},
		"response_types_support": []string{"code"},
	})
}

func (as *fakeAS) token(w http.ResponseWriter, r *http.Request, s seen) {
	as.mu.Lock()
	as.inFlight++
	gate, delay := as.gate, as.delay
	as.mu.Unlock()
	defer func() {
		as.mu.Lock()
		as.inFlight--
		as.mu.Unlock()
	}()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	if want, ok := as.clients[s.Client]; !ok || s.Client == "" || want != s.Secret {
		oauthErr(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	if as.failStatus != 0 {
		oauthErr(w, as.failStatus, as.failCode, as.failDesc)
		return
	}
	if r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		oauthErr(w, http.StatusBadRequest, "invalid_request", "not a form")
		return
	}
	as.issued++
	resp := map[string]any{"token_type": "Bearer"}
	if as.tokenType != "" {
		resp["token_type"] = as.tokenType
	}
	if as.expiresIn != 0 {
		resp["expires_in"] = as.expiresIn
	}
	switch gt := s.Form.Get("grant_type"); gt {
	case grantClientCredentials:
		resp["access_token"] = fmt.Sprintf("cc-%s-%d", s.Client, as.issued)
	case grantTokenExchange:
		st := s.Form.Get("subject_token")
		switch {
		case st == "" || s.Form.Get("subject_token_type") != tokenTypeAccessToken:
			oauthErr(w, http.StatusBadRequest, "invalid_request", "subject_token and its type are required")
			return
		case as.refused[st]:
			oauthErr(w, http.StatusBadRequest, "invalid_grant", "the subject may not be impersonated")
			return
		}
		resp["access_token"] = fmt.Sprintf("xt-%s-%d", tokenName(st), as.issued)
		resp["issued_token_type"] = tokenTypeAccessToken
	default:
		oauthErr(w, http.StatusBadRequest, "unsupported_grant_type", "no such grant")
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// tokenName names a subject token without containing it.
func tokenName(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:4])
}

func oauthErr(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// The upstream every test configures.
const upURL = "https://up.example/mcp"

func upstream(a *config.UpstreamAuth) config.Upstream {
	return config.Upstream{Name: "up", URL: upURL, Headers: map[string]string{"X-Api-Key": "shared-key"}, Auth: a}
}

// source builds the source of the config's first upstream.
func source(t testing.TB, cfg *config.Config, opts credentials.Options) credentials.Source {
	t.Helper()
	src := credentials.ForUpstream(cfg, &cfg.Upstreams[0], opts)
	if src == nil {
		t.Fatal("ForUpstream returned nil")
	}
	t.Cleanup(src.Close)
	return src
}

// config1 is a config with upstream u and tenants.
func config1(u config.Upstream, tenants ...config.Tenant) *config.Config {
	return &config.Config{Upstreams: []config.Upstream{u}, Tenants: tenants}
}

// ccAuth is client_credentials auth at as's token endpoint.
func ccAuth(as *fakeAS) *config.UpstreamAuth {
	return &config.UpstreamAuth{
		Mode: config.AuthClientCredentials, TokenURL: as.url + "/token",
		ClientID: gwClient, ClientSecret: gwSecret,
	}
}

// xAuth is token_exchange auth at as's token endpoint.
func xAuth(as *fakeAS) *config.UpstreamAuth {
	return &config.UpstreamAuth{
		Mode: config.AuthTokenExchange, TokenURL: as.url + "/token",
		ClientID: gwClient, ClientSecret: gwSecret,
	}
}

func caller(iss, sub, tenant, token string, scopes ...string) *credentials.Caller {
	return &credentials.Caller{Issuer: iss, Subject: sub, Tenant: tenant, Scopes: scopes, Token: credentials.NewSecret(token)}
}

func ctxOf(c *credentials.Caller) context.Context {
	return credentials.With(context.Background(), c)
}

// apply applies src for ctx to a fresh header holding the upstream's static
// headers, as the upstream client sends them.
func apply(ctx context.Context, src credentials.Source) (http.Header, error) {
	h := http.Header{"X-Api-Key": {"shared-key"}}
	err := src.Apply(ctx, h)
	return h, err
}

// mustToken applies src and returns the bearer token it set.
func mustToken(t testing.TB, ctx context.Context, src credentials.Source) string {
	t.Helper()
	h, err := apply(ctx, src)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return bearer(t, h)
}

func bearer(t testing.TB, h http.Header) string {
	t.Helper()
	v := h.Values("Authorization")
	if len(v) != 1 || !strings.HasPrefix(v[0], "Bearer ") {
		t.Fatalf("Authorization = %q, want one bearer token", v)
	}
	return strings.TrimPrefix(v[0], "Bearer ")
}

// fetches records OnFetch calls.
type fetches struct {
	mu  sync.Mutex
	got []string
}

func (f *fetches) on(upstream, mode, outcome string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, upstream+"/"+mode+"/"+outcome)
}

func (f *fetches) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}
