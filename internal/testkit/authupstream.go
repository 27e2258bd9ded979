package testkit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// AuthUpstreamOptions configures an [AuthUpstream]. It needs JWKSURL or
// Static, or both.
type AuthUpstreamOptions struct {
	// Name is the server name, and appears in every tool result; "auth" if
	// empty.
	Name string
	// JWKSURL, if not empty, makes the upstream accept JWT access tokens
	// (typ at+jwt) signed by a key published there (fetched when a token
	// names a key not seen yet), unexpired, with the Issuer and Audience
	// below. [IDP.JWKSURL], typically.
	JWKSURL string
	// Issuer is the iss the JWTs must have; empty: not checked.
	Issuer string
	// Audience is a value the JWTs' aud must contain; empty: the upstream's
	// own URL (its MCP endpoint, as RFC 8707 would have it).
	Audience string
	// RequiredScopes are scopes a token must all carry, else the upstream
	// answers 403 insufficient_scope (the SDK's check; not counted as
	// rejected).
	RequiredScopes []string
	// Static maps bearer tokens (say, API keys) to the identities they
	// stand for, accepted as they are. They are checked before JWTs.
	Static map[string]AuthIdentity
	// Tools are more tools to register besides whoami: each returns, as
	// JSON text, {"upstream": Name, "tool": its name, "sub": the caller's
	// subject}.
	Tools []string
	// UnboundSessions leaves the subject out of the SDK's TokenInfo.UserID.
	// By default the SDK binds each session to the subject that created it
	// and answers 403 "session user mismatch" to a request on it with a
	// token of another subject, as any go-sdk server whose verifier sets
	// UserID would.
	UnboundSessions bool
}

// An AuthIdentity is who a static token of an [AuthUpstream] stands for.
type AuthIdentity struct {
	Subject  string // sub; it keys the counts
	Tenant   string
	ClientID string
	Scope    string // space-separated
}

// AuthUpstreamCounts are the HTTP requests an [AuthUpstream] received, by
// subject. The subject of a rejected request is the token's sub if the
// token is a JWT (whatever its validity), or the identity of a static
// token, else "".
type AuthUpstreamCounts struct {
	Accepted map[string]int // requests that passed the token check
	Rejected map[string]int // requests answered 401
	// Tokens counts the distinct tokens accepted.
	Tokens map[string]int
}

// Whoami is the JSON of the whoami tool of an [AuthUpstream]: who the
// token of the call stands for.
type Whoami struct {
	Upstream string         `json:"upstream"`
	Kind     string         `json:"kind"` // "jwt" or "static"
	Subject  string         `json:"sub"`
	Tenant   string         `json:"tenant,omitempty"` // tenant, or else org.tenant
	ClientID string         `json:"client_id,omitempty"`
	Scope    string         `json:"scope,omitempty"`
	Audience []string       `json:"aud,omitempty"`
	Actor    map[string]any `json:"act,omitempty"`
}

// An AuthUpstream is a go-sdk MCP server (Streamable HTTP, stateful, SSE
// answers) on 127.0.0.1 behind the SDK's bearer token middleware
// (auth.RequireBearerToken), for tests of the credentials the gateway sends
// upstream. A request without a valid token gets 401 with
// WWW-Authenticate: Bearer resource_metadata="<URL of its RFC 9728
// metadata>", served at /.well-known/oauth-protected-resource (listing
// Issuer as authorization server). Its tool whoami returns, as JSON text, a
// [Whoami] of the call's token.
//
// All methods are safe for concurrent use.
type AuthUpstream struct {
	Name string
	URL  string // the MCP endpoint: http://127.0.0.1:PORT/mcp

	opts     AuthUpstreamOptions
	audience string
	jwt      *accessTokenChecker
	srv      *httptest.Server
	server   *mcp.Server
	close    sync.Once

	mu       sync.Mutex
	failNext int
	accepted map[string]int
	rejected map[string]int
	tokens   map[string]map[string]bool
}

// NewAuthUpstream starts an upstream configured by opts, stopped at the end
// of the test.
func NewAuthUpstream(t testing.TB, opts AuthUpstreamOptions) *AuthUpstream {
	t.Helper()
	if opts.JWKSURL == "" && len(opts.Static) == 0 {
		t.Fatal("testkit: an AuthUpstream needs a JWKSURL or Static tokens")
	}
	if opts.Name == "" {
		opts.Name = "auth"
	}
	for token, id := range opts.Static {
		if token == "" || id.Subject == "" {
			t.Fatalf("testkit: AuthUpstream static token %q needs a Subject, and a value", token)
		}
	}
	u := &AuthUpstream{
		Name:     opts.Name,
		opts:     opts,
		accepted: make(map[string]int),
		rejected: make(map[string]int),
		tokens:   make(map[string]map[string]bool),
	}

	u.server = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: "0.0.1"}, nil)
	u.server.AddTool(&mcp.Tool{
		Name:        "whoami",
		Description: "Who the bearer token of this call stands for.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		w := whoamiOf(req)
		w.Upstream = opts.Name
		data, err := json.Marshal(w)
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: text(string(data))}, nil
	})
	for _, name := range opts.Tools {
		u.server.AddTool(&mcp.Tool{Name: name, Description: "A trivial tool.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				data, err := json.Marshal(map[string]string{"upstream": opts.Name, "tool": name, "sub": whoamiOf(req).Subject})
				if err != nil {
					return nil, err
				}
				return &mcp.CallToolResult{Content: text(string(data))}, nil
			})
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, nil)

	mux := http.NewServeMux()
	u.srv = httptest.NewServer(mux)
	u.URL = u.srv.URL + "/mcp"
	u.audience = opts.Audience
	if u.audience == "" {
		u.audience = u.URL
	}
	u.jwt = newAccessTokenChecker(opts.JWKSURL, opts.Issuer, u.audience)
	metadataURL := u.srv.URL + "/.well-known/oauth-protected-resource"
	metadata := &oauthex.ProtectedResourceMetadata{Resource: u.URL, ScopesSupported: IDPScopes}
	if opts.Issuer != "" {
		metadata.AuthorizationServers = []string{opts.Issuer}
	}
	mux.Handle("/.well-known/oauth-protected-resource", auth.ProtectedResourceMetadataHandler(metadata))
	mux.Handle("/mcp", u.countMissing(auth.RequireBearerToken(u.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: metadataURL,
		Scopes:              opts.RequiredScopes,
	})(handler)))
	t.Cleanup(u.Close)
	return u
}

// Close stops the upstream: it drops every connection and closes every
// session. It is called at the end of the test, and may be called more than
// once.
func (u *AuthUpstream) Close() {
	u.close.Do(func() {
		u.srv.CloseClientConnections()
		for ss := range u.server.Sessions() {
			ss.Close()
		}
		u.srv.Close()
	})
}

// FailNext makes the upstream answer 401 to the next n requests whose
// token it would accept (counted as rejected), as if their tokens had been
// revoked; n <= 0 stops that.
func (u *AuthUpstream) FailNext(n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.failNext = max(n, 0)
}

// Counts returns a copy of the counts of the requests received so far.
func (u *AuthUpstream) Counts() AuthUpstreamCounts {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := AuthUpstreamCounts{
		Accepted: make(map[string]int, len(u.accepted)),
		Rejected: make(map[string]int, len(u.rejected)),
		Tokens:   make(map[string]int, len(u.tokens)),
	}
	for k, v := range u.accepted {
		c.Accepted[k] = v
	}
	for k, v := range u.rejected {
		c.Rejected[k] = v
	}
	for k, v := range u.tokens {
		c.Tokens[k] = len(v)
	}
	return c
}

// Accepted returns how many requests with a token of subject passed the
// token check.
func (u *AuthUpstream) Accepted(subject string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.accepted[subject]
}

// Rejected returns how many requests with a token of subject (see
// [AuthUpstreamCounts]) were answered 401.
func (u *AuthUpstream) Rejected(subject string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.rejected[subject]
}

// countMissing counts the requests the SDK's middleware rejects before it
// calls the verifier: those without a bearer token.
func (u *AuthUpstream) countMissing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fields := strings.Fields(r.Header.Get("Authorization"))
		if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
			u.mu.Lock()
			u.rejected[""]++
			u.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// verify is the auth.TokenVerifier: it counts every request it sees.
func (u *AuthUpstream) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	info, subject, err := u.check(ctx, token)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil && u.failNext > 0 {
		u.failNext--
		err = fmt.Errorf("%w: refused on purpose (FailNext)", auth.ErrInvalidToken)
	}
	if err != nil {
		u.rejected[subject]++
		return nil, err
	}
	u.accepted[subject]++
	if u.tokens[subject] == nil {
		u.tokens[subject] = make(map[string]bool)
	}
	u.tokens[subject][token] = true
	return info, nil
}

// check verifies token and returns its TokenInfo, and the subject it names
// (even if invalid) for the counts.
func (u *AuthUpstream) check(ctx context.Context, token string) (*auth.TokenInfo, string, error) {
	if id, ok := u.opts.Static[token]; ok {
		w := Whoami{Kind: "static", Subject: id.Subject, Tenant: id.Tenant, ClientID: id.ClientID, Scope: id.Scope}
		return u.tokenInfo(w, time.Now().Add(24*time.Hour)), id.Subject, nil
	}
	claims, err := u.jwt.check(ctx, token)
	if err != nil {
		return nil, claims.Sub, err
	}
	tenant := claims.Tenant
	if tenant == "" {
		tenant = claims.Org.Tenant
	}
	w := Whoami{
		Kind:     "jwt",
		Subject:  claims.Sub,
		Tenant:   tenant,
		ClientID: claims.ClientID,
		Scope:    claims.Scope,
		Audience: claims.Aud,
		Actor:    claims.Act,
	}
	return u.tokenInfo(w, time.Unix(int64(*claims.Exp), 0)), claims.Sub, nil
}

// accessClaims are the claims of a JWT access token that the testkit's
// resource servers read.
type accessClaims struct {
	Iss      string   `json:"iss"`
	Sub      string   `json:"sub"`
	Aud      audience `json:"aud"`
	Exp      *float64 `json:"exp"`
	Nbf      *float64 `json:"nbf"`
	ClientID string   `json:"client_id"`
	Scope    string   `json:"scope"`
	Tenant   string   `json:"tenant"`
	Org      struct {
		Tenant string `json:"tenant"`
	} `json:"org"`
	Act map[string]any `json:"act"`
}

// An accessTokenChecker verifies JWT access tokens (typ at+jwt) the way a
// resource server of the IDP would: signature by a key of a JWKS, iss, aud,
// exp and nbf. It is safe for concurrent use.
type accessTokenChecker struct {
	keys     *oidc.RemoteKeySet // nil: every token is refused
	issuer   string             // empty: not checked
	audience string             // a value aud must contain
}

// newAccessTokenChecker returns a checker of the tokens signed by the keys
// published at jwksURL; with jwksURL empty it refuses every token.
func newAccessTokenChecker(jwksURL, issuer, audience string) *accessTokenChecker {
	c := &accessTokenChecker{issuer: issuer, audience: audience}
	if jwksURL != "" {
		c.keys = oidc.NewRemoteKeySet(context.Background(), jwksURL)
	}
	return c
}

// check verifies token and returns its claims. The claims are returned
// with an error too, once they could be decoded, so that callers can tell
// whose invalid token it was. Errors wrap auth.ErrInvalidToken.
func (c *accessTokenChecker) check(ctx context.Context, token string) (accessClaims, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", auth.ErrInvalidToken, fmt.Sprintf(format, args...))
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return accessClaims{}, invalid("unknown token")
	}
	var header struct {
		Typ string `json:"typ"`
	}
	var claims accessClaims
	if err := decodeSegment(parts[0], &header); err != nil {
		return accessClaims{}, invalid("bad JWT header: %v", err)
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return accessClaims{}, invalid("bad JWT claims: %v", err)
	}
	if c.keys == nil {
		return claims, invalid("unknown token")
	}
	if typ := strings.TrimPrefix(strings.ToLower(header.Typ), "application/"); typ != "at+jwt" {
		return claims, invalid("typ %q is not at+jwt", header.Typ)
	}
	if _, err := c.keys.VerifySignature(ctx, token); err != nil {
		return claims, invalid("%v", err)
	}
	now := float64(time.Now().Unix())
	switch {
	case c.issuer != "" && claims.Iss != c.issuer:
		return claims, invalid("iss %q, want %q", claims.Iss, c.issuer)
	case !slices.Contains(claims.Aud, c.audience):
		return claims, invalid("aud %q does not contain %q", []string(claims.Aud), c.audience)
	case claims.Exp == nil:
		return claims, invalid("no exp")
	case *claims.Exp <= now:
		return claims, invalid("expired")
	case claims.Nbf != nil && *claims.Nbf > now+5:
		return claims, invalid("not valid yet")
	case claims.Sub == "":
		return claims, invalid("no sub")
	}
	return claims, nil
}

// whoamiKey keys the Whoami in TokenInfo.Extra.
const whoamiKey = "testkit/whoami"

func (u *AuthUpstream) tokenInfo(w Whoami, exp time.Time) *auth.TokenInfo {
	info := &auth.TokenInfo{
		Scopes:     strings.Fields(w.Scope),
		Expiration: exp,
		Extra:      map[string]any{whoamiKey: w},
	}
	if !u.opts.UnboundSessions {
		info.UserID = w.Subject
	}
	return info
}

// whoamiOf returns the Whoami of the token of req.
func whoamiOf(req *mcp.CallToolRequest) Whoami {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return Whoami{}
	}
	w, _ := req.Extra.TokenInfo.Extra[whoamiKey].(Whoami)
	return w
}

// audience is a JWT aud: one string or an array of them.
type audience []string

func (a *audience) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return errors.New("aud is neither a string nor an array of strings")
	}
	*a = many
	return nil
}

// decodeSegment decodes the base64url JSON of a JWT segment into v.
func decodeSegment(segment string, v any) error {
	data, err := base64.RawURLEncoding.DecodeString(segment)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
