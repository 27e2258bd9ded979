package credentials_test

// Regression tests: each failed against the first version of the package,
// on behaviour its documentation (or the RFCs it follows) promises. The
// comments describe the bug each one caught.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgw/gateway/internal/credentials"
)

// oauth.go: margin (min(30s, life/4)) puts the moment a token stops being
// used, expiry - life/4 = fetched + 0.75·life, exactly where the
// background refresh is due (fetched + refreshAt·life, refreshAt = 0.75).
// So for any token that lives 120 s or less the background branch of
// clientCredentials.token is never taken: past 75% of its life, every
// request waits for a foreground fetch instead of being served the old
// token while a new one is fetched.
func TestRegression_ClientCredentialsShortLivedNoBackgroundRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		as, hc := memAS()
		as.expiresIn = 100 // a 100 s token: 75 s of use, then 25 s to refresh it
		u := upstream(ccAuth(as))
		src := credentials.ForUpstream(config1(u), &u, credentials.Options{HTTPClient: hc})
		defer src.Close()
		start := time.Now()
		first := mustToken(t, context.Background(), src)
		sleepUntil(start, 76*time.Second) // 76% of its life, 24 s before expiry
		as.hold()
		defer as.open()
		got := make(chan string, 1)
		go func() { got <- mustToken(t, context.Background(), src) }()
		synctest.Wait()
		select {
		case tok := <-got:
			if tok != first {
				t.Errorf("got %q, want the old token while the new one is fetched", tok)
			}
		default:
			t.Errorf("at 76%% of a 100 s token's life (24 s before it expires), Apply waits for a new token instead of using the valid one and refreshing in the background")
			as.open()
			<-got
		}
	})
}

// exchange.go, exchange.Apply: the exchange runs under
// context.WithoutCancel(ctx) inside singleflight.Do, and Apply waits for it
// whatever becomes of the request: a request whose context ends (client
// gone, upstream timeout) stays blocked until the token endpoint answers or
// fetchTimeout (10 s) passes. clientCredentials.Apply returns at once when
// its context ends.
func TestRegression_TokenExchangeIgnoresContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		as, hc := memAS()
		as.delay = 5 * time.Second
		u := upstream(xAuth(as))
		src := credentials.ForUpstream(config1(u), &u, credentials.Options{HTTPClient: hc})
		defer src.Close()
		ctx, cancel := context.WithTimeout(ctxOf(caller("https://idp", "alice", "t1", aliceToken)), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := src.Apply(ctx, http.Header{})
		if took := time.Since(start); took > time.Second {
			t.Errorf("Apply returned %v after its context ended (deadline 100ms, took %v), with %v", took-100*time.Millisecond, took, err)
		}
	})
}

// exchange.go: "It must not send the caller's own token anywhere but to the
// authorization server that issued it" (package doc). exchange.Apply sends
// every caller's token to the configured token endpoint whatever issued
// it: with auth.issuer set, a caller whose token another issuer signed
// (a gateway trusting several issuers) has it sent to this one.
func TestRegression_TokenExchangeSendsTokenToAnotherIssuer(t *testing.T) {
	as := startAS(t)
	as.set(func(f *fakeAS) { f.asMeta = true })
	a := xAuth(as)
	a.TokenURL, a.Issuer = "", as.url
	src := source(t, config1(upstream(a)), credentials.Options{})
	const otherToken = "token-issued-by-other-idp"
	err := src.Apply(ctxOf(caller("https://other-idp.example", "alice", "t1", otherToken)), http.Header{})
	for _, r := range as.requests("/token") {
		if strings.Contains(r.Body, otherToken) {
			t.Errorf("the token of a caller of issuer https://other-idp.example was sent to the authorization server %s (Apply: %v)", as.url, err)
		}
	}
	if err == nil {
		t.Error("Apply succeeded for a caller of another issuer")
	}
}

// oauth.go, endpoint.url: RFC 8414 §3.1 puts the well-known path between
// the host and the issuer's path (https://as/.well-known/oauth-authorization-server/tenant1
// for issuer https://as/tenant1); the code appends it
// (https://as/tenant1/.well-known/oauth-authorization-server), which is
// only right for an issuer without a path. config.UpstreamAuth.Issuer
// promises discovery "RFC 8414, then OpenID Connect Discovery".
func TestRegression_DiscoveryIssuerWithPath(t *testing.T) {
	as := startAS(t)
	as.set(func(f *fakeAS) {
		f.metaIssuer = as.url + "/tenant1"
		f.metaAtPaths = map[string]bool{"/.well-known/oauth-authorization-server/tenant1": true}
	})
	a := ccAuth(as)
	a.TokenURL, a.Issuer = "", as.url+"/tenant1"
	src := source(t, config1(upstream(a)), credentials.Options{})
	if _, err := apply(context.Background(), src); err != nil {
		var paths []string
		for _, r := range as.requests("") {
			paths = append(paths, r.Path)
		}
		t.Errorf("issuer %s/tenant1 with RFC 8414 metadata at /.well-known/oauth-authorization-server/tenant1: %v (asked %q)", as.url, err, paths)
	}
}

// oauth.go, clientCredentials.token: a token that is already past its
// margin when it arrives (expires_in ≤ 0 from a broken server: the oauth2
// package makes its Expiry now + expires_in) is fetched again at once, in
// a loop that ends only with the request's context: every Apply hammers
// the token endpoint. The exchange treats expires_in ≤ 0 as 5 minutes.
func TestRegression_ClientCredentialsNonPositiveExpiresInLoops(t *testing.T) {
	as := startAS(t)
	as.set(func(f *fakeAS) { f.expiresIn = -60 })
	src := source(t, config1(upstream(ccAuth(as))), credentials.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := apply(ctx, src)
	src.Close()
	if n := as.tokenRequests(); n > 2 {
		t.Errorf("one Apply made %d token requests in 300ms (then: %v)", n, err)
	}
}

// credentials.go: "Secret is a string that does not print: fmt, slog and
// encoding/json see only that it is set." fmt calls String only for the
// verbs v, s, x, X and q, and only on values it may call methods on: other
// verbs print the struct's field, and so does %v of a Secret (or a Caller
// holding one) reached through an unexported struct field — fmt, and
// slog's text handler, which formats such values with %+v.
func TestRegression_SecretPrintedByFmt(t *testing.T) {
	s := credentials.NewSecret(hunter)
	type session struct {
		id     string
		caller credentials.Caller // by value, unexported
	}
	sess := session{id: "s1", caller: *caller("https://idp", "alice", "t1", hunter)}
	for _, tc := range []struct {
		format string
		arg    any
	}{
		{"%d", s},
		{"%t", s},
		{"%v", struct{ tok credentials.Secret }{s}},
		{"%+v", sess},
	} {
		if out := fmt.Sprintf(tc.format, tc.arg); strings.Contains(out, hunter) {
			t.Errorf("Sprintf(%q, %T) = %q shows the secret", tc.format, tc.arg, out)
		}
	}
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Info("session", "s", sess)
	if strings.Contains(b.String(), hunter) {
		t.Errorf("slog text handler shows the secret: %s", b.String())
	}
}
