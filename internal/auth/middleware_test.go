package auth

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpgw/gateway/internal/config"
)

// server serves the fixture's verifier behind Middleware; the handler
// answers with the principal as JSON. Reasons passed to OnFailure are
// appended to *reasons.
func (f *fixture) server(t testing.TB, reasons *[]string) *httptest.Server {
	var mu sync.Mutex
	mw := Middleware(f.v, MiddlewareOptions{
		ResourceMetadataURL: testMetadataURL,
		RequiredScopes:      []string{testScope},
		KnownTenant:         func(id string) bool { return id == "acme" || id == "beta" },
		Logger:              slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnFailure: func(reason string) {
			mu.Lock()
			defer mu.Unlock()
			if reasons != nil {
				*reasons = append(*reasons, reason)
			}
		},
	})
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := PrincipalFrom(r.Context())
		if !ok {
			http.Error(w, "no principal", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(p)
	})))
	t.Cleanup(srv.Close)
	return srv
}

func challenge(params ...string) string {
	return "Bearer " + strings.Join(params, ", ")
}

const (
	rmParam    = `resource_metadata="` + testMetadataURL + `"`
	scopeParam = `scope="` + testScope + `"`
)

func invalidChallenge(reason string) string {
	return challenge(rmParam, scopeParam, `error="invalid_token"`, `error_description="`+reason+`"`)
}

// tamper replaces the payload of a signed token, keeping its signature.
func tamper(t testing.TB, token string, claims jwt.MapClaims) string {
	parts := strings.Split(token, ".")
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

func TestMiddlewareRefuses(t *testing.T) {
	f := newFixture(t, nil)
	var reasons []string
	srv := f.server(t, &reasons)

	es256 := func(edit func(jwt.MapClaims)) func(testing.TB, *fixture) string {
		return func(t testing.TB, f *fixture) string { return sign(t, "ES256", "ec", f.claims(edit)) }
	}
	now := f.clock.Now()
	cases := []struct {
		name        string
		token       func(testing.TB, *fixture) string // nil: none
		header      func(token string) []string       // Authorization values; default "Bearer <token>"
		query       string
		contentType string
		status      int
		challenge   string
		reason      string
	}{
		{
			name:      "no token",
			status:    401,
			challenge: challenge(rmParam, scopeParam),
			reason:    ReasonMissingToken,
		},
		{
			name:      "basic scheme",
			header:    func(string) []string { return []string{"Basic YWxpY2U6c2VjcmV0"} },
			status:    401,
			challenge: challenge(rmParam, scopeParam),
			reason:    ReasonMissingToken,
		},
		{
			name:      "bearer without token",
			header:    func(string) []string { return []string{"Bearer"} },
			status:    401,
			challenge: invalidChallenge("malformed authorization header"),
			reason:    ReasonMalformedHeader,
		},
		{
			name:      "two tokens",
			token:     es256(nil),
			header:    func(tok string) []string { return []string{"Bearer " + tok + " " + tok} },
			status:    401,
			challenge: invalidChallenge("malformed authorization header"),
			reason:    ReasonMalformedHeader,
		},
		{
			name:      "two authorization headers",
			token:     es256(nil),
			header:    func(tok string) []string { return []string{"Bearer " + tok, "Bearer " + tok} },
			status:    401,
			challenge: invalidChallenge("malformed authorization header"),
			reason:    ReasonMalformedHeader,
		},
		{
			name:      "not a b64token",
			header:    func(string) []string { return []string{`Bearer "abc"`} },
			status:    401,
			challenge: invalidChallenge("malformed authorization header"),
			reason:    ReasonMalformedHeader,
		},
		{
			name:      "token in query",
			token:     es256(nil),
			header:    func(string) []string { return nil },
			query:     "access_token=",
			status:    400,
			challenge: challenge(rmParam, scopeParam, `error="invalid_request"`, `error_description="tokens are accepted only in the Authorization header"`),
			reason:    ReasonTokenNotInHeader,
		},
		{
			name:      "token in query besides header",
			token:     es256(nil),
			query:     "x=1&access_token=",
			status:    400,
			challenge: challenge(rmParam, scopeParam, `error="invalid_request"`, `error_description="tokens are accepted only in the Authorization header"`),
			reason:    ReasonTokenNotInHeader,
		},
		{
			name:        "form body",
			header:      func(string) []string { return nil },
			contentType: "application/x-www-form-urlencoded; charset=utf-8",
			status:      400,
			challenge:   challenge(rmParam, scopeParam, `error="invalid_request"`, `error_description="tokens are accepted only in the Authorization header"`),
			reason:      ReasonTokenNotInHeader,
		},
		{
			name:      "not a JWT",
			header:    func(string) []string { return []string{"Bearer abc.def"} },
			status:    401,
			challenge: invalidChallenge("malformed"),
			reason:    ReasonMalformed,
		},
		{
			name:      "expired",
			token:     es256(func(c jwt.MapClaims) { c["exp"] = now.Add(-31 * time.Second).Unix() }),
			status:    401,
			challenge: invalidChallenge("expired"),
			reason:    ReasonExpired,
		},
		{
			name:      "not yet valid",
			token:     es256(func(c jwt.MapClaims) { c["nbf"] = now.Add(31 * time.Second).Unix() }),
			status:    401,
			challenge: invalidChallenge("not yet valid"),
			reason:    ReasonNotYetValid,
		},
		{
			name:      "issued in the future",
			token:     es256(func(c jwt.MapClaims) { c["iat"] = now.Add(time.Minute).Unix() }),
			status:    401,
			challenge: invalidChallenge("not yet valid"),
			reason:    ReasonNotYetValid,
		},
		{
			name:      "wrong audience",
			token:     es256(func(c jwt.MapClaims) { c["aud"] = []string{"https://other.example.com/mcp"} }),
			status:    401,
			challenge: invalidChallenge("wrong audience"),
			reason:    ReasonWrongAudience,
		},
		{
			name:      "no audience",
			token:     es256(func(c jwt.MapClaims) { delete(c, "aud") }),
			status:    401,
			challenge: invalidChallenge("wrong audience"),
			reason:    ReasonWrongAudience,
		},
		{
			name:      "wrong issuer",
			token:     es256(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" }),
			status:    401,
			challenge: invalidChallenge("unknown issuer"),
			reason:    ReasonUnknownIssuer,
		},
		{
			name:      "unknown tenant",
			token:     es256(func(c jwt.MapClaims) { c["org"] = map[string]any{"tenant": "globex"} }),
			status:    403,
			challenge: challenge(rmParam, `error="insufficient_scope"`, `error_description="tenant not configured"`),
			reason:    ReasonUnknownTenant,
		},
		{
			name:      "missing tenant",
			token:     es256(func(c jwt.MapClaims) { delete(c, "org") }),
			status:    401,
			challenge: invalidChallenge("missing tenant"),
			reason:    ReasonMissingTenant,
		},
		{
			name:      "tenant not a string",
			token:     es256(func(c jwt.MapClaims) { c["org"] = map[string]any{"tenant": 7} }),
			status:    401,
			challenge: invalidChallenge("missing tenant"),
			reason:    ReasonMissingTenant,
		},
		{
			name:      "empty tenant",
			token:     es256(func(c jwt.MapClaims) { c["org"] = map[string]any{"tenant": ""} }),
			status:    401,
			challenge: invalidChallenge("missing tenant"),
			reason:    ReasonMissingTenant,
		},
		{
			name:      "no subject",
			token:     es256(func(c jwt.MapClaims) { delete(c, "sub") }),
			status:    401,
			challenge: invalidChallenge("missing claim"),
			reason:    ReasonMissingClaim,
		},
		{
			name:      "no expiry",
			token:     es256(func(c jwt.MapClaims) { delete(c, "exp") }),
			status:    401,
			challenge: invalidChallenge("missing claim"),
			reason:    ReasonMissingClaim,
		},
		{
			name:      "scope not a string",
			token:     es256(func(c jwt.MapClaims) { c["scope"] = []string{testScope} }),
			status:    401,
			challenge: invalidChallenge("malformed"),
			reason:    ReasonMalformed,
		},
		{
			name: "tampered signature",
			token: func(t testing.TB, f *fixture) string {
				tok := sign(t, "ES256", "ec", f.claims(nil))
				return tamper(t, tok, f.claims(func(c jwt.MapClaims) { c["sub"] = "mallory" }))
			},
			status:    401,
			challenge: invalidChallenge("bad signature"),
			reason:    ReasonBadSignature,
		},
		{
			name: "known kid, wrong key",
			token: func(t testing.TB, f *fixture) string {
				return signWith(t, jwt.SigningMethodES256, "ec", testKeys().rogue, f.claims(nil))
			},
			status:    401,
			challenge: invalidChallenge("bad signature"),
			reason:    ReasonBadSignature,
		},
		{
			name: "unknown kid",
			token: func(t testing.TB, f *fixture) string {
				return signWith(t, jwt.SigningMethodES256, "rogue", testKeys().rogue, f.claims(nil))
			},
			status:    401,
			challenge: invalidChallenge("unknown key"),
			reason:    ReasonUnknownKey,
		},
		{
			name: "alg none",
			token: func(t testing.TB, f *fixture) string {
				return signWith(t, jwt.SigningMethodNone, "", jwt.UnsafeAllowNoneSignatureType, f.claims(nil))
			},
			status:    401,
			challenge: invalidChallenge("unsupported algorithm"),
			reason:    ReasonUnsupportedAlgorithm,
		},
		{
			name: "HS256 keyed with the RSA public key",
			token: func(t testing.TB, f *fixture) string {
				der, err := x509.MarshalPKIXPublicKey(&testKeys().rsa.PublicKey)
				if err != nil {
					t.Fatal(err)
				}
				secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
				return signWith(t, jwt.SigningMethodHS256, "rsa", secret, f.claims(nil))
			},
			status:    401,
			challenge: invalidChallenge("unsupported algorithm"),
			reason:    ReasonUnsupportedAlgorithm,
		},
		{
			name:      "missing scope",
			token:     es256(func(c jwt.MapClaims) { c["scope"] = "profile" }),
			status:    403,
			challenge: challenge(rmParam, scopeParam, `error="insufficient_scope"`, `error_description="missing required scope"`),
			reason:    ReasonInsufficientScope,
		},
	}
	var tokens []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var tok string
			if tc.token != nil {
				tok = tc.token(t, f)
				tokens = append(tokens, tok)
			}
			u := srv.URL + "/mcp"
			if tc.query != "" {
				u += "?" + tc.query + url.QueryEscape(tok)
			}
			req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			switch {
			case tc.header != nil:
				for _, h := range tc.header(tok) {
					req.Header.Add("Authorization", h)
				}
			case tok != "":
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			reasons = nil
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status = %d, want %d (body %s)", resp.StatusCode, tc.status, body)
			}
			if diff := cmp.Diff([]string{tc.challenge}, resp.Header.Values("WWW-Authenticate")); diff != "" {
				t.Errorf("WWW-Authenticate mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{tc.reason}, reasons); diff != "" {
				t.Errorf("OnFailure reasons mismatch (-want +got):\n%s", diff)
			}
			checkErrorBody(t, body, -32600)
			if tok != "" && strings.Contains(string(body), tok) {
				t.Errorf("body echoes the token: %s", body)
			}
		})
	}
	logs := f.logs.String()
	for _, tok := range tokens {
		if strings.Contains(logs, tok) {
			t.Errorf("logs contain a token:\n%s", logs)
			break
		}
	}
	if !strings.Contains(logs, "token_sha256=") {
		t.Errorf("logs lack token_sha256:\n%s", logs)
	}
}

// checkErrorBody checks that body is a JSON-RPC error response with a null
// id and the given code.
func checkErrorBody(t testing.TB, body []byte, code int64) {
	t.Helper()
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, body)
	}
	if msg.JSONRPC != "2.0" || string(msg.ID) != "null" || msg.Error.Code != code || msg.Error.Message == "" {
		t.Errorf("body = %s, want a JSON-RPC error with id null and code %d", body, code)
	}
}

func TestMiddlewareAdmits(t *testing.T) {
	f := newFixture(t, nil)
	srv := f.server(t, nil)
	now := f.clock.Now()
	want := func(edit func(*Principal)) *Principal {
		p := &Principal{Issuer: f.idp.URL, Subject: "alice", ClientID: "cli", Tenant: "acme", Scopes: []string{testScope, "profile"}}
		if edit != nil {
			edit(p)
		}
		return p
	}
	cases := []struct {
		name   string
		token  string
		scheme string
		want   *Principal
	}{
		{name: "RS256", token: sign(t, "RS256", "rsa", f.claims(nil)), want: want(nil)},
		{name: "PS256", token: sign(t, "PS256", "rsa", f.claims(nil)), want: want(nil)},
		{name: "ES256", token: sign(t, "ES256", "ec", f.claims(nil)), want: want(nil)},
		{name: "EdDSA", token: sign(t, "EdDSA", "ed", f.claims(nil)), want: want(nil)},
		{name: "no kid", token: sign(t, "ES256", "", f.claims(nil)), want: want(nil)},
		{name: "lower-case scheme", scheme: "bearer", token: sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) { c["jti"] = "1" })), want: want(nil)},
		{
			name: "scope string",
			token: sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) {
				c["scope"] = " a  " + testScope + " b "
			})),
			want: want(func(p *Principal) { p.Scopes = []string{"a", testScope, "b"} }),
		},
		{
			name: "scp array",
			token: sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) {
				delete(c, "scope")
				c["scp"] = []string{testScope, "x"}
			})),
			want: want(func(p *Principal) { p.Scopes = []string{testScope, "x"} }),
		},
		{
			name: "scp string",
			token: sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) {
				delete(c, "scope")
				c["scp"] = testScope + " y"
			})),
			want: want(func(p *Principal) { p.Scopes = []string{testScope, "y"} }),
		},
		{
			name: "azp as client id",
			token: sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) {
				delete(c, "client_id")
				c["azp"] = "other-cli"
			})),
			want: want(func(p *Principal) { p.ClientID = "other-cli" }),
		},
		{
			name: "nested tenant",
			token: sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) {
				c["org"] = map[string]any{"tenant": "beta", "name": "Beta"}
			})),
			want: want(func(p *Principal) { p.Tenant = "beta" }),
		},
		{
			name: "audience among several",
			token: sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) {
				c["aud"] = []string{"https://other.example.com", testPublicURL}
			})),
			want: want(nil),
		},
		{
			name: "expired within leeway",
			token: sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) {
				c["exp"] = now.Add(-20 * time.Second).Unix()
			})),
			want: want(nil),
		},
		{
			name: "not before within leeway",
			token: sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) {
				c["nbf"] = now.Add(20 * time.Second).Unix()
				c["iat"] = now.Add(20 * time.Second).Unix()
			})),
			want: want(nil),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/mcp", nil)
			scheme := tc.scheme
			if scheme == "" {
				scheme = "Bearer"
			}
			req.Header.Set("Authorization", scheme+" "+tc.token)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status = %d, want 200 (WWW-Authenticate %q, body %s)", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
			}
			var got Principal
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, &got, cmpopts.IgnoreFields(Principal{}, "Claims")); diff != "" {
				t.Errorf("principal mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMiddlewareFixedTenantAndAlgorithms(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		is := &c.Auth.Issuers[0]
		is.TenantClaim, is.Tenant = "", "beta"
		is.Algorithms = []string{"ES256"}
		is.Audiences = []string{"api://gateway"}
	})
	srv := f.server(t, nil)
	do := func(tok string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	claims := f.claims(func(c jwt.MapClaims) {
		c["aud"] = "api://gateway"
		delete(c, "org")
	})
	if resp := do(sign(t, "ES256", "ec", claims)); resp.StatusCode != 200 {
		t.Errorf("ES256: status %d, want 200", resp.StatusCode)
	}
	resp := do(sign(t, "RS256", "rsa", claims))
	if got, want := resp.Header.Get("WWW-Authenticate"), invalidChallenge("unsupported algorithm"); resp.StatusCode != 401 || got != want {
		t.Errorf("RS256: %d %q, want 401 %q", resp.StatusCode, got, want)
	}
}

func TestMiddlewareIssuerUnavailable(t *testing.T) {
	f := newFixture(t, nil)
	f.idp.down.Store(true)
	var reasons []string
	srv := f.server(t, &reasons)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer "+sign(t, "ES256", "ec", f.claims(nil)))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want 503", resp.StatusCode)
	}
	if got := resp.Header.Get("WWW-Authenticate"); got != "" {
		t.Errorf("WWW-Authenticate = %q, want none", got)
	}
	if got := resp.Header.Get("Retry-After"); got == "" {
		t.Error("no Retry-After")
	}
	checkErrorBody(t, body, -32603)
	if diff := cmp.Diff([]string{ReasonIssuerUnavailable}, reasons); diff != "" {
		t.Errorf("reasons mismatch (-want +got):\n%s", diff)
	}
}

func TestInsufficientScope(t *testing.T) {
	w := httptest.NewRecorder()
	InsufficientScope(w, testMetadataURL, []string{"files:read", "files:write"})
	if w.Code != http.StatusForbidden {
		t.Errorf("status = %d, want 403", w.Code)
	}
	want := challenge(rmParam, `scope="files:read files:write"`, `error="insufficient_scope"`, `error_description="missing required scope"`)
	if got := w.Header().Get("WWW-Authenticate"); got != want {
		t.Errorf("WWW-Authenticate = %q, want %q", got, want)
	}
	checkErrorBody(t, w.Body.Bytes(), -32600)
}

func TestWWWAuthenticate(t *testing.T) {
	cases := []struct {
		name string
		c    Challenge
		want string
	}{
		{"empty", Challenge{}, "Bearer"},
		{"metadata only", Challenge{ResourceMetadata: "https://x/.well-known/oauth-protected-resource"}, `Bearer resource_metadata="https://x/.well-known/oauth-protected-resource"`},
		{"all", Challenge{ResourceMetadata: "u", Scopes: []string{"a", "b"}, Error: "invalid_token", ErrorDescription: "expired"},
			`Bearer resource_metadata="u", scope="a b", error="invalid_token", error_description="expired"`},
		{"escaped", Challenge{ErrorDescription: "a \"b\" \\ c\r\nd"}, `Bearer error_description="a \"b\" \\ c  d"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := WWWAuthenticate(tc.c); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
