package auth

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgw/gateway/internal/config"
)

// benchMiddleware measures the middleware on an RS256 token, the common
// IdP default, with the principal handed to a no-op handler.
func benchMiddleware(b *testing.B, cacheSize int) {
	f := newFixture(b, func(c *config.Config) { c.Auth.TokenCacheSize = cacheSize })
	h := Middleware(f.v, MiddlewareOptions{
		ResourceMetadataURL: testMetadataURL,
		RequiredScopes:      []string{testScope},
		KnownTenant:         func(string) bool { return true },
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	tok := sign(b, "RS256", "rsa", f.claims(func(c jwt.MapClaims) { c["jti"] = fmt.Sprint(cacheSize) }))
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req) // discovery and key fetch
	if w.Code != 200 {
		b.Fatalf("status %d: %s", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("status %d", w.Code)
		}
	}
}

func BenchmarkMiddlewareCached(b *testing.B) { benchMiddleware(b, 100) }

// BenchmarkMiddlewareUncached checks the signature and claims on every
// request: the cache is disabled.
func BenchmarkMiddlewareUncached(b *testing.B) { benchMiddleware(b, -1) }
