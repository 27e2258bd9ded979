package gateway_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// The auth tests run the gateway as a resource server of a real OpenID
// provider (oidc-provider, on loopback). Tokens the real provider cannot
// mint (not yet valid, unknown key, alg none, HMAC) are forged from its own
// tokens, or signed by a second, local issuer whose keys the gateway also
// trusts: a signer stands in only where no real provider would sign.

var idpClients = []testkit.IDPClient{
	{ID: "acme-app", Secret: "acme-secret", Tenant: "acme"},
	{ID: "acme-other", Secret: "other-secret", Tenant: "acme"},
	{ID: "globex-app", Secret: "globex-secret", Tenant: "globex"},
	{ID: "initech-app", Secret: "initech-secret", Tenant: "initech"},
	{ID: "acme-brief", Secret: "brief-secret", Tenant: "acme", TTL: time.Second},
}

// labIssuer is a local signer trusted as a second issuer.
type labIssuer struct {
	url string
	key *rsa.PrivateKey
}

func newLabIssuer(t *testing.T) *labIssuer { return newLabIssuerWith(t, nil) }

// newLabIssuerWith is newLabIssuer whose key set fetches call before, if
// not nil, before they are answered.
func newLabIssuerWith(t *testing.T, before func()) *labIssuer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "lab-1", Algorithm: "RS256", Use: "sig"}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if before != nil {
			before()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	return &labIssuer{url: srv.URL, key: key}
}

func (l *labIssuer) sign(t *testing.T, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "lab-1"
	s, err := tok.SignedString(l.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type authEnv struct {
	idp      *testkit.IDP
	lab      *labIssuer
	alpha    *testkit.Upstream
	url      string // the gateway's MCP endpoint
	metadata string // its protected resource metadata URL
}

func startAuthGateway(t *testing.T, edit ...func(*config.Config)) *authEnv {
	t.Helper()
	e := &authEnv{idp: testkit.StartIDP(t, idpClients), lab: newLabIssuer(t), alpha: testkit.NewUpstream(t, "alpha")}
	e.url = startGateway(t, []upstreamSpec{spec(e.alpha)}, append([]func(*config.Config){func(c *config.Config) {
		c.Auth = config.Auth{
			Issuers: []config.Issuer{
				{Name: "corp", IssuerURL: e.idp.Issuer, TenantClaim: "tenant"},
				{Name: "lab", IssuerURL: e.lab.url, JWKSURL: e.lab.url + "/jwks", TenantClaim: "org.tenant"},
			},
			RequiredScopes: []string{"mcp"},
			Leeway:         config.Duration(time.Second),
		}
		c.Tenants = []config.Tenant{{ID: "acme"}, {ID: "globex"}}
	}}, edit...)...)
	e.metadata = strings.Replace(e.url, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1)
	return e
}

// segments splits a JWT into its decoded header and payload and its
// signature.
func segments(t *testing.T, tok string) (header, payload map[string]any, sig string) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWS: %q", tok)
	}
	dec := func(s string, v any) {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || json.Unmarshal(b, v) != nil {
			t.Fatalf("bad segment %q", s)
		}
	}
	dec(parts[0], &header)
	dec(parts[1], &payload)
	return header, payload, parts[2]
}

func encodeSeg(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func authedPost(t *testing.T, url, token, sid, body string) *http.Request {
	req := post(t, url, sid, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

func TestAuthChallenges(t *testing.T) {
	e := startAuthGateway(t)
	good := e.idp.Token(t, "acme-app", e.url, "mcp")
	brief := e.idp.Token(t, "acme-brief", e.url, "mcp")

	// Tokens the real provider would never sign, forged from a real one.
	hdr, payload, sig := segments(t, good)
	tampered := func() string {
		p := map[string]any{}
		for k, v := range payload {
			p[k] = v
		}
		p["tenant"] = "globex"
		return encodeSeg(hdr) + "." + encodeSeg(p) + "." + sig
	}()
	algNone := encodeSeg(map[string]any{"alg": "none", "typ": "JWT"}) + "." + encodeSeg(payload) + "."
	hmacWithPublicKey := func() string {
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(e.idp.JWKS(t), &set); err != nil {
			t.Fatal(err)
		}
		var pemKey []byte
		var kid string
		for _, k := range set.Keys {
			if pub, ok := k.Key.(*rsa.PublicKey); ok {
				der, _ := x509.MarshalPKIXPublicKey(pub)
				pemKey, kid = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), k.KeyID
			}
		}
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(payload))
		tok.Header["kid"] = kid
		s, err := tok.SignedString(pemKey)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	unknownKid := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims(payload))
		tok.Header["kid"] = "no-such-key"
		s, _ := tok.SignedString(e.lab.key)
		return s
	}()
	now := time.Now()
	labClaims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": e.lab.url, "sub": "lab-user", "aud": e.url, "scope": "mcp",
			"org": map[string]any{"tenant": "acme"}, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		if edit != nil {
			edit(c)
		}
		return c
	}
	notYetValid := e.lab.sign(t, labClaims(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() }))
	other := testkit.StartIDP(t, idpClients[:1]) // a real provider the gateway does not trust
	wrongIssuer := other.Token(t, "acme-app", e.url, "mcp")
	wrongAudience := e.idp.Token(t, "acme-app", "https://elsewhere.example/mcp", "mcp")
	unknownTenant := e.idp.Token(t, "initech-app", e.url, "mcp")
	noScope := e.idp.Token(t, "acme-app", e.url, "mcp:read")

	time.Sleep(2500 * time.Millisecond) // brief (1s) is now past its leeway (1s)

	rm := `resource_metadata="` + e.metadata + `"`
	tests := []struct {
		name   string
		edit   func(*http.Request)
		status int
		www    string // exact WWW-Authenticate ("" for none)
		wwwHas string // or a prefix of it
	}{
		{name: "no token", status: 401, www: `Bearer ` + rm + `, scope="mcp"`},
		{name: "basic scheme", edit: func(r *http.Request) { r.Header.Set("Authorization", "Basic YTpi") }, status: 401, www: `Bearer ` + rm + `, scope="mcp"`},
		{name: "bearer without token", edit: func(r *http.Request) { r.Header.Set("Authorization", "Bearer") }, status: 401, wwwHas: `Bearer ` + rm + `, scope="mcp", error="invalid_token"`},
		{name: "two tokens", edit: func(r *http.Request) { r.Header.Set("Authorization", "Bearer a b") }, status: 401, wwwHas: `Bearer ` + rm + `, scope="mcp", error="invalid_token"`},
		{name: "token in query", edit: func(r *http.Request) { r.URL.RawQuery = "access_token=" + good }, status: 400, wwwHas: `Bearer ` + rm + `, scope="mcp", error="invalid_request"`},
		{name: "expired", edit: bearer(brief), status: 401, www: `Bearer ` + rm + `, scope="mcp", error="invalid_token", error_description="expired"`},
		{name: "not yet valid", edit: bearer(notYetValid), status: 401, www: `Bearer ` + rm + `, scope="mcp", error="invalid_token", error_description="not yet valid"`},
		{name: "wrong audience", edit: bearer(wrongAudience), status: 401, www: `Bearer ` + rm + `, scope="mcp", error="invalid_token", error_description="wrong audience"`},
		{name: "wrong issuer", edit: bearer(wrongIssuer), status: 401, www: `Bearer ` + rm + `, scope="mcp", error="invalid_token", error_description="unknown issuer"`},
		{name: "tampered signature", edit: bearer(tampered), status: 401, www: `Bearer ` + rm + `, scope="mcp", error="invalid_token", error_description="bad signature"`},
		{name: "alg none", edit: bearer(algNone), status: 401, www: `Bearer ` + rm + `, scope="mcp", error="invalid_token", error_description="unsupported algorithm"`},
		{name: "HMAC with the public key", edit: bearer(hmacWithPublicKey), status: 401, www: `Bearer ` + rm + `, scope="mcp", error="invalid_token", error_description="unsupported algorithm"`},
		{name: "unknown kid", edit: bearer(unknownKid), status: 401, www: `Bearer ` + rm + `, scope="mcp", error="invalid_token", error_description="unknown key"`},
		{name: "opaque token", edit: bearer("not-a-jwt"), status: 401, www: `Bearer ` + rm + `, scope="mcp", error="invalid_token", error_description="malformed"`},
		{name: "unknown tenant", edit: bearer(unknownTenant), status: 403, wwwHas: `Bearer ` + rm + `, error="insufficient_scope"`},
		{name: "missing scope", edit: bearer(noScope), status: 403, www: `Bearer ` + rm + `, scope="mcp", error="insufficient_scope", error_description="missing required scope"`},
		{name: "valid", edit: bearer(good), status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := post(t, e.url, "", initBody)
			if tt.edit != nil {
				tt.edit(req)
			}
			resp, body := do(t, req)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.status, body)
			}
			got := resp.Header.Get("WWW-Authenticate")
			switch {
			case tt.www != "" && got != tt.www:
				t.Errorf("WWW-Authenticate:\n got %s\nwant %s", got, tt.www)
			case tt.wwwHas != "" && !strings.HasPrefix(got, tt.wwwHas):
				t.Errorf("WWW-Authenticate:\n got %s\nwant prefix %s", got, tt.wwwHas)
			case tt.status == 200 && got != "":
				t.Errorf("WWW-Authenticate on success: %s", got)
			}
			for _, tok := range []string{good, tampered, brief} {
				if strings.Contains(body, tok) || strings.Contains(got, tok) {
					t.Error("the response echoes a token")
				}
			}
		})
	}
}

func bearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

func TestProtectedResourceMetadata(t *testing.T) {
	e := startAuthGateway(t, func(c *config.Config) {
		c.Tenants[0].Upstreams = []config.TenantUpstream{{Name: "alpha", RequiredScopes: map[string][]string{"echo": {"mcp:write"}}}}
	})
	for _, u := range []string{e.metadata, strings.TrimSuffix(e.metadata, "/mcp")} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var m struct {
			Resource               string   `json:"resource"`
			AuthorizationServers   []string `json:"authorization_servers"`
			ScopesSupported        []string `json:"scopes_supported"`
			BearerMethodsSupported []string `json:"bearer_methods_supported"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &m) != nil {
			t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
		}
		if m.Resource != e.url || len(m.AuthorizationServers) != 2 || m.AuthorizationServers[0] != e.idp.Issuer ||
			strings.Join(m.ScopesSupported, " ") != "mcp mcp:write" || strings.Join(m.BearerMethodsSupported, ",") != "header" {
			t.Errorf("metadata at %s: %s", u, b)
		}
	}
}

// TestAuthenticatedSessions drives the gateway with the Go SDK and real
// tokens: sessions work, are bound to their principal, per-tool scopes are
// enforced, and the client's token never reaches an upstream.
func TestAuthenticatedSessions(t *testing.T) {
	e := startAuthGateway(t, func(c *config.Config) {
		c.Tenants[0].Upstreams = []config.TenantUpstream{{Name: "alpha", RequiredScopes: map[string][]string{"echo": {"mcp:write"}}}}
	})
	ctx := context.Background()
	token := e.idp.Token(t, "acme-app", e.url, "mcp")
	cs := testkit.Connect(t, e.url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + token}}})
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__headers"})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); strings.Contains(got, token) || strings.Contains(got, "Authorization") {
		t.Errorf("the client's token reached the upstream: %s", got)
	}
	// echo needs mcp:write on top of mcp: a step-up challenge.
	sid := initializeWith(t, e.url, token)
	resp, body := do(t, authedPost(t, e.url, token, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"x"}}}`))
	if want := `Bearer resource_metadata="` + e.metadata + `", scope="mcp mcp:write", error="insufficient_scope"`; resp.StatusCode != 403 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), want) {
		t.Errorf("tool needing a scope: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	writer := e.idp.Token(t, "acme-app", e.url, "mcp", "mcp:write")
	sidW := initializeWith(t, e.url, writer)
	if resp, body := do(t, authedPost(t, e.url, writer, sidW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"x"}}}`)); resp.StatusCode != 200 || !strings.Contains(body, "alpha:x") {
		t.Errorf("tool with its scope: %d %s", resp.StatusCode, body)
	}

	// The session belongs to acme-app: another subject of the same tenant,
	// and another tenant, get 404 exactly as for an unknown session.
	for _, client := range []string{"acme-other", "globex-app"} {
		other := e.idp.Token(t, client, e.url, "mcp")
		resp, body := do(t, authedPost(t, e.url, other, sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`))
		if resp.StatusCode != 404 {
			t.Errorf("%s replaying the session: %d %s", client, resp.StatusCode, body)
		}
		unknown := "0123456789abcdef0123456789abcdef"
		_, bodyUnknown := do(t, authedPost(t, e.url, other, unknown, `{"jsonrpc":"2.0","id":2,"method":"ping"}`))
		if body != bodyUnknown {
			t.Errorf("a foreign session answers %q, an unknown one %q", body, bodyUnknown)
		}
	}
	// The owner still can.
	if resp, body := do(t, authedPost(t, e.url, token, sid, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)); resp.StatusCode != 200 {
		t.Errorf("owner: %d %s", resp.StatusCode, body)
	}
}

func initializeWith(t *testing.T, url, token string) string {
	t.Helper()
	resp, body := do(t, authedPost(t, url, token, "", initBody))
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	return sid
}
