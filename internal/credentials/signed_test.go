package credentials_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/identity"
)

const gwIssuer = "https://gw.example/mcp"

func newSigner(t testing.TB) *identity.Signer {
	t.Helper()
	s, err := identity.NewSigner(identity.Options{Issuer: gwIssuer})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// verify checks tok's signature against the signer's published keys and
// returns its claims.
func verify(t *testing.T, s *identity.Signer, tok string) map[string]any {
	t.Helper()
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(s.JWKS(), &set); err != nil {
		t.Fatal(err)
	}
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256, jose.RS256})
	if err != nil {
		t.Fatalf("token %q: %v", tok, err)
	}
	if len(parsed.Headers) != 1 {
		t.Fatalf("%d JOSE headers", len(parsed.Headers))
	}
	keys := set.Key(parsed.Headers[0].KeyID)
	if len(keys) != 1 {
		t.Fatalf("kid %q is not published", parsed.Headers[0].KeyID)
	}
	var claims map[string]any
	if err := parsed.Claims(keys[0].Key, &claims); err != nil {
		t.Fatalf("signature: %v", err)
	}
	return claims
}

func TestSignedIdentity(t *testing.T) {
	signer := newSigner(t)
	for _, tc := range []struct {
		name       string
		auth       config.UpstreamAuth
		c          *credentials.Caller
		wantHeader string
		wantAud    string
		wantScope  string
	}{
		{"defaults", config.UpstreamAuth{}, caller("https://idp", "alice", "t1", aliceToken, "b", "a"),
			"Authorization", upURL, "a b"},
		{"audience and scopes", config.UpstreamAuth{Audience: "https://api.example", Scopes: []string{"up:read"}},
			caller("https://idp", "bob", "t2", "", "a"), "Authorization", "https://api.example", "up:read"},
		{"own header", config.UpstreamAuth{Header: "X-Gateway-Identity"}, caller("https://idp", "carol", "t1", ""),
			"X-Gateway-Identity", upURL, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.auth
			a.Mode = config.AuthSignedIdentity
			src := source(t, config1(upstream(&a)), credentials.Options{Signer: signer})
			h, err := apply(ctxOf(tc.c), src)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			var tok string
			if tc.wantHeader == "Authorization" {
				tok = bearer(t, h)
			} else {
				tok = h.Get(tc.wantHeader)
				if v := h.Get("Authorization"); v != "" {
					t.Errorf("Authorization = %q too", v)
				}
			}
			claims := verify(t, signer, tok)
			want := map[string]any{"iss": gwIssuer, "sub": tc.c.Subject, "tenant": tc.c.Tenant, "aud": tc.wantAud}
			if tc.wantScope != "" {
				want["scope"] = tc.wantScope
			}
			for k, v := range want {
				if claims[k] != v {
					t.Errorf("claim %s = %v, want %v", k, claims[k], v)
				}
			}
			if _, ok := claims["scope"]; !ok && tc.wantScope != "" || ok && tc.wantScope == "" {
				t.Errorf("scope claim %v, want %q", claims["scope"], tc.wantScope)
			}
			if tc.c.Token.Value() != "" && strings.Contains(tok, tc.c.Token.Value()) {
				t.Error("the signed token holds the caller's token")
			}
			// The signer's cached token, the same on the next request.
			if again := mustTokenIn(t, ctxOf(tc.c), src, tc.wantHeader); again != tok {
				t.Errorf("second Apply: another token")
			}
			if src.Invalidate(ctxOf(tc.c)) {
				t.Error("Invalidate = true: another attempt would get the same token")
			}
		})
	}
}

func mustTokenIn(t *testing.T, ctx context.Context, src credentials.Source, header string) string {
	t.Helper()
	h, err := apply(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if header == "Authorization" {
		return bearer(t, h)
	}
	return h.Get(header)
}

// recSigner records what it is asked to sign.
type recSigner struct {
	mu   sync.Mutex
	args [][]string
	err  error
}

func (r *recSigner) Cached(subject, tenant string, scopes []string, audience string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.args = append(r.args, append([]string{subject, tenant, audience}, scopes...))
	if r.err != nil {
		return "", r.err
	}
	return "signed." + subject + "." + tenant, nil
}

func TestSignedIdentitySigner(t *testing.T) {
	rs := &recSigner{}
	a := &config.UpstreamAuth{Mode: config.AuthSignedIdentity}
	cfg := config1(upstream(a), config.Tenant{ID: "t2", Upstreams: []config.TenantUpstream{{Name: "up",
		Auth: &config.UpstreamAuth{Audience: "aud-t2", Scopes: []string{"x"}}}}})
	src := source(t, cfg, credentials.Options{Signer: rs})
	for _, c := range []*credentials.Caller{
		caller("https://idp", "alice", "t1", "", "s1", "s2"),
		caller("https://idp", "bob", "t2", "", "s1"),
	} {
		if tok := mustToken(t, ctxOf(c), src); tok != "signed."+c.Subject+"."+c.Tenant {
			t.Errorf("token %q, want the signer's", tok)
		}
	}
	want := [][]string{{"alice", "t1", upURL, "s1", "s2"}, {"bob", "t2", "aud-t2", "x"}}
	if len(rs.args) != len(want) || !slices.Equal(rs.args[0], want[0]) || !slices.Equal(rs.args[1], want[1]) {
		t.Errorf("signer asked for %q, want %q", rs.args, want)
	}
}

func TestSignedIdentityErrors(t *testing.T) {
	signErr := errors.New("identity: subject is not valid UTF-8")
	for _, tc := range []struct {
		name    string
		signer  credentials.Signer
		ctx     context.Context
		wantIs  error
		wantMsg string
	}{
		{"no caller", newSigner(t), context.Background(), credentials.ErrNoCaller, "no caller"},
		{"no subject", newSigner(t), ctxOf(caller("https://idp", "", "t1", aliceToken)), credentials.ErrNoCaller, "no caller"},
		{"no signer", nil, ctxOf(caller("https://idp", "alice", "t1", "")), nil, "no signing key"},
		{"signer fails", &recSigner{err: signErr}, ctxOf(caller("https://idp", "alice", "t1", "")), signErr, "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &config.UpstreamAuth{Mode: config.AuthSignedIdentity}
			src := source(t, config1(upstream(a)), credentials.Options{Signer: tc.signer})
			h := http.Header{}
			err := src.Apply(tc.ctx, h)
			var ce *credentials.Error
			if !errors.As(err, &ce) || ce.Mode != credentials.ModeSignedIdentity || ce.Upstream != "up" {
				t.Fatalf("Apply: %v, want a *credentials.Error of signed_identity for up", err)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("Apply: %v, want %v", err, tc.wantIs)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.wantMsg) || !strings.Contains(msg, "signed_identity") || strings.Contains(msg, aliceToken) {
				t.Errorf("message %q", msg)
			}
			if len(h) != 0 {
				t.Errorf("headers set: %v", h)
			}
		})
	}
}
