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

const aliceToken = "eyJ.alice-access-token.sig"

func TestTokenExchangeRequest(t *testing.T) {
	for _, discovery := range []bool{false, true} {
		name := "token_url"
		if discovery {
			name = "issuer"
		}
		t.Run(name, func(t *testing.T) {
			as := startAS(t)
			a := xAuth(as)
			a.Scopes = []string{"files:read", "files:write"}
			a.Resource, a.Audience = "https://up.example/mcp", "up-api"
			if discovery {
				as.set(func(f *fakeAS) { f.asMeta = true })
				a.TokenURL, a.Issuer = "", as.url
			}
			var f fetches
			src := source(t, config1(upstream(a)), credentials.Options{OnFetch: f.on})
			c := caller(as.url, "alice", "t1", aliceToken, "openid", "mcp")
			h, err := apply(ctxOf(c), src)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if tok := bearer(t, h); !strings.HasPrefix(tok, "xt-"+tokenName(aliceToken)+"-") {
				t.Errorf("Authorization: Bearer %q, want alice's exchanged token", tok)
			}
			for k, vs := range h {
				for _, v := range vs {
					if strings.Contains(v, aliceToken) {
						t.Errorf("the caller's token is in header %s sent upstream", k)
					}
				}
			}
			reqs := as.requests("/token")
			if len(reqs) != 1 {
				t.Fatalf("%d token requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Client != gwClient || r.Secret != gwSecret {
				t.Errorf("Basic client %q/%q, want the configured client", r.Client, r.Secret)
			}
			want := map[string]string{
				"grant_type":           grantTokenExchange,
				"subject_token":        aliceToken,
				"subject_token_type":   tokenTypeAccessToken,
				"requested_token_type": tokenTypeAccessToken,
				"resource":             "https://up.example/mcp",
				"audience":             "up-api",
				"scope":                "files:read files:write",
			}
			for k, v := range want {
				if got := r.Form[k]; !slices.Equal(got, []string{v}) {
					t.Errorf("form %s = %q, want %q", k, got, v)
				}
			}
			if len(r.Form) != len(want) {
				t.Errorf("form %v has more than %v", r.Form, want)
			}
			// The caller's token went to the token endpoint, in the body,
			// and nowhere else.
			for _, s := range as.requests("") {
				in := strings.Contains(s.Body, aliceToken)
				for _, vs := range s.Header {
					if strings.Contains(strings.Join(vs, " "), aliceToken) {
						t.Errorf("%s %s carried the caller's token in a header", s.Method, s.Path)
					}
				}
				if in != (s.Path == "/token") {
					t.Errorf("%s %s: caller's token in body = %v", s.Method, s.Path, in)
				}
			}
			if got := f.list(); !slices.Equal(got, []string{"up/token_exchange/ok"}) {
				t.Errorf("OnFetch saw %q", got)
			}
		})
	}
}

func TestTokenExchangeOwnHeader(t *testing.T) {
	as := startAS(t)
	a := xAuth(as)
	a.Header = "X-Upstream-Token"
	src := source(t, config1(upstream(a)), credentials.Options{})
	h, err := apply(ctxOf(caller("iss", "alice", "t1", aliceToken)), src)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("X-Upstream-Token"); !strings.HasPrefix(got, "xt-") {
		t.Errorf("X-Upstream-Token = %q, want the token alone", got)
	}
	if got := h.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
}

func TestTokenExchangeCache(t *testing.T) {
	as := startAS(t)
	src := source(t, config1(upstream(xAuth(as))), credentials.Options{})
	alice := caller("https://idp", "alice", "t1", aliceToken, "a", "b")
	steps := []struct {
		name  string
		c     *credentials.Caller
		fetch bool
		same  int // index of the step whose token it gets, or -1
	}{
		{"alice", alice, true, -1},
		{"alice again", alice, false, 0},
		{"alice, another token", caller("https://idp", "alice", "t1", "alice-newer-token", "a", "b"), false, 0},
		{"bob", caller("https://idp", "bob", "t1", "bob-token", "a", "b"), true, -1},
		{"alice, other tenant", caller("https://idp", "alice", "t2", aliceToken, "a", "b"), true, -1},
		{"alice, other issuer", caller("https://idp2", "alice", "t1", aliceToken, "a", "b"), true, -1},
		{"alice, other scopes", caller("https://idp", "alice", "t1", aliceToken, "a"), true, -1},
		{"bob again", caller("https://idp", "bob", "t1", "bob-token", "a", "b"), false, 3},
		{"alice once more", alice, false, 0},
	}
	toks := make([]string, len(steps))
	for i, s := range steps {
		n := as.tokenRequests()
		toks[i] = mustToken(t, ctxOf(s.c), src)
		if fetched := as.tokenRequests() > n; fetched != s.fetch {
			t.Errorf("%s: fetched = %v, want %v", s.name, fetched, s.fetch)
		}
		if s.same >= 0 && toks[i] != toks[s.same] {
			t.Errorf("%s: token %q, want %q", s.name, toks[i], toks[s.same])
		}
		if s.same < 0 && slices.Contains(toks[:i], toks[i]) {
			t.Errorf("%s: token %q was another caller's", s.name, toks[i])
		}
	}
	// Invalidate forgets alice's token only.
	if !src.Invalidate(ctxOf(alice)) {
		t.Error("Invalidate = false")
	}
	n := as.tokenRequests()
	if tok := mustToken(t, ctxOf(alice), src); tok == toks[0] {
		t.Error("after Invalidate, alice's refused token again")
	}
	if tok := mustToken(t, ctxOf(steps[3].c), src); tok != toks[3] {
		t.Error("Invalidate for alice forgot bob's token")
	}
	if got := as.tokenRequests() - n; got != 1 {
		t.Errorf("%d fetches after Invalidate, want 1", got)
	}
}

func TestTokenExchangeConcurrentFetchOnce(t *testing.T) {
	as := startAS(t)
	as.set(func(f *fakeAS) { f.delay = 100 * time.Millisecond })
	src := source(t, config1(upstream(xAuth(as))), credentials.Options{})
	callers := []*credentials.Caller{
		caller("https://idp", "alice", "t1", aliceToken),
		caller("https://idp", "bob", "t1", "bob-token"),
	}
	const n = 50
	toks := make([][]string, len(callers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for ci, c := range callers {
		for range n {
			wg.Go(func() {
				h, err := apply(ctxOf(c), src)
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				mu.Lock()
				toks[ci] = append(toks[ci], h.Get("Authorization"))
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if got := as.tokenRequests(); got != len(callers) {
		t.Errorf("%d token requests for %d concurrent Applies of %d callers, want %d", got, n*len(callers), len(callers), len(callers))
	}
	for ci := range callers {
		if len(toks[ci]) != n || len(slices.Compact(slices.Clone(toks[ci]))) != 1 {
			t.Errorf("caller %d got %q, want one token %d times", ci, slices.Compact(slices.Clone(toks[ci])), n)
		}
	}
	if toks[0][0] == toks[1][0] {
		t.Error("alice and bob got the same token")
	}
}

func TestTokenExchangeNoCaller(t *testing.T) {
	as := startAS(t)
	src := source(t, config1(upstream(xAuth(as))), credentials.Options{})
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"no caller", context.Background()},
		{"nil caller", credentials.With(context.Background(), nil)},
		{"caller without a token", ctxOf(caller("https://idp", "alice", "t1", ""))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			err := src.Apply(tc.ctx, h)
			if !errors.Is(err, credentials.ErrNoCaller) {
				t.Fatalf("Apply: %v, want ErrNoCaller", err)
			}
			var ce *credentials.Error
			if !errors.As(err, &ce) || ce.Mode != credentials.ModeTokenExchange || ce.Upstream != "up" {
				t.Errorf("Apply: %#v, want a *credentials.Error of token_exchange for up", err)
			}
			if len(h) != 0 {
				t.Errorf("headers set: %v", h)
			}
		})
	}
	if got := len(as.requests("")); got != 0 {
		t.Errorf("%d requests to the authorization server without a caller", got)
	}
}

func TestTokenExchangeRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(f *fakeAS)
		secret   string
		wantMsgs []string
	}{
		{"subject refused", func(f *fakeAS) { f.refused[aliceToken] = true }, gwSecret,
			[]string{"HTTP 400", "invalid_grant", "may not be impersonated"}},
		{"client refused", nil, "wrong-" + gwSecret,
			[]string{"HTTP 401", "invalid_client"}},
		{"server error", func(f *fakeAS) { f.failStatus, f.failCode, f.failDesc = 500, "server_error", "oops" }, gwSecret,
			[]string{"HTTP 500", "server_error: oops"}},
		{"not a bearer token", func(f *fakeAS) { f.tokenType = "N_A" }, gwSecret,
			[]string{"not Bearer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := startAS(t)
			if tc.setup != nil {
				as.set(tc.setup)
			}
			a := xAuth(as)
			a.ClientSecret = tc.secret
			var f fetches
			src := source(t, config1(upstream(a)), credentials.Options{OnFetch: f.on})
			h := http.Header{}
			err := src.Apply(ctxOf(caller("https://idp", "alice", "t1", aliceToken)), h)
			var ce *credentials.Error
			if !errors.As(err, &ce) || ce.Mode != credentials.ModeTokenExchange {
				t.Fatalf("Apply: %v, want a *credentials.Error of token_exchange", err)
			}
			msg := err.Error()
			for _, want := range append([]string{"upstream up", "token_exchange"}, tc.wantMsgs...) {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			for _, secret := range []string{aliceToken, tc.secret, gwSecret, "xt-"} {
				if strings.Contains(msg, secret) {
					t.Errorf("message %q shows %q", msg, secret)
				}
			}
			if len(h) != 0 {
				t.Errorf("headers set on failure: %v", h)
			}
			if got := f.list(); !slices.Equal(got, []string{"up/token_exchange/error"}) {
				t.Errorf("OnFetch saw %q", got)
			}
			// Failures are not cached.
			_ = src.Apply(ctxOf(caller("https://idp", "alice", "t1", aliceToken)), h)
			if got := as.tokenRequests(); got != 2 {
				t.Errorf("%d token requests, want 2", got)
			}
		})
	}
}

func TestTokenExchangeExpiry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		expiresIn int // 0: left out, taken as 5 minutes
		reuseTill time.Duration
		refetchAt time.Duration
	}{
		{"two seconds", 2, 1700 * time.Millisecond, 1900 * time.Millisecond},
		{"one hour", 3600, 3569 * time.Second, 3571 * time.Second},
		{"no expires_in", 0, 269 * time.Second, 271 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				as, hc := memAS()
				as.expiresIn = tc.expiresIn
				u := upstream(xAuth(as))
				src := credentials.ForUpstream(config1(u), &u, credentials.Options{HTTPClient: hc})
				defer src.Close()
				ctx := ctxOf(caller("https://idp", "alice", "t1", aliceToken))
				start := time.Now()
				first := mustToken(t, ctx, src)
				sleepUntil(start, tc.reuseTill)
				if tok := mustToken(t, ctx, src); tok != first || as.tokenRequests() != 1 {
					t.Fatalf("at %v: %q after %d requests, want the first %q", tc.reuseTill, tok, as.tokenRequests(), first)
				}
				sleepUntil(start, tc.refetchAt)
				if tok := mustToken(t, ctx, src); tok == first || as.tokenRequests() != 2 {
					t.Fatalf("at %v: %q after %d requests, want a second token", tc.refetchAt, tok, as.tokenRequests())
				}
			})
		})
	}
}
