package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// IDPGroupsAccount is the login of the one account of an [IDP] in groups:
// IDPGroups, the "groups" claim of its ID tokens (scope groups).
const IDPGroupsAccount = "operator"

// IDPGroups are the groups of [IDPGroupsAccount].
var IDPGroups = []string{"ops", "staff"}

// IDPScopes are the scopes the [IDP] grants for any resource: a token
// carries those of them the request asked for.
var IDPScopes = []string{"mcp", "mcp:read", "mcp:write", "mcp:admin"}

// An IDPClient is a static OAuth client of an [IDP], using the
// client_credentials grant (and, with TokenExchange, the token exchange
// grant).
type IDPClient struct {
	ID, Secret string
	// Tenant, if not empty, is the value of the "tenant" claim and of the
	// nested "org": {"tenant": …} claim of the client's access tokens.
	Tenant string
	// TTL is the lifetime of the client's access tokens, rounded up to whole
	// seconds; zero means 5 minutes.
	TTL time.Duration
	// Subject, if not empty, replaces the "sub" claim (by default the
	// client ID).
	Subject string
	// Alg is the JWS algorithm of the client's access tokens: "RS256" (the
	// default if empty) or "ES256".
	Alg string
	// Claims are added to the client's access tokens; the fixed claims (iss,
	// sub, aud, exp, iat, jti, scope, client_id) cannot be overridden, and
	// Tenant wins over a "tenant" here.
	Claims map[string]any
	// TokenExchange lets the client exchange tokens (RFC 8693, see [IDP]);
	// without it the IdP answers its exchanges with unauthorized_client.
	TokenExchange bool
	// RefuseExchangeSubjects lists subjects (the sub of a subject token)
	// whose exchanges by this client the IdP refuses with invalid_grant.
	// The IdP refuses every exchange whose subject starts with "refused-"
	// too, whichever the client.
	RefuseExchangeSubjects []string
	// RedirectURIs, if not empty, make the client an authorization code
	// client too (PKCE S256 required, exact redirect URIs, a refresh
	// token with every grant): a person signs in and consents through
	// the IdP's forms, see [IDP.SignIn]. With scope openid the grant has
	// an ID token (sub: the login), and with scope groups its "groups"
	// claim: [IDPGroups] of the login [IDPGroupsAccount], [] for any
	// other.
	RedirectURIs []string
}

// An IDP is a real OpenID provider (the certified oidc-provider package) run
// by node on 127.0.0.1. Its clients use the client_credentials grant; a
// token request names the resource (RFC 8707) the token is for, and gets a
// JWT access token (typ at+jwt) with:
//
//	iss        the Issuer
//	aud        the resource
//	sub        the client ID (or IDPClient.Subject)
//	client_id  the client ID
//	scope      the requested scopes among IDPScopes, space-separated
//	iat, exp   exp-iat is the client's TTL
//	jti
//	tenant     IDPClient.Tenant, and org.tenant the same
//
// A request without a resource gets an opaque (non-JWT) token instead.
// Signing keys (one RS256, one ES256) are generated at start and published
// at JWKSURL.
//
// Clients with [IDPClient.TokenExchange] may also exchange a JWT access
// token of this IdP (the subject token) for another (RFC 8693, grant type
// [TokenExchangeGrant]; see [IDP.Exchange]), for the resources (RFC 8707)
// and audiences the request names. The new token is a JWT access token
// signed by the same keys, with:
//
//	iss        the Issuer
//	aud        the resource and audience values (a string if only one)
//	sub        the subject token's sub
//	client_id  the exchanging client
//	scope      the requested scopes (all among IDPScopes, else
//	           invalid_scope), or else the subject token's
//	iat, exp   exp-iat is the exchanging client's TTL
//	jti
//	tenant     the subject token's tenant, and its org.tenant
//	act        {"sub": the actor token's sub}, if the request had one,
//	           with the subject token's act, if any, nested in it
//
// The exchanging client's Tenant, Subject and Claims play no part in it.
// The subject token must be a valid (signature, iss, exp) JWT access token
// of this IdP, else the IdP answers invalid_grant; it answers invalid_grant
// too to the exchange of a subject whose sub starts with "refused-" or is in
// the client's [IDPClient.RefuseExchangeSubjects]. Missing or bad parameters
// get invalid_request, clients without TokenExchange unauthorized_client.
//
// [IDP.Counts] reports how many tokens the IdP issued, by client and, for
// exchanges, by subject.
type IDP struct {
	Issuer   string // http://127.0.0.1:PORT, as in the tokens' iss
	TokenURL string // token_endpoint from discovery
	JWKSURL  string // jwks_uri from discovery
	Process  *Process

	clients map[string]IDPClient
	http    *http.Client
}

// idpSeq numbers clients files, so that several IDPs of one test do not
// share one.
var idpSeq atomic.Int64

// StartIDP starts an OpenID provider with the given clients, stopped (by PID)
// at the end of the test. It fails the test if the provider is not ready
// within 15s.
func StartIDP(t testing.TB, clients []IDPClient) *IDP {
	t.Helper()
	type clientJSON struct {
		ClientID     string         `json:"client_id"`
		ClientSecret string         `json:"client_secret"`
		Tenant       string         `json:"tenant,omitempty"`
		Subject      string         `json:"subject,omitempty"`
		TTL          int64          `json:"ttl,omitempty"`
		Alg          string         `json:"alg,omitempty"`
		Claims       map[string]any `json:"claims,omitempty"`
		Exchange     bool           `json:"token_exchange,omitempty"`
		Refuse       []string       `json:"refuse_exchange_subjects,omitempty"`
		Redirects    []string       `json:"redirect_uris,omitempty"`
	}
	p := &IDP{clients: make(map[string]IDPClient)}
	list := make([]clientJSON, 0, len(clients))
	for _, c := range clients {
		if c.ID == "" || c.Secret == "" {
			t.Fatalf("testkit: IDP client %+v needs an ID and a Secret", c)
		}
		if _, dup := p.clients[c.ID]; dup {
			t.Fatalf("testkit: IDP client %q listed twice", c.ID)
		}
		p.clients[c.ID] = c
		list = append(list, clientJSON{
			ClientID:     c.ID,
			ClientSecret: c.Secret,
			Tenant:       c.Tenant,
			Subject:      c.Subject,
			TTL:          int64(math.Ceil(c.TTL.Seconds())),
			Alg:          c.Alg,
			Claims:       c.Claims,
			Exchange:     c.TokenExchange,
			Refuse:       c.RefuseExchangeSubjects,
			Redirects:    c.RedirectURIs,
		})
	}
	data, err := json.Marshal(list)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	file := WriteFile(t, fmt.Sprintf("idp-%d/clients.json", idpSeq.Add(1)), string(data))

	dir := NodeDir(t)
	p.Process = StartGateway(t, nodeBinary(t),
		[]string{filepath.Join(dir, "idp.mjs"), "--port", "0", "--clients", file}, nil)
	p.Issuer = p.Process.URL

	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections)
	p.http = &http.Client{Transport: transport, Timeout: 10 * time.Second}

	var discovery struct {
		Issuer        string `json:"issuer"`
		TokenEndpoint string `json:"token_endpoint"`
		JWKSURI       string `json:"jwks_uri"`
	}
	status, body := p.get(t, p.Issuer+"/.well-known/openid-configuration")
	if status != http.StatusOK {
		t.Fatalf("testkit: IDP discovery: %d %s", status, body)
	}
	if err := json.Unmarshal(body, &discovery); err != nil {
		t.Fatalf("testkit: IDP discovery: %v\n%s", err, body)
	}
	if discovery.Issuer != p.Issuer || discovery.TokenEndpoint == "" || discovery.JWKSURI == "" {
		t.Fatalf("testkit: IDP discovery at %s is not as expected:\n%s", p.Issuer, body)
	}
	p.TokenURL, p.JWKSURL = discovery.TokenEndpoint, discovery.JWKSURI
	return p
}

// Token returns a JWT access token for clientID, for the given resource
// (its aud) and scopes, from the client_credentials grant. It fails the test,
// with the IdP's answer, unless the IdP answers 200 with a token.
func (p *IDP) Token(t testing.TB, clientID, resource string, scopes ...string) string {
	t.Helper()
	status, body := p.TokenResponse(t, clientID, resource, scopes...)
	if status != http.StatusOK {
		t.Fatalf("testkit: IDP token for client %q, resource %q: %d %s", clientID, resource, status, body)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("testkit: IDP token for client %q: no access_token in %s", clientID, body)
	}
	return tok.AccessToken
}

// TokenResponse makes the client_credentials token request of [IDP.Token]
// (client_secret_basic; an empty resource sends none) and returns the IdP's
// HTTP status and body as they are, for tests of failures. clientID must
// be one of the IDP's clients.
func (p *IDP) TokenResponse(t testing.TB, clientID, resource string, scopes ...string) (status int, body []byte) {
	t.Helper()
	c, ok := p.clients[clientID]
	if !ok {
		t.Fatalf("testkit: %q is not a client of this IDP", clientID)
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if resource != "" {
		form.Set("resource", resource)
	}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	return p.post(t, c, form)
}

// post sends a token request for client c (client_secret_basic).
func (p *IDP) post(t testing.TB, c IDPClient, form url.Values) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, p.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// RFC 6749 section 2.3.1: the ID and secret are form-encoded first.
	req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	return p.do(t, req)
}

// The token exchange (RFC 8693) grant type and the token type of the
// tokens it takes and issues.
const (
	TokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
	AccessTokenType    = "urn:ietf:params:oauth:token-type:access_token"
)

// An IDPError is the error answer of the IdP's token endpoint (RFC 6749
// section 5.2).
type IDPError struct {
	Status      int    // HTTP status
	Code        string // error: invalid_grant, invalid_request, …
	Description string // error_description
	Body        []byte // the whole body
}

func (e *IDPError) Error() string {
	return fmt.Sprintf("IdP answered %d %s: %s", e.Status, e.Code, e.Description)
}

// Exchange exchanges subjectToken (a JWT access token of this IdP) for an
// access token for resource (RFC 8707; its aud) with the given scopes
// (none: the subject token's), on behalf of clientID, through the token
// exchange grant (RFC 8693, client_secret_basic). It returns the new
// token, or an *[IDPError] if the IdP refused; other failures fail the
// test. clientID must be one of the IDP's clients.
func (p *IDP) Exchange(t testing.TB, clientID, subjectToken, resource string, scopes ...string) (string, error) {
	t.Helper()
	form := url.Values{
		"subject_token":      {subjectToken},
		"subject_token_type": {AccessTokenType},
		"resource":           {resource},
	}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	status, body := p.ExchangeResponse(t, clientID, form)
	if status != http.StatusOK {
		e := &IDPError{Status: status, Body: body}
		var answer struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if err := json.Unmarshal(body, &answer); err != nil || answer.Error == "" {
			t.Fatalf("testkit: IDP exchange for client %q: %d %s", clientID, status, body)
		}
		e.Code, e.Description = answer.Error, answer.Description
		return "", e
	}
	var tok struct {
		AccessToken     string `json:"access_token"`
		IssuedTokenType string `json:"issued_token_type"`
		TokenType       string `json:"token_type"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" ||
		tok.IssuedTokenType != AccessTokenType || tok.TokenType != "Bearer" {
		t.Fatalf("testkit: IDP exchange for client %q: not an RFC 8693 answer: %s", clientID, body)
	}
	return tok.AccessToken, nil
}

// ExchangeResponse makes a token exchange request for clientID
// (client_secret_basic) with grant_type [TokenExchangeGrant] and the given
// parameters (subject_token, subject_token_type, resource, audience,
// scope, actor_token, actor_token_type), sent as they are, and returns the
// IdP's HTTP status and body as they are. clientID must be one of the
// IDP's clients.
func (p *IDP) ExchangeResponse(t testing.TB, clientID string, params url.Values) (status int, body []byte) {
	t.Helper()
	c, ok := p.clients[clientID]
	if !ok {
		t.Fatalf("testkit: %q is not a client of this IDP", clientID)
	}
	form := url.Values{"grant_type": {TokenExchangeGrant}}
	for k, vs := range params {
		form[k] = append(form[k], vs...)
	}
	return p.post(t, c, form)
}

// IDPCounts are the numbers of tokens an [IDP] issued, successful grants
// only.
type IDPCounts struct {
	// ClientCredentials counts client_credentials grants, by client ID.
	ClientCredentials map[string]int `json:"client_credentials"`
	// TokenExchange counts token exchanges, by "<client ID> <subject>":
	// see [IDPCounts.Exchanges].
	TokenExchange map[string]int `json:"token_exchange"`
	// AuthorizationCode, RefreshToken and Revocation count code
	// redemptions, refreshes and grants revoked, by client ID.
	AuthorizationCode map[string]int `json:"authorization_code"`
	RefreshToken      map[string]int `json:"refresh_token"`
	Revocation        map[string]int `json:"revocation"`
}

// Exchanges returns how many tokens clientID got by exchanging tokens of
// subject (their sub).
func (c IDPCounts) Exchanges(clientID, subject string) int {
	return c.TokenExchange[clientID+" "+subject]
}

// Counts returns how many tokens the IdP issued so far.
func (p *IDP) Counts(t testing.TB) IDPCounts {
	t.Helper()
	status, body := p.get(t, p.Issuer+"/test/counts")
	if status != http.StatusOK {
		t.Fatalf("testkit: IDP counts: %d %s", status, body)
	}
	var c IDPCounts
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("testkit: IDP counts: %v\n%s", err, body)
	}
	return c
}

// JWKS returns the IdP's public signing keys, the JSON at JWKSURL.
func (p *IDP) JWKS(t testing.TB) []byte {
	t.Helper()
	status, body := p.get(t, p.JWKSURL)
	if status != http.StatusOK {
		t.Fatalf("testkit: IDP JWKS: %d %s", status, body)
	}
	return body
}

func (p *IDP) get(t testing.TB, url string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return p.do(t, req)
}

func (p *IDP) do(t testing.TB, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := p.http.Do(req)
	if err != nil {
		t.Fatalf("testkit: IDP %s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("testkit: IDP %s %s: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, body
}
