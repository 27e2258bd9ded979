package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

func wantReason(t testing.TB, err error, sentinel error, reason string) {
	t.Helper()
	if !errors.Is(err, sentinel) || Reason(err) != reason {
		t.Errorf("err = %v (reason %q), want %v with reason %q", err, Reason(err), sentinel, reason)
	}
}

// verifySoon retries Verify for a moment. go-oidc's RemoteKeySet forgets
// a finished key refresh just after its waiters have their result, and a
// Verify in between reuses that result instead of starting a refresh.
func verifySoon(t testing.TB, v *Verifier, tok string) (p *Principal, err error) {
	testkit.Poll(2*time.Second, func() bool {
		p, err = v.Verify(t.Context(), tok)
		return err == nil
	})
	return p, err
}

func TestVerifyCache(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	tok := sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) {
		c["exp"] = f.clock.Now().Add(time.Minute).Unix()
	}))
	p1, err := f.v.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	calls, fetches := f.keySetCalls(), f.idp.jwksFetches.Load()
	if calls != 1 || fetches != 1 {
		t.Fatalf("after first Verify: %d key set calls, %d JWKS fetches; want 1, 1", calls, fetches)
	}
	p2, err := f.v.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if p2 != p1 {
		t.Error("second Verify did not return the cached principal")
	}
	if got := f.keySetCalls(); got != calls {
		t.Errorf("cache hit called the key set: %d calls, want %d", got, calls)
	}

	// Past exp but within leeway: still served from the cache.
	f.clock.Advance(time.Minute + 20*time.Second)
	if _, err := f.v.Verify(ctx, tok); err != nil {
		t.Errorf("within leeway: %v", err)
	}
	// Past exp and leeway: refused, without a signature check.
	f.clock.Advance(11 * time.Second)
	_, err = f.v.Verify(ctx, tok)
	wantReason(t, err, ErrInvalidToken, ReasonExpired)
	if got := f.keySetCalls(); got != calls {
		t.Errorf("expired cached token called the key set: %d calls, want %d", got, calls)
	}
	if n := f.v.cache.len(); n != 0 {
		t.Errorf("cache holds %d entries after expiry, want 0", n)
	}
	if got := f.idp.jwksFetches.Load(); got != 1 {
		t.Errorf("%d JWKS fetches, want 1", got)
	}
}

func TestVerifyCacheMaxAge(t *testing.T) {
	f := newFixture(t, nil)
	tok := sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) {
		c["exp"] = f.clock.Now().Add(time.Hour).Unix()
	}))
	for range 2 {
		if _, err := f.v.Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.keySetCalls(); got != 1 {
		t.Fatalf("%d key set calls, want 1", got)
	}
	f.clock.Advance(maxCacheAge)
	if _, err := f.v.Verify(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	if got := f.keySetCalls(); got != 2 {
		t.Errorf("%d key set calls after %v, want 2: the token is checked again", got, maxCacheAge)
	}
}

func TestVerifyCacheBoundedAndFailuresNotCached(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Auth.TokenCacheSize = 2 })
	ctx := t.Context()
	var toks []string
	for i := range 3 {
		toks = append(toks, sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) { c["jti"] = fmt.Sprint(i) })))
		if _, err := f.v.Verify(ctx, toks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.v.cache.len(); n != 2 {
		t.Errorf("cache holds %d entries, want 2", n)
	}
	calls := f.keySetCalls()
	if _, err := f.v.Verify(ctx, toks[2]); err != nil { // most recent: cached
		t.Fatal(err)
	}
	if _, err := f.v.Verify(ctx, toks[0]); err != nil { // evicted: checked again
		t.Fatal(err)
	}
	if got := f.keySetCalls(); got != calls+1 {
		t.Errorf("%d key set calls, want %d", got, calls+1)
	}

	bad := sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) { c["aud"] = "https://other" }))
	calls = f.keySetCalls()
	for range 2 {
		_, err := f.v.Verify(ctx, bad)
		wantReason(t, err, ErrInvalidToken, ReasonWrongAudience)
	}
	if got := f.keySetCalls(); got != calls+2 {
		t.Errorf("failed verification was cached: %d key set calls, want %d", got, calls+2)
	}
}

func TestVerifyCacheDisabled(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Auth.TokenCacheSize = -1 })
	tok := sign(t, "ES256", "ec", f.claims(nil))
	for range 3 {
		if _, err := f.v.Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.keySetCalls(); got != 3 {
		t.Errorf("%d key set calls, want 3", got)
	}
}

// Tokens with bogus kids must not turn into requests to the IdP: at most
// one JWKS fetch per refresh interval.
func TestBogusKidFloodIsRateLimited(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	good := sign(t, "ES256", "ec", f.claims(nil))
	if _, err := f.v.Verify(ctx, good); err != nil {
		t.Fatal(err)
	}
	if got := f.idp.jwksFetches.Load(); got != 1 {
		t.Fatalf("%d JWKS fetches after the first token, want 1", got)
	}
	flood := func(round int) {
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				tok := signWith(t, jwt.SigningMethodES256, fmt.Sprintf("bogus-%d-%d", round, i), testKeys().rogue, f.claims(nil))
				_, err := f.v.Verify(ctx, tok)
				wantReason(t, err, ErrInvalidToken, ReasonUnknownKey)
			})
		}
		wg.Wait()
	}
	flood(1)
	if got := f.idp.jwksFetches.Load(); got != 1 {
		t.Errorf("%d JWKS fetches after a flood within the interval, want 1", got)
	}
	f.clock.Advance(testTuning.keyRefresh)
	flood(2)
	if got := f.idp.jwksFetches.Load(); got != 2 {
		t.Errorf("%d JWKS fetches after a flood in the next interval, want 2", got)
	}
	// Known keys keep working from the cached key set.
	if _, err := f.v.Verify(ctx, sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) { c["jti"] = "x" }))); err != nil {
		t.Error(err)
	}
	if _, err := f.v.Verify(ctx, sign(t, "EdDSA", "ed", f.claims(nil))); err != nil {
		t.Error(err)
	}
	if got := f.idp.jwksFetches.Load(); got != 2 {
		t.Errorf("%d JWKS fetches, want 2", got)
	}
}

// A key published after the last fetch is found once the refresh interval
// has passed.
func TestKeyRotation(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	if _, err := f.v.Verify(ctx, sign(t, "ES256", "ec", f.claims(nil))); err != nil {
		t.Fatal(err)
	}
	k := testKeys()
	f.idp.publish(t, map[string]crypto.PublicKey{"ec": &k.ec.PublicKey, "next": &k.next.PublicKey})
	tok := signWith(t, jwt.SigningMethodES256, "next", k.next, f.claims(nil))
	_, err := f.v.Verify(ctx, tok)
	wantReason(t, err, ErrInvalidToken, ReasonUnknownKey)
	f.clock.Advance(testTuning.keyRefresh)
	if _, err := verifySoon(t, f.v, tok); err != nil {
		t.Errorf("after the refresh interval: %v", err)
	}
}

// The refused algorithms are refused before any key is looked up.
func TestRefusedAlgorithmsFetchNoKeys(t *testing.T) {
	f := newFixture(t, nil)
	for _, tok := range []string{
		signWith(t, jwt.SigningMethodNone, "", jwt.UnsafeAllowNoneSignatureType, f.claims(nil)),
		signWith(t, jwt.SigningMethodHS256, "rsa", []byte("secret"), f.claims(nil)),
		signWith(t, jwt.SigningMethodES384, "ec", mustEC384(t), f.claims(nil)),
	} {
		_, err := f.v.Verify(t.Context(), tok)
		wantReason(t, err, ErrInvalidToken, ReasonUnsupportedAlgorithm)
	}
	if d, j := f.idp.discoveries.Load(), f.idp.jwksFetches.Load(); d+j != 0 {
		t.Errorf("%d discoveries and %d JWKS fetches, want none", d, j)
	}
}

func mustEC384(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestLazyDiscovery(t *testing.T) {
	f := newFixture(t, nil)
	f.idp.down.Store(true)
	ctx := t.Context()
	// NewVerifier (in newFixture) contacted nobody.
	if got := f.idp.discoveries.Load(); got != 0 {
		t.Fatalf("%d discoveries before any token, want 0", got)
	}

	err := f.v.Ready(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "issuer corp: discovery failing: ") {
		t.Errorf("Ready = %v, want issuer corp: discovery failing: ...", err)
	}
	tok := sign(t, "ES256", "ec", f.claims(nil))
	_, err = f.v.Verify(ctx, tok)
	wantReason(t, err, ErrIssuerUnavailable, ReasonIssuerUnavailable)
	if got := f.idp.discoveries.Load(); got != 1 {
		t.Errorf("%d discoveries, want 1: Verify within the backoff must not retry", got)
	}

	f.idp.down.Store(false)
	_, err = f.v.Verify(ctx, tok)
	wantReason(t, err, ErrIssuerUnavailable, ReasonIssuerUnavailable)

	f.clock.Advance(testTuning.backoffMin)
	if err := f.v.Ready(ctx); err != nil {
		t.Errorf("Ready after the IdP came up: %v", err)
	}
	if _, err := f.v.Verify(ctx, tok); err != nil {
		t.Errorf("Verify after the IdP came up: %v", err)
	}
	if got := f.idp.discoveries.Load(); got != 2 {
		t.Errorf("%d discoveries, want 2", got)
	}
}

func TestDiscoveryBackoff(t *testing.T) {
	cases := []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 4 * time.Second}, {100, 4 * time.Second}}
	for _, tc := range cases {
		if got := testTuning.backoff(tc.n); got != tc.want {
			t.Errorf("backoff(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

func TestDiscoveryUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	f := newFixture(t, func(c *config.Config) { c.Auth.Issuers[0].IssuerURL = dead })
	err = f.v.Ready(t.Context())
	if err == nil || !strings.HasPrefix(err.Error(), "issuer corp: discovery failing: ") {
		t.Errorf("Ready = %v, want issuer corp: discovery failing: ...", err)
	}
}

func TestDiscoveryIssuerMismatch(t *testing.T) {
	// The discovery document says iss is the URL without the slash.
	var url string
	f := newFixture(t, func(c *config.Config) {
		url = c.Auth.Issuers[0].IssuerURL
		c.Auth.Issuers[0].IssuerURL += "/"
	})
	err := f.v.Ready(t.Context())
	if err == nil || !strings.Contains(err.Error(), "did not match") || !strings.Contains(err.Error(), url) {
		t.Errorf("Ready = %v, want an issuer mismatch", err)
	}
}

// An issuer with jwks_url needs no discovery; its keys are fetched with the
// first token, and a failing fetch is ErrIssuerUnavailable.
func TestJWKSURLIssuer(t *testing.T) {
	f := newFixture(t, nil)
	f.cfg.Auth.Issuers[0].JWKSURL = f.idp.URL + "/keys"
	v, err := newVerifier(f.cfg, Options{Now: f.clock.Now}, testTuning)
	if err != nil {
		t.Fatal(err)
	}
	f.v = v
	ctx := t.Context()
	f.idp.down.Store(true)
	if err := v.Ready(ctx); err != nil {
		t.Errorf("Ready before any token = %v, want nil", err)
	}
	tok := sign(t, "RS256", "rsa", f.claims(nil))
	_, err = v.Verify(ctx, tok)
	wantReason(t, err, ErrIssuerUnavailable, ReasonIssuerUnavailable)
	if err := v.Ready(ctx); err == nil || !strings.HasPrefix(err.Error(), "issuer corp: key set fetch failing: ") {
		t.Errorf("Ready = %v, want issuer corp: key set fetch failing: ...", err)
	}
	f.idp.down.Store(false)
	_, err = v.Verify(ctx, tok) // within the refresh interval: not retried
	wantReason(t, err, ErrIssuerUnavailable, ReasonIssuerUnavailable)
	f.clock.Advance(testTuning.keyRefresh)
	if _, err := verifySoon(t, v, tok); err != nil {
		t.Errorf("Verify after the IdP came up: %v", err)
	}
	if err := v.Ready(ctx); err != nil {
		t.Errorf("Ready = %v, want nil", err)
	}
	if got := f.idp.discoveries.Load(); got != 0 {
		t.Errorf("%d discoveries, want 0", got)
	}
}

func TestNewVerifierErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(*config.Config)
		want string
	}{
		{"no audience", func(c *config.Config) { c.Server.PublicURL = ""; c.Auth.Issuers[0].Audiences = nil }, "no audiences"},
		{"HS256", func(c *config.Config) { c.Auth.Issuers[0].Algorithms = []string{"HS256"} }, `algorithm "HS256" not supported`},
		{"no tenant", func(c *config.Config) { c.Auth.Issuers[0].TenantClaim = "" }, "neither tenant_claim nor tenant"},
		{"duplicate", func(c *config.Config) { c.Auth.Issuers = append(c.Auth.Issuers, c.Auth.Issuers[0]) }, "configured twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{
				Server: config.Server{PublicURL: testPublicURL},
				Auth: config.Auth{Issuers: []config.Issuer{{
					Name: "corp", IssuerURL: "https://idp.example.com", TenantClaim: "tenant",
				}}},
			}
			tc.edit(cfg)
			_, err := NewVerifier(cfg, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDefaultsWhenUnset(t *testing.T) {
	cfg := &config.Config{
		Server: config.Server{PublicURL: testPublicURL},
		Auth:   config.Auth{Issuers: []config.Issuer{{Name: "corp", IssuerURL: "https://idp.example.com", Tenant: "acme"}}},
	}
	v, err := NewVerifier(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v.cache == nil || v.cache.max != DefaultTokenCacheSize {
		t.Error("cache not defaulted")
	}
	if len(v.order[0].algs) != 4 {
		t.Errorf("algorithms = %v, want the four defaults", v.order[0].algs)
	}
}

func TestTenantClaimLiteralKey(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Auth.Issuers[0].TenantClaim = "https://example.com/tenant" })
	tok := sign(t, "ES256", "ec", f.claims(func(c jwt.MapClaims) { c["https://example.com/tenant"] = "acme" }))
	p, err := f.v.Verify(t.Context(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tenant != "acme" {
		t.Errorf("tenant = %q, want acme", p.Tenant)
	}
}

func TestReason(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("x"), ReasonInternal},
		{invalid(ReasonExpired, nil), ReasonExpired},
		{fmt.Errorf("wrapped: %w", invalid(ReasonUnknownKey, errors.New("detail"))), ReasonUnknownKey},
		{unavailable(errors.New("down")), ReasonIssuerUnavailable},
		{fmt.Errorf("%w: custom", ErrInvalidToken), ReasonMalformed},
		{fmt.Errorf("%w: custom", ErrIssuerUnavailable), ReasonIssuerUnavailable},
	}
	for _, tc := range cases {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if got, want := invalid(ReasonExpired, nil).Error(), "invalid token: expired"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := unavailable(errors.New("down")).Error(), "token issuer unavailable: down"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
