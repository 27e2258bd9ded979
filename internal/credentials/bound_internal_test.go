package credentials

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
)

// exchangeHandler grants every exchange a one-hour token and counts them.
type exchangeHandler struct{ n atomic.Int64 }

func (x *exchangeHandler) RoundTrip(r *http.Request) (*http.Response, error) {
	defer r.Body.Close()
	n := x.n.Add(1)
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(rec, `{"access_token":"xt-%d","token_type":"Bearer","expires_in":3600,"issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}`, n)
	return rec.Result(), nil
}

// The exchanged tokens kept stay within maxExchanged however many callers
// come, the latest stay, and the earliest go first.
func TestExchangeCacheBounded(t *testing.T) {
	as := &exchangeHandler{}
	x := newExchange(&config.Upstream{Name: "up", URL: "https://up.example/mcp"},
		&config.UpstreamAuth{Mode: config.AuthTokenExchange, TokenURL: "http://as.test/token", ClientID: "gw", ClientSecret: "s"},
		Options{HTTPClient: &http.Client{Transport: as}})
	ctxFor := func(i int) context.Context {
		return With(context.Background(), &Caller{Issuer: "https://idp", Subject: fmt.Sprintf("user-%d", i), Tenant: "t", Token: NewSecret(fmt.Sprintf("tok-%d", i))})
	}
	const callers = maxExchanged + 50
	maxLen := 0
	h := http.Header{}
	for i := range callers {
		if err := x.Apply(ctxFor(i), h); err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		x.mu.Lock()
		maxLen = max(maxLen, len(x.cache))
		x.mu.Unlock()
	}
	if got := as.n.Load(); got != callers {
		t.Fatalf("%d exchanges for %d callers", got, callers)
	}
	x.mu.Lock()
	n := len(x.cache)
	x.mu.Unlock()
	t.Logf("after %d callers: %d tokens kept, at most %d", callers, n, maxLen)
	if maxLen > maxExchanged || n == 0 {
		t.Fatalf("cache held up to %d tokens (now %d), bound %d", maxLen, n, maxExchanged)
	}
	// The latest callers are served from the cache, the first ones were
	// dropped (their tokens expire first).
	before := as.n.Load()
	if err := x.Apply(ctxFor(callers-1), h); err != nil {
		t.Fatal(err)
	}
	if as.n.Load() != before {
		t.Error("the latest caller's token was dropped")
	}
	if err := x.Apply(ctxFor(0), h); err != nil {
		t.Fatal(err)
	}
	if as.n.Load() != before+1 {
		t.Error("the first caller's token was kept over later ones")
	}
	if !strings.HasPrefix(h.Get("Authorization"), "Bearer xt-") {
		t.Errorf("Authorization = %q", h.Get("Authorization"))
	}
}
