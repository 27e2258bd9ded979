package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgw/gateway/internal/config"
)

// Keys are made once: RSA key generation is slow.
var testKeys = sync.OnceValue(func() struct {
	rsa   *rsa.PrivateKey
	ec    *ecdsa.PrivateKey
	ed    ed25519.PrivateKey
	rogue *ecdsa.PrivateKey // in no key set
	next  *ecdsa.PrivateKey // published by rotate
} {
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	ec := mustEC()
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return struct {
		rsa   *rsa.PrivateKey
		ec    *ecdsa.PrivateKey
		ed    ed25519.PrivateKey
		rogue *ecdsa.PrivateKey
		next  *ecdsa.PrivateKey
	}{r, ec, ed, mustEC(), mustEC()}
})

func mustEC() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

// testIdP is an OpenID provider on 127.0.0.1 that serves discovery and a
// key set, counts requests and can be taken down.
type testIdP struct {
	srv         *httptest.Server
	URL         string
	jwks        atomic.Pointer[[]byte]
	jwksFetches atomic.Int64 // requests, answered or not
	discoveries atomic.Int64 // requests, answered or not
	down        atomic.Bool  // answer 503 to everything
}

func newTestIdP(t testing.TB) *testIdP {
	idp := &testIdP{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":   idp.URL,
			"jwks_uri": idp.URL + "/keys",
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*idp.jwks.Load())
	})
	idp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			idp.discoveries.Add(1)
		case "/keys":
			idp.jwksFetches.Add(1)
		}
		if idp.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(idp.srv.Close)
	idp.URL = idp.srv.URL
	k := testKeys()
	idp.publish(t, map[string]crypto.PublicKey{"rsa": &k.rsa.PublicKey, "ec": &k.ec.PublicKey, "ed": k.ed.Public()})
	return idp
}

// publish replaces the key set the IdP serves.
func (idp *testIdP) publish(t testing.TB, keys map[string]crypto.PublicKey) {
	var set []any
	for kid, pub := range keys {
		jwk, err := publicJWK(kid, "", pub)
		if err != nil {
			t.Fatal(err)
		}
		set = append(set, jwk)
	}
	b, err := json.Marshal(map[string]any{"keys": set})
	if err != nil {
		t.Fatal(err)
	}
	idp.jwks.Store(&b)
}

// sign returns a token with the given alg, kid and claims, signed with the
// test key for alg (ES256: the "ec" key).
func sign(t testing.TB, alg, kid string, claims jwt.MapClaims) string {
	k := testKeys()
	var key any
	method := jwt.GetSigningMethod(alg)
	switch alg {
	case "RS256", "PS256":
		key = k.rsa
	case "ES256":
		key = k.ec
	case "EdDSA":
		key = k.ed
	default:
		t.Fatalf("sign: no key for %s", alg)
	}
	return signWith(t, method, kid, key, claims)
}

func signWith(t testing.TB, method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_900_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// syncBuffer is a bytes.Buffer for loggers written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const (
	testPublicURL   = "https://mcp.example.com/mcp"
	testMetadataURL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
	testScope       = "mcp:tools"
)

var testTuning = tuning{
	keyRefresh:   10 * time.Second,
	backoffMin:   time.Second,
	backoffMax:   4 * time.Second,
	fetchTimeout: 5 * time.Second,
}

// fixture is a verifier trusting a test IdP as issuer "corp" (discovery,
// tenant in the dotted claim org.tenant), with a fake clock.
type fixture struct {
	idp   *testIdP
	clock *clock
	cfg   *config.Config
	v     *Verifier
	logs  *syncBuffer
}

func newFixture(t testing.TB, edit func(*config.Config)) *fixture {
	f := &fixture{idp: newTestIdP(t), clock: newClock(), logs: &syncBuffer{}}
	f.cfg = &config.Config{
		Server: config.Server{PublicURL: testPublicURL},
		Auth: config.Auth{
			Issuers: []config.Issuer{{
				Name:        "corp",
				IssuerURL:   f.idp.URL,
				Audiences:   []string{testPublicURL},
				TenantClaim: "org.tenant",
				Algorithms:  []string{"RS256", "PS256", "ES256", "EdDSA"},
			}},
			RequiredScopes: []string{testScope},
			Leeway:         config.Duration(30 * time.Second),
			TokenCacheSize: 100,
		},
	}
	if edit != nil {
		edit(f.cfg)
	}
	v, err := newVerifier(f.cfg, Options{
		Now:    f.clock.Now,
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, testTuning)
	if err != nil {
		t.Fatal(err)
	}
	f.v = v
	return f
}

// claims returns valid claims for the fixture's issuer, changed by edit.
func (f *fixture) claims(edit func(jwt.MapClaims)) jwt.MapClaims {
	now := f.clock.Now()
	c := jwt.MapClaims{
		"iss":       f.idp.URL,
		"sub":       "alice",
		"aud":       testPublicURL,
		"iat":       now.Unix(),
		"exp":       now.Add(5 * time.Minute).Unix(),
		"org":       map[string]any{"tenant": "acme"},
		"scope":     testScope + " profile",
		"client_id": "cli",
	}
	if edit != nil {
		edit(c)
	}
	return c
}

// issuer returns the fixture's only issuer.
func (f *fixture) issuer() *issuer { return f.v.order[0] }

// keySetCalls returns how often the issuer's key set was asked to verify a
// signature.
func (f *fixture) keySetCalls() int64 {
	is := f.issuer()
	is.mu.Lock()
	ks := is.keys
	is.mu.Unlock()
	if ks == nil {
		return 0
	}
	return ks.calls.Load()
}
