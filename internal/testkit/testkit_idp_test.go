package testkit

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// decodeJWT returns the header and claims of a compact JWS, unverified.
func decodeJWT(t *testing.T, token string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a compact JWS", token)
	}
	decode := func(s string) map[string]any {
		data, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("token part %q: %v", s, err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("token part %s: %v", data, err)
		}
		return m
	}
	return decode(parts[0]), decode(parts[1])
}

func TestIDP(t *testing.T) {
	t.Parallel()
	idp := StartIDP(t, []IDPClient{
		{ID: "acme-client", Secret: "acme-secret", Tenant: "acme"},
		{ID: "globex-client", Secret: "globex secret/+:", Tenant: "globex", Alg: "ES256", Subject: "globex-svc",
			Claims: map[string]any{"roles": []string{"admin"}}},
		{ID: "short", Secret: "short-secret", Tenant: "acme", TTL: time.Second},
	})
	if !strings.HasPrefix(idp.Issuer, "http://127.0.0.1:") {
		t.Errorf("Issuer = %q", idp.Issuer)
	}
	const resource = "http://127.0.0.1:8080/mcp"

	now := time.Now().Unix()
	for _, tc := range []struct {
		client, tenant, alg, sub string
		scopes                   []string
		wantScope                string
		ttl                      float64
	}{
		{"acme-client", "acme", "RS256", "acme-client", []string{"mcp", "mcp:write"}, "mcp mcp:write", 300},
		// Scopes the resource does not know are dropped.
		{"globex-client", "globex", "ES256", "globex-svc", []string{"mcp:admin", "other"}, "mcp:admin", 300},
		{"short", "acme", "RS256", "short", []string{"mcp"}, "mcp", 1},
	} {
		t.Run(tc.client, func(t *testing.T) {
			header, claims := decodeJWT(t, idp.Token(t, tc.client, resource, tc.scopes...))
			if header["alg"] != tc.alg || header["typ"] != "at+jwt" || header["kid"] == nil {
				t.Errorf("header = %v, want alg %s, typ at+jwt, a kid", header, tc.alg)
			}
			want := map[string]any{
				"iss":       idp.Issuer,
				"aud":       resource,
				"sub":       tc.sub,
				"client_id": tc.client,
				"scope":     tc.wantScope,
				"tenant":    tc.tenant,
				"org":       map[string]any{"tenant": tc.tenant},
			}
			if tc.client == "globex-client" {
				want["roles"] = []any{"admin"}
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
			iat, _ := claims["iat"].(float64)
			exp, _ := claims["exp"].(float64)
			if iat < float64(now-5) || iat > float64(now+5) {
				t.Errorf("iat = %v, now %d", iat, now)
			}
			if exp-iat != tc.ttl {
				t.Errorf("exp-iat = %v, want %v", exp-iat, tc.ttl)
			}
		})
	}

	// A bad secret: the IdP's own error.
	bad := *idp
	bad.clients = map[string]IDPClient{"acme-client": {ID: "acme-client", Secret: "wrong"}}
	if status, body := bad.TokenResponse(t, "acme-client", resource, "mcp"); status != http.StatusUnauthorized ||
		!strings.Contains(string(body), "invalid_client") {
		t.Errorf("bad secret: %d %s, want 401 invalid_client", status, body)
	}

	var jwks struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(idp.JWKS(t), &jwks); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, k := range jwks.Keys {
		kinds[k["kty"].(string)] = true
		if k["d"] != nil {
			t.Errorf("JWKS has a private key: %v", k)
		}
	}
	if !kinds["RSA"] || !kinds["EC"] {
		t.Errorf("JWKS key types = %v, want RSA and EC", kinds)
	}
}

func TestRunTSClient(t *testing.T) {
	t.Parallel()
	up := NewUpstream(t, "up")
	results := RunTSClient(t, up.URL, "any-token",
		TSStep{Op: "listTools"},
		TSStep{Op: "callTool", Name: "echo", Arguments: map[string]any{"text": "hi"}},
		TSStep{Op: "callTool", Name: "progress", Arguments: map[string]any{"steps": 2}, Progress: true},
		TSStep{Op: "readResource", URI: "test://up/readme"},
		TSStep{Op: "callTool", Name: "nosuch"},
	)
	if len(results) != 5 {
		t.Fatalf("got %d results, want 5: %+v", len(results), results)
	}
	for i, r := range results[:4] {
		if !r.OK {
			t.Fatalf("step %d (%s) failed: %d %s", i, r.Op, r.ErrorCode, r.ErrorMessage)
		}
	}

	var tools struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(results[0].Result, &tools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if diff := cmp.Diff(UpstreamTools, names); diff != "" {
		t.Errorf("listTools (-want +got):\n%s", diff)
	}

	var echo struct {
		Content           []struct{ Type, Text string } `json:"content"`
		StructuredContent map[string]any                `json:"structuredContent"`
	}
	if err := json.Unmarshal(results[1].Result, &echo); err != nil {
		t.Fatal(err)
	}
	if len(echo.Content) != 1 || echo.Content[0].Text != "up:hi" ||
		echo.StructuredContent["text"] != "hi" || echo.StructuredContent["upstream"] != "up" {
		t.Errorf("echo result = %s", results[1].Result)
	}

	if len(results[2].Progress) != 2 || !strings.Contains(string(results[2].Progress[1]), `"step 2"`) {
		t.Errorf("progress notifications = %s", results[2].Progress)
	}
	if !strings.Contains(string(results[3].Result), "readme of up") {
		t.Errorf("readResource result = %s", results[3].Result)
	}

	// An unknown tool: go-sdk answers with a JSON-RPC error.
	if r := results[4]; r.OK || r.ErrorCode == 0 || !strings.Contains(r.ErrorMessage, "nosuch") {
		t.Errorf("unknown tool: %+v", r)
	}

	// The token travels in the Authorization header.
	found := false
	for _, req := range up.Requests() {
		if req.Header.Get("Authorization") == "Bearer any-token" {
			found = true
		}
	}
	if !found {
		t.Error("no request carried Authorization: Bearer any-token")
	}
}

func TestRunTSClientConnectFails(t *testing.T) {
	t.Parallel()
	challenge := `Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", challenge)
		http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	results := RunTSClient(t, srv.URL+"/mcp", "", TSStep{Op: "listTools"})
	if len(results) != 1 {
		t.Fatalf("got %d results, want 1: %+v", len(results), results)
	}
	r := results[0]
	if r.Op != "connect" || r.OK || r.HTTPStatus != http.StatusUnauthorized || r.WWWAuthenticate != challenge {
		t.Errorf("connect result = %+v", r)
	}
}
