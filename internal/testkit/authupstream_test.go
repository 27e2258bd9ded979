package testkit

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// authPost posts a JSON-RPC body to an MCP endpoint with the given bearer
// token (none if empty) and session, and returns the status, the
// Mcp-Session-Id answered and the body.
func authPost(t *testing.T, endpoint, token, session, body string) (status int, sid, answer string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", DefaultProtocolVersion)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(data)
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` +
	DefaultProtocolVersion + `","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// whoami connects to endpoint with token and returns what its whoami tool
// says.
func whoami(t *testing.T, endpoint, token string) Whoami {
	t.Helper()
	cs := Connect(t, endpoint, &ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + token}}})
	res := call(t, cs, &mcp.CallToolParams{Name: "whoami"})
	if res.IsError {
		t.Fatalf("whoami: tool error %s", textOf(t, res))
	}
	var w Whoami
	if err := json.Unmarshal([]byte(textOf(t, res)), &w); err != nil {
		t.Fatalf("whoami: %v", err)
	}
	return w
}

func TestAuthUpstreamJWT(t *testing.T) {
	t.Parallel()
	idp := StartIDP(t, []IDPClient{
		{ID: "acme-client", Secret: "acme-secret", Tenant: "acme"},
		{ID: "short", Secret: "short-secret", TTL: time.Second},
	})
	up := NewAuthUpstream(t, AuthUpstreamOptions{Name: "secure", JWKSURL: idp.JWKSURL, Issuer: idp.Issuer, Tools: []string{"extra"}})
	short := idp.Token(t, "short", up.URL, "mcp")
	expiry := time.Now().Add(2 * time.Second)

	token := idp.Token(t, "acme-client", up.URL, "mcp", "mcp:read")
	want := Whoami{
		Upstream: "secure", Kind: "jwt", Subject: "acme-client", Tenant: "acme", ClientID: "acme-client",
		Scope: "mcp mcp:read", Audience: []string{up.URL},
	}
	if diff := cmp.Diff(want, whoami(t, up.URL, token)); diff != "" {
		t.Errorf("whoami (-want +got):\n%s", diff)
	}
	// The more tools, and the tool list.
	cs := Connect(t, up.URL, &ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + token}}})
	res := call(t, cs, &mcp.CallToolParams{Name: "extra"})
	if got := textOf(t, res); got != `{"sub":"acme-client","tool":"extra","upstream":"secure"}` {
		t.Errorf("extra = %s", got)
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 2 || tools.Tools[0].Name != "extra" || tools.Tools[1].Name != "whoami" {
		t.Errorf("tools = %+v", tools.Tools)
	}
	accepted := up.Accepted("acme-client")
	if accepted < 4 {
		t.Errorf("Accepted = %d, want at least 4 (two initializes, two calls)", accepted)
	}

	// Rejected: no token, a token for another resource, a tampered one, a
	// wrong issuer. Each is a 401 pointing at the resource metadata.
	other := idp.Token(t, "acme-client", "http://127.0.0.1:1/mcp", "mcp")
	for _, tc := range []struct{ name, token, subject string }{
		{"no token", "", ""},
		{"other resource", other, "acme-client"},
		{"tampered", token[:len(token)-4] + "AAAA", "acme-client"},
		{"opaque", "not-a-jwt", ""},
	} {
		before := up.Rejected(tc.subject)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, up.URL, strings.NewReader(initializeBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantChallenge := `Bearer resource_metadata="` + strings.TrimSuffix(up.URL, "/mcp") + `/.well-known/oauth-protected-resource"`
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != wantChallenge {
			t.Errorf("%s: %d %q %s, want 401 with %s", tc.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, wantChallenge)
		}
		if got := up.Rejected(tc.subject); got != before+1 {
			t.Errorf("%s: Rejected(%q) = %d, want %d", tc.name, tc.subject, got, before+1)
		}
	}
	if got := up.Accepted("acme-client"); got != accepted {
		t.Errorf("Accepted after rejections = %d, want %d", got, accepted)
	}

	// The protected resource metadata names the IdP.
	resp, err := http.Get(strings.TrimSuffix(up.URL, "/mcp") + "/.well-known/oauth-protected-resource")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	err = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if err != nil || meta.Resource != up.URL || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != idp.Issuer {
		t.Errorf("resource metadata = %+v, %v", meta, err)
	}

	// Another issuer expected: the IdP's tokens are refused.
	strict := NewAuthUpstream(t, AuthUpstreamOptions{JWKSURL: idp.JWKSURL, Issuer: "http://127.0.0.1:1", Audience: up.URL})
	if status, _, body := authPost(t, strict.URL, token, "", initializeBody); status != http.StatusUnauthorized ||
		!strings.Contains(body, "iss") {
		t.Errorf("wrong issuer: %d %s, want 401 about iss", status, body)
	}
	// Audience set explicitly and no issuer checked: up's tokens are good
	// for lax.
	lax := NewAuthUpstream(t, AuthUpstreamOptions{JWKSURL: idp.JWKSURL, Audience: up.URL})
	if w := whoami(t, lax.URL, token); w.Subject != "acme-client" {
		t.Errorf("whoami on lax = %+v", w)
	}

	// FailNext: the next request is refused, the one after is fine.
	up.FailNext(1)
	before := up.Rejected("acme-client")
	if status, _, body := authPost(t, up.URL, token, "", initializeBody); status != http.StatusUnauthorized ||
		!strings.Contains(body, "FailNext") {
		t.Errorf("after FailNext(1): %d %s, want 401", status, body)
	}
	if status, _, body := authPost(t, up.URL, token, "", initializeBody); status != http.StatusOK {
		t.Errorf("after the refusal: %d %s, want 200", status, body)
	}
	if got := up.Rejected("acme-client"); got != before+1 {
		t.Errorf("Rejected after FailNext = %d, want %d", got, before+1)
	}

	// An expired token. Its lifetime runs on the real IdP's clock, so it is
	// waited out (once: every request here is counted below).
	time.Sleep(time.Until(expiry))
	if status, _, body := authPost(t, up.URL, short, "", initializeBody); status != http.StatusUnauthorized ||
		!strings.Contains(body, "expired") {
		t.Errorf("expired token: %d %s, want 401 expired", status, body)
	}

	c := up.Counts()
	if c.Tokens["acme-client"] != 1 || c.Rejected["short"] != 1 || c.Accepted["acme-client"] != up.Accepted("acme-client") {
		t.Errorf("Counts = %+v", c)
	}
}

func TestAuthUpstreamStatic(t *testing.T) {
	t.Parallel()
	up := NewAuthUpstream(t, AuthUpstreamOptions{Static: map[string]AuthIdentity{
		"key-a": {Subject: "tenant-a-key", Tenant: "a", Scope: "mcp"},
		"key-b": {Subject: "tenant-b-key", Tenant: "b"},
	}})
	if diff := cmp.Diff(Whoami{Upstream: "auth", Kind: "static", Subject: "tenant-a-key", Tenant: "a", Scope: "mcp"},
		whoami(t, up.URL, "key-a")); diff != "" {
		t.Errorf("whoami key-a (-want +got):\n%s", diff)
	}
	if w := whoami(t, up.URL, "key-b"); w.Subject != "tenant-b-key" || w.Tenant != "b" {
		t.Errorf("whoami key-b = %+v", w)
	}
	if status, _, body := authPost(t, up.URL, "key-c", "", initializeBody); status != http.StatusUnauthorized {
		t.Errorf("unknown key: %d %s, want 401", status, body)
	}

	// A session belongs to the subject that opened it.
	status, sid, body := authPost(t, up.URL, "key-a", "", initializeBody)
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if status, _, body := authPost(t, up.URL, "key-b", sid, list); status != http.StatusForbidden {
		t.Errorf("key-b on key-a's session: %d %s, want 403", status, body)
	}
	if status, _, body := authPost(t, up.URL, "key-a", sid, list); status != http.StatusOK || !strings.Contains(body, "whoami") {
		t.Errorf("key-a on its session: %d %s", status, body)
	}

	c := up.Counts()
	if c.Rejected[""] != 1 || c.Tokens["tenant-a-key"] != 1 || c.Tokens["tenant-b-key"] != 1 {
		t.Errorf("Counts = %+v", c)
	}

	unbound := NewAuthUpstream(t, AuthUpstreamOptions{UnboundSessions: true, Static: map[string]AuthIdentity{
		"key-a": {Subject: "a"}, "key-b": {Subject: "b"},
	}})
	status, sid, body = authPost(t, unbound.URL, "key-a", "", initializeBody)
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	if status, _, body := authPost(t, unbound.URL, "key-b", sid, list); status != http.StatusOK {
		t.Errorf("UnboundSessions: key-b on key-a's session: %d %s, want 200", status, body)
	}
}

func TestIDPTokenExchange(t *testing.T) {
	t.Parallel()
	idp := StartIDP(t, []IDPClient{
		{ID: "alice-app", Secret: "s1", Tenant: "acme", Subject: "alice"},
		{ID: "bob-app", Secret: "s2", Tenant: "acme", Subject: "bob"},
		{ID: "carol-app", Secret: "s3", Subject: "refused-carol"},
		{ID: "gateway", Secret: "gw secret", TokenExchange: true, TTL: time.Minute, Alg: "ES256",
			RefuseExchangeSubjects: []string{"bob"}},
		{ID: "plain", Secret: "s4"},
	})
	up := NewAuthUpstream(t, AuthUpstreamOptions{JWKSURL: idp.JWKSURL, Issuer: idp.Issuer})
	const gatewayURL = "http://127.0.0.1:8080/mcp"
	alice := idp.Token(t, "alice-app", gatewayURL, "mcp", "mcp:read")

	// The caller's own token is not for the upstream.
	if status, _, body := authPost(t, up.URL, alice, "", initializeBody); status != http.StatusUnauthorized {
		t.Errorf("subject token at the upstream: %d %s, want 401", status, body)
	}

	exchanged, err := idp.Exchange(t, "gateway", alice, up.URL, "mcp:read")
	if err != nil {
		t.Fatal(err)
	}
	header, claims := decodeJWT(t, exchanged)
	if header["typ"] != "at+jwt" || header["alg"] != "ES256" || header["kid"] == nil {
		t.Errorf("header = %v", header)
	}
	want := map[string]any{
		"iss": idp.Issuer, "sub": "alice", "aud": up.URL, "client_id": "gateway", "scope": "mcp:read",
		"tenant": "acme", "org": map[string]any{"tenant": "acme"},
	}
	got := map[string]any{}
	for k, v := range claims {
		if k != "iat" && k != "exp" && k != "jti" {
			got[k] = v
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	if exp, iat := claims["exp"].(float64), claims["iat"].(float64); exp-iat != 60 || claims["jti"] == "" {
		t.Errorf("exp-iat = %v, jti %v; want 60 and a jti", exp-iat, claims["jti"])
	}
	w := whoami(t, up.URL, exchanged)
	if w.Subject != "alice" || w.Tenant != "acme" || w.ClientID != "gateway" || w.Scope != "mcp:read" {
		t.Errorf("whoami = %+v", w)
	}
	if up.Accepted("alice") == 0 {
		t.Error("the upstream counted no request of alice")
	}

	// Without scope: the subject token's. An exchanged token can be
	// exchanged again.
	again, err := idp.Exchange(t, "gateway", exchanged, up.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, c := decodeJWT(t, again); c["sub"] != "alice" || c["scope"] != "mcp:read" {
		t.Errorf("exchanged twice: %v", c)
	}
	if _, err := idp.Exchange(t, "gateway", alice, up.URL); err != nil {
		t.Fatal(err)
	} else if _, c := decodeJWT(t, alice); c["scope"] != "mcp mcp:read" {
		t.Errorf("subject token scope %v", c["scope"])
	}

	// Audience, several targets, an actor.
	actor := idp.Token(t, "gateway", gatewayURL, "mcp")
	status, body := idp.ExchangeResponse(t, "gateway", url.Values{
		"subject_token": {alice}, "subject_token_type": {AccessTokenType},
		"resource": {up.URL}, "audience": {"upstream-x"},
		"actor_token": {actor}, "actor_token_type": {AccessTokenType},
	})
	var answer struct {
		AccessToken     string `json:"access_token"`
		IssuedTokenType string `json:"issued_token_type"`
		TokenType       string `json:"token_type"`
		ExpiresIn       int    `json:"expires_in"`
		Scope           string `json:"scope"`
	}
	if err := json.Unmarshal(body, &answer); status != http.StatusOK || err != nil {
		t.Fatalf("exchange with audience and actor: %d %s", status, body)
	}
	if answer.IssuedTokenType != AccessTokenType || answer.TokenType != "Bearer" || answer.ExpiresIn != 60 || answer.Scope != "mcp mcp:read" {
		t.Errorf("answer = %s", body)
	}
	_, c := decodeJWT(t, answer.AccessToken)
	if diff := cmp.Diff([]any{up.URL, "upstream-x"}, c["aud"]); diff != "" {
		t.Errorf("aud (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"sub": "gateway"}, c["act"]); diff != "" {
		t.Errorf("act (-want +got):\n%s", diff)
	}
	if w := whoami(t, up.URL, answer.AccessToken); w.Subject != "alice" || w.Actor["sub"] != "gateway" {
		t.Errorf("whoami with actor = %+v", w)
	}

	// Refusals.
	bob := idp.Token(t, "bob-app", gatewayURL, "mcp")
	carol := idp.Token(t, "carol-app", gatewayURL, "mcp")
	for _, tc := range []struct {
		name, client, subject, code string
	}{
		{"refused- subject", "gateway", carol, "invalid_grant"},
		{"subject refused to the client", "gateway", bob, "invalid_grant"},
		{"tampered subject token", "gateway", alice[:len(alice)-4] + "AAAA", "invalid_grant"},
		{"not a JWT", "gateway", "opaque", "invalid_grant"},
		{"client without TokenExchange", "plain", alice, "unauthorized_client"},
	} {
		_, err := idp.Exchange(t, tc.client, tc.subject, up.URL)
		var e *IDPError
		if !errors.As(err, &e) || e.Code != tc.code || e.Status != http.StatusBadRequest {
			t.Errorf("%s: %v, want 400 %s", tc.name, err, tc.code)
		}
	}
	for _, tc := range []struct {
		name   string
		params url.Values
		code   string
	}{
		{"no subject_token", url.Values{"subject_token_type": {AccessTokenType}, "resource": {up.URL}}, "invalid_request"},
		{"bad subject_token_type", url.Values{"subject_token": {alice}, "subject_token_type": {"urn:ietf:params:oauth:token-type:id_token"},
			"resource": {up.URL}}, "invalid_request"},
		{"no resource nor audience", url.Values{"subject_token": {alice}, "subject_token_type": {AccessTokenType}}, "invalid_request"},
		{"actor_token without its type", url.Values{"subject_token": {alice}, "subject_token_type": {AccessTokenType},
			"resource": {up.URL}, "actor_token": {actor}}, "invalid_request"},
		{"unknown scope", url.Values{"subject_token": {alice}, "subject_token_type": {AccessTokenType},
			"resource": {up.URL}, "scope": {"mcp other"}}, "invalid_scope"},
		{"relative resource", url.Values{"subject_token": {alice}, "subject_token_type": {AccessTokenType},
			"resource": {"/mcp"}}, "invalid_target"},
	} {
		status, body := idp.ExchangeResponse(t, "gateway", tc.params)
		var e struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || status != http.StatusBadRequest || e.Error != tc.code {
			t.Errorf("%s: %d %s, want 400 %s", tc.name, status, body, tc.code)
		}
	}

	// Counts: every successful grant, nothing refused.
	counts := idp.Counts(t)
	wantCounts := IDPCounts{
		ClientCredentials: map[string]int{"alice-app": 1, "bob-app": 1, "carol-app": 1, "gateway": 1},
		TokenExchange:     map[string]int{"gateway alice": 4},
	}
	if diff := cmp.Diff(wantCounts, counts); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	if n := counts.Exchanges("gateway", "alice"); n != 4 {
		t.Errorf("Exchanges = %d, want 4", n)
	}
	if _, err := idp.Exchange(t, "gateway", alice, up.URL); err != nil {
		t.Fatal(err)
	}
	if n := idp.Counts(t).Exchanges("gateway", "alice"); n != 5 {
		t.Errorf("Exchanges after one more = %d, want 5", n)
	}
}
