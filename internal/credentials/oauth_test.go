package credentials_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgw/gateway/internal/credentials"
)

func TestClientCredentialsRequest(t *testing.T) {
	as := startAS(t)
	for _, tc := range []struct {
		name       string
		scopes     []string
		resource   string
		header     string
		wantHeader string
	}{
		{"plain", nil, "", "", "Authorization"},
		{"scopes and resource", []string{"read", "write"}, "https://up.example/mcp", "", "Authorization"},
		{"authorization, lower case", nil, "", "authorization", "Authorization"},
		{"own header", []string{"read"}, "", "X-Upstream-Token", "X-Upstream-Token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ccAuth(as)
			a.Scopes, a.Resource, a.Header = tc.scopes, tc.resource, tc.header
			var f fetches
			src := source(t, config1(upstream(a)), credentials.Options{OnFetch: f.on})
			n := as.tokenRequests()
			h, err := apply(context.Background(), src)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			reqs := as.requests("/token")[n:]
			if len(reqs) != 1 {
				t.Fatalf("%d token requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Client != gwClient || r.Secret != gwSecret {
				t.Errorf("Basic client %q/%q, want the configured client", r.Client, r.Secret)
			}
			if r.Form.Get("client_secret") != "" || r.Form.Get("client_id") != "" {
				t.Errorf("client credentials in the form too: %v", r.Form)
			}
			if got := r.Form.Get("grant_type"); got != grantClientCredentials {
				t.Errorf("grant_type = %q", got)
			}
			if got, want := r.Form.Get("scope"), strings.Join(tc.scopes, " "); got != want {
				t.Errorf("scope = %q, want %q", got, want)
			}
			if got := r.Form["resource"]; tc.resource == "" && got != nil || tc.resource != "" && !slices.Equal(got, []string{tc.resource}) {
				t.Errorf("resource = %q, want %q", got, tc.resource)
			}
			var tok string
			if tc.wantHeader == "Authorization" {
				tok = bearer(t, h)
			} else {
				tok = h.Get(tc.wantHeader)
				if h.Get("Authorization") != "" {
					t.Errorf("Authorization set too: %q", h.Get("Authorization"))
				}
			}
			if !strings.HasPrefix(tok, "cc-gateway-") {
				t.Errorf("%s = %q, want the token alone", tc.wantHeader, tok)
			}
			if got := h.Get("X-Api-Key"); got != "shared-key" {
				t.Errorf("the upstream's static header became %q", got)
			}
			if got := f.list(); !slices.Equal(got, []string{"up/client_credentials/ok"}) {
				t.Errorf("OnFetch saw %q", got)
			}
			if p := src.Partition(caller("i", "s", "t", "x")); p != "" {
				t.Errorf("Partition = %q, want \"\" (one token for all)", p)
			}
		})
	}
}

// TestClientCredentialsConcurrentFetchOnce runs in a synctest bubble, so
// that synctest.Wait tells when every Apply waits for the one fetch.
func TestClientCredentialsConcurrentFetchOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		as, hc := memAS()
		as.hold()
		defer as.open()
		u := upstream(ccAuth(as))
		src := credentials.ForUpstream(config1(u), &u, credentials.Options{HTTPClient: hc})
		defer src.Close()
		const n = 50
		var done sync.WaitGroup
		toks := make([]string, n)
		errs := make([]error, n)
		for i := range n {
			done.Go(func() {
				ctx := ctxOf(caller("iss", "sub", "t", "tok"))
				h, err := apply(ctx, src)
				errs[i] = err
				toks[i] = h.Get("Authorization")
			})
		}
		// Every goroutine is blocked: the fetch at the server's gate, the
		// Applies waiting for it.
		synctest.Wait()
		if got := as.waiting(); got != 1 {
			t.Fatalf("%d token requests held, want 1", got)
		}
		as.open()
		done.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Apply %d: %v", i, errs[i])
			}
			if toks[i] != toks[0] || toks[i] == "" {
				t.Fatalf("Apply %d set %q, Apply 0 %q", i, toks[i], toks[0])
			}
		}
		if got := as.tokenRequests(); got != 1 {
			t.Errorf("%d token requests for %d concurrent Applies, want 1", got, n)
		}
	})
}

// The tests below run in a synctest bubble: time is fake, and the
// authorization server is reached without a network.

func TestClientCredentialsReusedUntilNearExpiry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		expiresIn int
		reuseTill time.Duration // last moment the first token is still used
		refetchAt time.Duration // first moment a new one is fetched
	}{
		// Margin: 30 s before expiry.
		{"one hour", 3600, 2699 * time.Second, 3571 * time.Second},
		// Margin: a quarter of its life.
		// A short-lived token is used until a tenth of its life is left
		// (at most 30 s), after the background refresh had its chance at
		// three quarters (no call came then, here).
		{"two seconds", 2, 1400 * time.Millisecond, 1900 * time.Millisecond},
		{"forty seconds", 40, 29 * time.Second, 37 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				as, hc := memAS()
				as.expiresIn = tc.expiresIn
				u := upstream(ccAuth(as))
				src := credentials.ForUpstream(config1(u), &u, credentials.Options{HTTPClient: hc})
				defer src.Close()
				ctx := context.Background()
				start := time.Now()
				first := mustToken(t, ctx, src)
				sleepUntil(start, time.Second)
				if tok := mustToken(t, ctx, src); tok != first {
					t.Fatalf("at 1s: token %q, want the first %q", tok, first)
				}
				sleepUntil(start, tc.reuseTill)
				if tok := mustToken(t, ctx, src); tok != first {
					t.Fatalf("at %v: token %q, want the first %q", tc.reuseTill, tok, first)
				}
				synctest.Wait()
				if got := as.tokenRequests(); got != 1 {
					t.Fatalf("at %v: %d token requests, want 1", tc.reuseTill, got)
				}
				sleepUntil(start, tc.refetchAt)
				second := mustToken(t, ctx, src)
				if second == first {
					t.Fatalf("at %v: still the first token, past its margin", tc.refetchAt)
				}
				if got := as.tokenRequests(); got != 2 {
					t.Fatalf("%d token requests, want 2", got)
				}
				if tok := mustToken(t, ctx, src); tok != second {
					t.Fatalf("then %q, want the second %q", tok, second)
				}
			})
		})
	}
}

// sleepUntil sleeps until d after start.
func sleepUntil(start time.Time, d time.Duration) { time.Sleep(time.Until(start.Add(d))) }

func TestClientCredentialsBackgroundRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		as, hc := memAS()
		as.expiresIn = 3600
		var f fetches
		u := upstream(ccAuth(as))
		src := credentials.ForUpstream(config1(u), &u, credentials.Options{HTTPClient: hc, OnFetch: f.on})
		defer src.Close()
		ctx := context.Background()
		start := time.Now()
		first := mustToken(t, ctx, src)

		// 75% of its life (2700 s) passed: the next Apply still gets it,
		// at once, and one fetch starts in the background.
		sleepUntil(start, 2701*time.Second)
		as.hold()
		defer as.open()
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if tok := mustToken(t, ctx, src); tok != first {
					t.Errorf("during the refresh: %q, want the old %q", tok, first)
				}
			})
		}
		wg.Wait() // none waited for the held fetch
		synctest.Wait()
		if got, w := as.tokenRequests(), as.waiting(); got != 2 || w != 1 {
			t.Fatalf("%d token requests (%d waiting), want 2 (1): one background fetch", got, w)
		}
		as.open()
		synctest.Wait()
		second := mustToken(t, ctx, src)
		if second == first {
			t.Fatal("after the background fetch, still the old token")
		}
		if got := as.tokenRequests(); got != 2 {
			t.Errorf("%d token requests, want 2", got)
		}
		if got := f.list(); len(got) != 2 {
			t.Errorf("OnFetch saw %q, want two fetches", got)
		}
		// The new token has its own life: no refresh before 75% of it.
		sleepUntil(start, 2701*time.Second+2600*time.Second)
		if tok := mustToken(t, ctx, src); tok != second {
			t.Errorf("later: %q, want %q", tok, second)
		}
		synctest.Wait()
		if got := as.tokenRequests(); got != 2 {
			t.Errorf("%d token requests, want still 2", got)
		}
	})
}

// A failed background refresh leaves the old token in use; the next
// request after it tries again.
func TestClientCredentialsBackgroundRefreshFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		as, hc := memAS()
		u := upstream(ccAuth(as))
		src := credentials.ForUpstream(config1(u), &u, credentials.Options{HTTPClient: hc})
		defer src.Close()
		ctx := context.Background()
		start := time.Now()
		first := mustToken(t, ctx, src)
		as.set(func(as *fakeAS) { as.failStatus, as.failCode = 503, "temporarily_unavailable" })
		sleepUntil(start, 2701*time.Second)
		if tok := mustToken(t, ctx, src); tok != first {
			t.Fatalf("got %q, want the old token", tok)
		}
		synctest.Wait()
		as.set(func(as *fakeAS) { as.failStatus = 0 })
		if tok := mustToken(t, ctx, src); tok != first {
			t.Fatalf("got %q, want the old token while the new one is fetched", tok)
		}
		synctest.Wait()
		if got := as.tokenRequests(); got != 3 {
			t.Errorf("%d token requests, want 3", got)
		}
		if tok := mustToken(t, ctx, src); tok == first {
			t.Error("still the old token after a successful refresh")
		}
	})
}

func TestClientCredentialsInvalidate(t *testing.T) {
	as := startAS(t)
	src := source(t, config1(upstream(ccAuth(as))), credentials.Options{})
	ctx := context.Background()
	first := mustToken(t, ctx, src)
	if tok := mustToken(t, ctx, src); tok != first {
		t.Fatalf("second Apply: %q, want the cached %q", tok, first)
	}
	if !src.Invalidate(ctx) {
		t.Fatal("Invalidate = false: another attempt may get another token")
	}
	second := mustToken(t, ctx, src)
	if second == first {
		t.Fatal("after Invalidate, the refused token again")
	}
	if got := as.tokenRequests(); got != 2 {
		t.Errorf("%d token requests, want 2", got)
	}
}

func TestClientCredentialsDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name      string
		as, oidc  bool
		issuer    string // the metadata's, "" for the server's own
		trailing  bool   // configure the issuer with a trailing slash
		wantErr   string
		wantPaths []string
	}{
		{name: "RFC 8414", as: true, oidc: true,
			wantPaths: []string{"/.well-known/oauth-authorization-server", "/token"}},
		{name: "OpenID fallback", oidc: true,
			wantPaths: []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration", "/token"}},
		{name: "trailing slash", as: true, trailing: true,
			wantPaths: []string{"/.well-known/oauth-authorization-server", "/token"}},
		{name: "no metadata", wantErr: "no authorization server metadata",
			wantPaths: []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"}},
		{name: "another issuer", as: true, oidc: true, issuer: "https://evil.example", wantErr: "another issuer",
			wantPaths: []string{"/.well-known/oauth-authorization-server"}},
		{name: "another issuer, OpenID", oidc: true, issuer: "https://evil.example", wantErr: "another issuer",
			wantPaths: []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := startAS(t)
			as.set(func(f *fakeAS) { f.asMeta, f.oidcMeta, f.metaIssuer = tc.as, tc.oidc, tc.issuer })
			a := ccAuth(as)
			a.TokenURL, a.Issuer = "", as.url
			if tc.trailing {
				a.Issuer += "/"
			}
			src := source(t, config1(upstream(a)), credentials.Options{})
			ctx := context.Background()
			_, err := apply(ctx, src)
			var paths []string
			for _, r := range as.requests("") {
				paths = append(paths, r.Path)
			}
			if !slices.Equal(paths, tc.wantPaths) {
				t.Errorf("requests %q, want %q", paths, tc.wantPaths)
			}
			if tc.wantErr != "" {
				var ce *credentials.Error
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Apply: %v, want a *credentials.Error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			// The endpoint is found once.
			src.Invalidate(ctx)
			if _, err := apply(ctx, src); err != nil {
				t.Fatal(err)
			}
			if got := len(as.requests("")); got != len(tc.wantPaths)+1 {
				t.Errorf("%d requests after a second fetch, want %d: discovery again", got, len(tc.wantPaths)+1)
			}
		})
	}
}

// A discovery that failed is tried again by the next request.
func TestClientCredentialsDiscoveryRetried(t *testing.T) {
	as := startAS(t)
	a := ccAuth(as)
	a.TokenURL, a.Issuer = "", as.url
	src := source(t, config1(upstream(a)), credentials.Options{})
	if _, err := apply(context.Background(), src); err == nil {
		t.Fatal("Apply without metadata succeeded")
	}
	as.set(func(f *fakeAS) { f.asMeta = true })
	if _, err := apply(context.Background(), src); err != nil {
		t.Fatalf("Apply once the metadata is there: %v", err)
	}
}

func TestClientCredentialsError(t *testing.T) {
	for _, tc := range []struct {
		name     string
		secret   string // the configured one
		fail     bool
		wantCode string
	}{
		{"wrong secret", "not-the-" + gwSecret, false, "invalid_client"},
		{"server refuses", gwSecret, true, "invalid_client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := startAS(t)
			if tc.fail {
				as.set(func(f *fakeAS) {
					f.failStatus, f.failCode, f.failDesc = 401, "invalid_client", "the client is disabled"
				})
			}
			a := ccAuth(as)
			a.ClientSecret = tc.secret
			var f fetches
			src := source(t, config1(upstream(a)), credentials.Options{OnFetch: f.on})
			h := http.Header{}
			err := src.Apply(context.Background(), h)
			var ce *credentials.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Apply: %v (%T), want a *credentials.Error", err, err)
			}
			if ce.Upstream != "up" || ce.Mode != credentials.ModeClientCredentials {
				t.Errorf("Error{Upstream: %q, Mode: %q}", ce.Upstream, ce.Mode)
			}
			msg := err.Error()
			for _, want := range []string{"upstream up", "client_credentials", tc.wantCode, "401"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			for _, secret := range []string{tc.secret, gwSecret, "s3cr3t"} {
				if strings.Contains(msg, secret) {
					t.Errorf("message %q shows the secret", msg)
				}
			}
			if len(h) != 0 {
				t.Errorf("headers set on failure: %v", h)
			}
			if got := f.list(); !slices.Equal(got, []string{"up/client_credentials/error"}) {
				t.Errorf("OnFetch saw %q", got)
			}
			// Not remembered: the next request tries again.
			as.set(func(f *fakeAS) { f.failStatus = 0 })
			_ = src.Apply(context.Background(), h)
			if got := as.tokenRequests(); got != 2 {
				t.Errorf("%d token requests, want 2: an error is not cached", got)
			}
		})
	}
}

// A request gives up waiting when its context ends; the fetch goes on, and
// Close waits for it.
func TestClientCredentialsCloseWaits(t *testing.T) {
	as := startAS(t)
	as.hold()
	defer as.open()
	var f fetches
	u := upstream(ccAuth(as))
	src := credentials.ForUpstream(config1(u), &u, credentials.Options{OnFetch: f.on})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := src.Apply(ctx, http.Header{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Apply: %v, want the context's deadline", err)
	}
	closed := make(chan struct{})
	go func() {
		src.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a fetch was in progress")
	case <-time.After(100 * time.Millisecond):
	}
	as.open()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the fetch ended")
	}
	if got := f.list(); !slices.Equal(got, []string{"up/client_credentials/ok"}) {
		t.Errorf("OnFetch saw %q by the time Close returned", got)
	}
}
