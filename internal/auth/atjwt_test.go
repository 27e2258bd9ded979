package auth

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// signTyp signs the fixture's valid claims with ES256 and JOSE header typ
// (none if typ is "").
func signTyp(t testing.TB, f *fixture, typ string) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, f.claims(nil))
	tok.Header["kid"] = "ec"
	if typ == "" {
		delete(tok.Header, "typ")
	} else {
		tok.Header["typ"] = typ
	}
	s, err := tok.SignedString(testKeys().ec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var atJWTTypes = []string{"at+jwt", "AT+JWT", "At+Jwt", "application/at+jwt", "Application/AT+JWT"}
var otherTypes = []string{"", "JWT", "jwt", "application/jwt", "at+jwt+x", "application/", "application/JWT", "JOSE", "x/at+jwt", "at-jwt"}

// TestRequireATJWT: with require_at_jwt an issuer's tokens are accepted
// only with typ at+jwt (RFC 9068 §4), refused before any key is fetched;
// without it (the default) any typ is accepted.
func TestRequireATJWT(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Auth.Issuers[0].RequireATJWT = true })
	for _, typ := range otherTypes {
		_, err := f.v.Verify(t.Context(), signTyp(t, f, typ))
		wantReason(t, err, ErrInvalidToken, ReasonWrongTokenType)
	}
	if d, j := f.idp.discoveries.Load(), f.idp.jwksFetches.Load(); d+j != 0 {
		t.Errorf("%d discoveries and %d JWKS fetches for refused types, want none", d, j)
	}
	for _, typ := range atJWTTypes {
		if _, err := verifySoon(t, f.v, signTyp(t, f, typ)); err != nil {
			t.Errorf("typ %q: %v", typ, err)
		}
	}

	off := newFixture(t, nil)
	for _, typ := range append(otherTypes, atJWTTypes...) {
		if _, err := verifySoon(t, off.v, signTyp(t, off, typ)); err != nil {
			t.Errorf("without require_at_jwt, typ %q: %v", typ, err)
		}
	}
}

// TestRequireATJWTOverHTTP: the refusal is a 401 invalid_token like any
// other token failure, with its reason.
func TestRequireATJWTOverHTTP(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Auth.Issuers[0].RequireATJWT = true })
	var reasons []string
	srv := f.server(t, &reasons)
	get := func(tok string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, _ := get(signTyp(t, f, "JWT"))
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("typ JWT: status %d, want 401", resp.StatusCode)
	}
	if got, want := resp.Header.Get("WWW-Authenticate"), invalidChallenge(ReasonWrongTokenType); got != want {
		t.Errorf("challenge %q, want %q", got, want)
	}
	if len(reasons) != 1 || reasons[0] != ReasonWrongTokenType {
		t.Errorf("reasons %v", reasons)
	}
	// Retried for a moment: see verifySoon.
	var body string
	testkit.Poll(2*time.Second, func() bool {
		resp, body = get(signTyp(t, f, "at+jwt"))
		return resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != invalidChallenge(ReasonUnknownKey)
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("typ at+jwt: status %d %s (%s)", resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
	}
}
