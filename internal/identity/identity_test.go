package identity

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const testIssuer = "https://gw.example.com"

// clock is a settable time for Options.Now.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock { c := &clock{}; c.set(t); return c }
func (c *clock) set(t time.Time)  { c.ns.Store(t.UnixNano()) }
func (c *clock) add(d time.Duration) {
	c.ns.Add(int64(d))
}
func (c *clock) now() time.Time { return time.Unix(0, c.ns.Load()) }

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// publicKeys parses a JWKS document into kid → public key, checking the
// members a verifier relies on.
func publicKeys(t testing.TB, doc []byte) map[string]crypto.PublicKey {
	t.Helper()
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatalf("JWKS %s: %v", doc, err)
	}
	dec := func(s string) []byte {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("JWKS member %q: %v", s, err)
		}
		return b
	}
	keys := make(map[string]crypto.PublicKey)
	for _, k := range set.Keys {
		if k["use"] != "sig" || k["kid"] == "" {
			t.Fatalf("JWK %v: want use sig and a kid", k)
		}
		if _, ok := k["d"]; ok {
			t.Fatalf("JWK %v holds a private member", k)
		}
		switch k["kty"] {
		case "EC":
			if k["crv"] != "P-256" || k["alg"] != "ES256" {
				t.Fatalf("EC JWK %v: want crv P-256, alg ES256", k)
			}
			x, y := dec(k["x"]), dec(k["y"])
			if len(x) != 32 || len(y) != 32 {
				t.Fatalf("EC JWK %v: coordinates not 32 bytes", k)
			}
			pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
			if err != nil {
				t.Fatalf("EC JWK %v: %v", k, err)
			}
			keys[k["kid"]] = pub
		case "RSA":
			if k["alg"] != "RS256" {
				t.Fatalf("RSA JWK %v: want alg RS256", k)
			}
			keys[k["kid"]] = &rsa.PublicKey{N: new(big.Int).SetBytes(dec(k["n"])), E: int(new(big.Int).SetBytes(dec(k["e"])).Int64())}
		default:
			t.Fatalf("JWK %v: unexpected kty", k)
		}
	}
	return keys
}

// verify checks tok against the key set the way an upstream would and
// returns its claims and header.
func verify(t testing.TB, tok string, jwks []byte, audience string, now time.Time) (jwt.MapClaims, map[string]any) {
	t.Helper()
	keys := publicKeys(t, jwks)
	parsed, err := jwt.Parse(tok, func(tk *jwt.Token) (any, error) {
		kid, _ := tk.Header["kid"].(string)
		k, ok := keys[kid]
		if !ok {
			return nil, fmt.Errorf("unknown kid %q", kid)
		}
		return k, nil
	},
		jwt.WithValidMethods([]string{"ES256", "RS256"}),
		jwt.WithIssuer(testIssuer),
		jwt.WithAudience(audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(func() time.Time { return now }),
	)
	if err != nil {
		t.Fatalf("token does not verify: %v", err)
	}
	if typ := parsed.Header["typ"]; typ != TokenType {
		t.Fatalf("typ = %v, want %s", typ, TokenType)
	}
	return parsed.Claims.(jwt.MapClaims), parsed.Header
}

func TestGeneratedKey(t *testing.T) {
	clk := newClock(t0.Add(300 * time.Millisecond))
	s, err := NewSigner(Options{Issuer: testIssuer, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	if s.TTL() != DefaultTTL {
		t.Fatalf("TTL = %v, want %v", s.TTL(), DefaultTTL)
	}
	tok, exp, err := s.Token("alice", "acme", []string{"tools:write", "tools:read", "tools:write"}, "https://up.example.com/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(DefaultTTL); !exp.Equal(want) {
		t.Fatalf("expiry = %v, want %v (iat truncated to the second, plus the TTL)", exp, want)
	}
	claims, header := verify(t, tok, s.JWKS(), "https://up.example.com/mcp", clk.now())
	if header["kid"] != s.KeyIDs()[0] || header["alg"] != "ES256" {
		t.Fatalf("header = %v, want kid %s and alg ES256", header, s.KeyIDs()[0])
	}
	want := map[string]any{
		"iss": testIssuer, "sub": "alice", "aud": "https://up.example.com/mcp", "tenant": "acme",
		"scope": "tools:read tools:write", "client_id": ClientID,
		"iat": float64(t0.Unix()), "nbf": float64(t0.Unix()), "exp": float64(t0.Add(DefaultTTL).Unix()),
	}
	for k, v := range want {
		if claims[k] != v {
			t.Errorf("claim %s = %#v, want %#v", k, claims[k], v)
		}
	}
	jti, _ := claims["jti"].(string)
	if b, err := hex.DecodeString(jti); err != nil || len(b) != 16 {
		t.Errorf("jti = %q, want 32 hex digits", jti)
	}
	if len(claims) != len(want)+1 {
		t.Errorf("claims = %v, want exactly %d", claims, len(want)+1)
	}
	// A second token differs by its jti.
	tok2, _, _ := s.Token("alice", "acme", nil, "https://up.example.com/mcp")
	c2, _ := verify(t, tok2, s.JWKS(), "https://up.example.com/mcp", clk.now())
	if c2["jti"] == jti {
		t.Error("two tokens share a jti")
	}
	if _, ok := c2["scope"]; ok {
		t.Error("scope present without scopes")
	}
	// Expired after the TTL.
	keys := publicKeys(t, s.JWKS())
	_, err = jwt.Parse(tok, func(*jwt.Token) (any, error) { return keys[s.KeyIDs()[0]], nil },
		jwt.WithTimeFunc(func() time.Time { return exp.Add(time.Second) }))
	if err == nil {
		t.Error("token still valid after its expiry")
	}
	// Another generated Signer has another key.
	s2, err := NewSigner(Options{Issuer: testIssuer})
	if err != nil {
		t.Fatal(err)
	}
	if s2.KeyIDs()[0] == s.KeyIDs()[0] {
		t.Error("two generated signers share a key")
	}
}

func TestTTL(t *testing.T) {
	clk := newClock(t0)
	s, err := NewSigner(Options{Issuer: testIssuer, TTL: 30 * time.Second, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	tok, exp, err := s.Token("bob", "acme", nil, "up")
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("expiry = %v, want %v", exp, t0.Add(30*time.Second))
	}
	c, _ := verify(t, tok, s.JWKS(), "up", t0)
	if c["exp"] != float64(exp.Unix()) {
		t.Fatalf("exp = %v, want %v", c["exp"], exp.Unix())
	}
	for _, ttl := range []time.Duration{-time.Second, time.Second, 9 * time.Second, 61 * time.Minute} {
		if _, err := NewSigner(Options{Issuer: testIssuer, TTL: ttl}); err == nil {
			t.Errorf("TTL %v accepted", ttl)
		}
	}
	for _, ttl := range []time.Duration{MinTTL, MaxTTL} {
		if _, err := NewSigner(Options{Issuer: testIssuer, TTL: ttl}); err != nil {
			t.Errorf("TTL %v refused: %v", ttl, err)
		}
	}
}

func TestIssuer(t *testing.T) {
	for _, iss := range []string{"", "gw.example.com", "ftp://gw.example.com", "https://", "https://u:p@gw.example.com", "https://gw.example.com/#x", "https://gw.example.com/?a=b", "://x"} {
		if _, err := NewSigner(Options{Issuer: iss}); err == nil {
			t.Errorf("issuer %q accepted", iss)
		}
	}
	for _, iss := range []string{"https://gw.example.com", "https://gw.example.com/", "http://localhost:8080/base"} {
		if _, err := NewSigner(Options{Issuer: iss}); err != nil {
			t.Errorf("issuer %q refused: %v", iss, err)
		}
	}
}

func TestInputs(t *testing.T) {
	s, err := NewSigner(Options{Issuer: testIssuer})
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		sub, tenant string
		scopes      []string
		aud         string
	}{
		{"", "t", nil, "a"},
		{"s", "", nil, "a"},
		{"s", "t", nil, ""},
		{"s\xff", "t", nil, "a"},
		{"s", "t\xfe", nil, "a"},
		{"s", "t", nil, "a\xff"},
		{"s", "t", []string{""}, "a"},
		{"s", "t", []string{"a b"}, "a"},
		{"s", "t", []string{"a\tb"}, "a"},
		{"s", "t", []string{"x", "a\nb"}, "a"},
		{"s", "t", []string{"\xff"}, "a"},
		{strings.Repeat("s", MaxTokenBytes), "t", nil, "a"},
	}
	for _, b := range bad {
		if _, _, err := s.Token(b.sub, b.tenant, b.scopes, b.aud); err == nil {
			t.Errorf("Token(%q, %q, %q, %q) accepted", b.sub, b.tenant, b.scopes, b.aud)
		}
		if _, err := s.Cached(b.sub, b.tenant, b.scopes, b.aud); err == nil {
			t.Errorf("Cached(%q, %q, %q, %q) accepted", b.sub, b.tenant, b.scopes, b.aud)
		}
	}
	if n := s.cache.len(); n != 0 {
		t.Errorf("refused inputs left %d cache entries", n)
	}
	// Quotes, backslashes and non-ASCII are fine: JSON escapes them.
	tok, _, err := s.Token(`a"b\c`, "tén", []string{`x"y`, "é"}, "up")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := verify(t, tok, s.JWKS(), "up", time.Now())
	if c["sub"] != `a"b\c` || c["tenant"] != "tén" || c["scope"] != `x"y é` {
		t.Errorf("claims = %v", c)
	}
}

// writePEM writes blocks to a file in dir and returns its path.
func writePEM(t testing.TB, dir, name string, blocks ...*pem.Block) string {
	t.Helper()
	var b bytes.Buffer
	for _, blk := range blocks {
		if err := pem.Encode(&b, blk); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func pkcs8(t testing.TB, k crypto.PrivateKey) *pem.Block {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return &pem.Block{Type: "PRIVATE KEY", Bytes: der}
}

func sec1(t testing.TB, k *ecdsa.PrivateKey) *pem.Block {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
}

func ecKey(t testing.TB, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	rsaOnce sync.Once
	rsa2048 *rsa.PrivateKey
)

// rsaKey returns one 2048-bit key for the whole test binary: generating
// them is slow.
func rsaKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	rsaOnce.Do(func() {
		var err error
		if rsa2048, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	return rsa2048
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	ec := ecKey(t, elliptic.P256())
	rk := rsaKey(t)
	ecParams := &pem.Block{Type: "EC PARAMETERS", Bytes: []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}}
	cases := []struct {
		name, alg string
		file      string
	}{
		{"ec-pkcs8", "ES256", writePEM(t, dir, "ec-pkcs8.pem", pkcs8(t, ec))},
		{"ec-sec1", "ES256", writePEM(t, dir, "ec-sec1.pem", sec1(t, ec))},
		{"ec-sec1-params", "ES256", writePEM(t, dir, "ec-sec1-params.pem", ecParams, sec1(t, ec))},
		{"rsa-pkcs1", "RS256", writePEM(t, dir, "rsa-pkcs1.pem", &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)})},
		{"rsa-pkcs8", "RS256", writePEM(t, dir, "rsa-pkcs8.pem", pkcs8(t, rk))},
	}
	kids := map[string]string{} // alg → kid: the same key in any format has the same kid
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSigner(Options{Issuer: testIssuer, KeyFiles: []string{c.file}})
			if err != nil {
				t.Fatal(err)
			}
			tok, _, err := s.Token("alice", "acme", []string{"r"}, "up")
			if err != nil {
				t.Fatal(err)
			}
			_, h := verify(t, tok, s.JWKS(), "up", time.Now())
			if h["alg"] != c.alg {
				t.Fatalf("alg = %v, want %s", h["alg"], c.alg)
			}
			kid := s.KeyIDs()[0]
			if prev, ok := kids[c.alg]; ok && prev != kid {
				t.Fatalf("kid %s, but %s for the same key in another format", kid, prev)
			}
			kids[c.alg] = kid
		})
	}
}

func TestRFC7638Thumbprint(t *testing.T) {
	// RFC 7638 §3.1.
	j := jwk{Kty: "RSA", E: "AQAB", N: "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"}
	if got, want := thumbprint(j), "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"; got != want {
		t.Fatalf("thumbprint = %s, want %s", got, want)
	}
}

func TestRefusedKeys(t *testing.T) {
	dir := t.TempDir()
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384 := ecKey(t, elliptic.P384())
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p256 := ecKey(t, elliptic.P256())
	good := writePEM(t, dir, "good.pem", pkcs8(t, p256))
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a key at all"), 0o600)
	cases := []struct {
		name, file, want string
	}{
		{"p384-pkcs8", writePEM(t, dir, "p384-pkcs8.pem", pkcs8(t, p384)), "P-384"},
		{"p384-sec1", writePEM(t, dir, "p384-sec1.pem", sec1(t, p384)), "P-384"},
		{"rsa1024", writePEM(t, dir, "rsa1024.pem", &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)}), "1024 bits"},
		{"ed25519", writePEM(t, dir, "ed25519.pem", pkcs8(t, ed)), "Ed25519"},
		{"encrypted", writePEM(t, dir, "enc.pem", &pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2, 3}}), "encrypted"},
		{"legacy-encrypted", writePEM(t, dir, "legacy.pem", &pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte{1}}), "encrypted"},
		{"two-keys", writePEM(t, dir, "two.pem", pkcs8(t, p256), pkcs8(t, p256)), "more than one"},
		{"corrupt", writePEM(t, dir, "corrupt.pem", &pem.Block{Type: "PRIVATE KEY", Bytes: []byte("0123456789abcdef")}), "not a valid"},
		{"public-only", writePEM(t, dir, "pub.pem", &pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1}}), "no PEM private key"},
		{"garbage", garbage, "no PEM private key"},
		{"missing", filepath.Join(dir, "missing.pem"), "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewSigner(Options{Issuer: testIssuer, KeyFiles: []string{good, c.file}})
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.file) || !strings.Contains(msg, c.want) {
				t.Fatalf("error %q: want it to name %s and say %q", msg, c.file, c.want)
			}
			// Never the contents: no line of the file's base64 body.
			data, _ := os.ReadFile(c.file)
			for line := range strings.Lines(string(data)) {
				line = strings.TrimSpace(line)
				if len(line) >= 8 && !strings.HasPrefix(line, "-----") && !strings.Contains(line, ":") && strings.Contains(msg, line) {
					t.Fatalf("error %q quotes the file", msg)
				}
			}
		})
	}
	t.Run("duplicate", func(t *testing.T) {
		again := writePEM(t, dir, "again.pem", sec1(t, p256))
		_, err := NewSigner(Options{Issuer: testIssuer, KeyFiles: []string{good, again}})
		if err == nil || !strings.Contains(err.Error(), again) || !strings.Contains(err.Error(), "same key") {
			t.Fatalf("err = %v, want the same key refused", err)
		}
	})
	t.Run("too-large", func(t *testing.T) {
		big := filepath.Join(dir, "big.pem")
		os.WriteFile(big, bytes.Repeat([]byte{'A'}, maxKeyFileBytes+1), 0o600)
		_, err := NewSigner(Options{Issuer: testIssuer, KeyFiles: []string{big}})
		if err == nil || !strings.Contains(err.Error(), big) {
			t.Fatalf("err = %v, want the large file refused", err)
		}
	})
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	oldFile := writePEM(t, dir, "old.pem", pkcs8(t, ecKey(t, elliptic.P256())))
	newFile := writePEM(t, dir, "new.pem", &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey(t))})

	// Step 1: the new key is published second; the old one signs.
	before, err := NewSigner(Options{Issuer: testIssuer, KeyFiles: []string{oldFile, newFile}})
	if err != nil {
		t.Fatal(err)
	}
	// Step 3: the new key signs; the old one is still published.
	after, err := NewSigner(Options{Issuer: testIssuer, KeyFiles: []string{newFile, oldFile}})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := before.KeyIDs(), after.KeyIDs(); len(a) != 2 || a[0] != b[1] || a[1] != b[0] {
		t.Fatalf("kids %v then %v, want the same two swapped", a, b)
	}
	if n := len(publicKeys(t, after.JWKS())); n != 2 {
		t.Fatalf("JWKS holds %d keys, want 2", n)
	}
	now := time.Now()
	oldTok, _, err := before.Token("alice", "acme", nil, "up")
	if err != nil {
		t.Fatal(err)
	}
	newTok, _, err := after.Token("alice", "acme", nil, "up")
	if err != nil {
		t.Fatal(err)
	}
	_, h := verify(t, newTok, after.JWKS(), "up", now)
	if h["kid"] != after.KeyIDs()[0] || h["alg"] != "RS256" {
		t.Fatalf("new token header %v, want the new key", h)
	}
	// Tokens of either signer verify with either key set.
	for _, jwks := range [][]byte{before.JWKS(), after.JWKS()} {
		_, h := verify(t, oldTok, jwks, "up", now)
		if h["kid"] != before.KeyIDs()[0] || h["alg"] != "ES256" {
			t.Fatalf("old token header %v, want the old key", h)
		}
		verify(t, newTok, jwks, "up", now)
	}
	// Step 4: with the old key gone, its tokens no longer verify.
	final, err := NewSigner(Options{Issuer: testIssuer, KeyFiles: []string{newFile}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := publicKeys(t, final.JWKS())[before.KeyIDs()[0]]; ok {
		t.Fatal("old key still published")
	}
}

func TestCachedRefresh(t *testing.T) {
	clk := newClock(t0)
	s, err := NewSigner(Options{Issuer: testIssuer, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Cached("alice", "acme", []string{"b", "a"}, "up")
	if err != nil {
		t.Fatal(err)
	}
	same := func(sub, tenant string, scopes []string, aud string) bool {
		t.Helper()
		tok, err := s.Cached(sub, tenant, scopes, aud)
		if err != nil {
			t.Fatal(err)
		}
		return tok == first
	}
	// Scope order and duplicates do not matter; every other value does.
	if !same("alice", "acme", []string{"a", "b"}, "up") || !same("alice", "acme", []string{"b", "a", "b"}, "up") {
		t.Fatal("the same scopes in another order gave another token")
	}
	for _, o := range []struct {
		sub, tenant string
		scopes      []string
		aud         string
	}{
		{"bob", "acme", []string{"a", "b"}, "up"},
		{"alice", "other", []string{"a", "b"}, "up"},
		{"alice", "acme", []string{"a"}, "up"},
		{"alice", "acme", []string{"a", "b", "c"}, "up"},
		{"alice", "acme", []string{"a", "b"}, "up2"},
		{"alice", "acmeup", []string{"a", "b"}, "x"}, // fields are length-prefixed
		{"alic", "eacme", []string{"a", "b"}, "up"},
	} {
		if same(o.sub, o.tenant, o.scopes, o.aud) {
			t.Fatalf("%v got alice's token", o)
		}
	}
	// Until 20% of the lifetime remains: 4 of 5 minutes.
	clk.set(t0.Add(4*time.Minute - time.Nanosecond))
	if !same("alice", "acme", []string{"a", "b"}, "up") {
		t.Fatal("a new token before the refresh point")
	}
	clk.set(t0.Add(4 * time.Minute))
	second, err := s.Cached("alice", "acme", []string{"a", "b"}, "up")
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatal("the same token at the refresh point")
	}
	c, _ := verify(t, second, s.JWKS(), "up", clk.now())
	if c["iat"] != float64(t0.Add(4*time.Minute).Unix()) {
		t.Fatalf("refreshed token iat = %v", c["iat"])
	}
	if again, _ := s.Cached("alice", "acme", []string{"a", "b"}, "up"); again != second {
		t.Fatal("the refreshed token was not kept")
	}
	// A clock set back before the token's iat gets a new one.
	clk.set(t0)
	if back, _ := s.Cached("alice", "acme", []string{"a", "b"}, "up"); back == second {
		t.Fatal("a token minted in the future was returned")
	}
}

func TestCacheBound(t *testing.T) {
	clk := newClock(t0)
	s, err := NewSigner(Options{Issuer: testIssuer, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	maxSeen := 0
	for i := range 20000 {
		if i%1000 == 0 {
			clk.add(time.Second)
		}
		if _, err := s.Cached(fmt.Sprintf("user-%d", i), "acme", nil, "up"); err != nil {
			t.Fatal(err)
		}
		maxSeen = max(maxSeen, s.cache.len())
	}
	if maxSeen > MaxCached {
		t.Fatalf("cache reached %d entries, bound %d", maxSeen, MaxCached)
	}
	if maxSeen < MaxCached {
		t.Fatalf("cache peaked at %d entries: eviction before it was full", maxSeen)
	}
	// The newest survive: the last subject is still cached...
	last := "user-19999"
	tok, _ := s.Cached(last, "acme", nil, "up")
	if again, _ := s.Cached(last, "acme", nil, "up"); again != tok {
		t.Fatal("newest entry not cached")
	}
	// ...and after the refresh point the expired go first.
	clk.add(DefaultTTL)
	n := s.cache.len()
	s.cache.mu.Lock()
	s.cache.evict(clk.now())
	s.cache.mu.Unlock()
	if got := s.cache.len(); got != 0 {
		t.Fatalf("%d of %d entries survived their refresh point", got, n)
	}
}

func TestCacheEvictsOldest(t *testing.T) {
	c := cache{max: 10}
	base := t0
	for i := range 10 {
		k := [32]byte{byte(i)}
		c.put(k, entry{token: fmt.Sprint(i), iat: base.Add(time.Duration(i) * time.Second), refresh: base.Add(time.Hour)}, base)
	}
	c.put([32]byte{99}, entry{token: "new", iat: base.Add(time.Minute), refresh: base.Add(time.Hour)}, base)
	if n := c.len(); n != 6 {
		t.Fatalf("%d entries after eviction, want 5 kept and 1 added", n)
	}
	for i := range 10 {
		_, ok := c.get([32]byte{byte(i)}, base.Add(time.Minute))
		if want := i >= 5; ok != want {
			t.Errorf("entry %d cached = %v, want %v", i, ok, want)
		}
	}
}

func TestCachedConcurrent(t *testing.T) {
	s, err := NewSigner(Options{Issuer: testIssuer})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if _, err := s.Cached(fmt.Sprintf("u%d", (i+g)%20), "acme", []string{"r"}, "up"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := s.cache.len(); n != 20 {
		t.Fatalf("%d entries, want 20", n)
	}
}

func TestHandler(t *testing.T) {
	s, err := NewSigner(Options{Issuer: testIssuer})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/jwks.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	hdr := rec.Header()
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := hdr.Get("Cache-Control"); cc != fmt.Sprintf("public, max-age=%d", JWKSMaxAge) {
		t.Errorf("Cache-Control %q", cc)
	}
	if !bytes.Equal(rec.Body.Bytes(), s.JWKS()) {
		t.Errorf("body %s, want the JWKS", rec.Body)
	}
	if n := len(publicKeys(t, rec.Body.Bytes())); n != 1 {
		t.Errorf("%d keys served", n)
	}
	etag := hdr.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}

	req := httptest.NewRequest(http.MethodGet, "/.well-known/jwks.json", nil)
	req.Header.Set("If-None-Match", `"other", W/`+etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("If-None-Match: status %d, body %q; want 304", rec.Code, rec.Body)
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/.well-known/jwks.json", nil))
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != fmt.Sprint(len(s.JWKS())) {
		t.Errorf("HEAD: status %d, body %d bytes, Content-Length %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/.well-known/jwks.json", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: status %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}

	// The JWKS is the caller's to modify.
	j := s.JWKS()
	j[0] = 'X'
	if s.JWKS()[0] != '{' {
		t.Error("JWKS returns the Signer's own slice")
	}
}

func TestNoKeyMaterial(t *testing.T) {
	dir := t.TempDir()
	ec := ecKey(t, elliptic.P256())
	rk := rsaKey(t)
	f1 := writePEM(t, dir, "ec.pem", pkcs8(t, ec))
	f2 := writePEM(t, dir, "rsa.pem", pkcs8(t, rk))
	var logs bytes.Buffer
	s, err := NewSigner(Options{Issuer: testIssuer, KeyFiles: []string{f1, f2}, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("signer", "signer", s)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("signer", "signer", s)
	ecD, _ := ec.Bytes()
	secrets := []string{
		new(big.Int).SetBytes(ecD).String(), hex.EncodeToString(ecD), fmt.Sprintf("%X", ecD),
		rk.D.String(), rk.D.Text(16), rk.Primes[0].String(), rk.Primes[0].Text(16),
		rk.N.String(), // the RSA modulus is public, but printing it means the key struct leaked
		"PRIVATE",
	}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%X", "%q"} {
		out = append(out, fmt.Sprintf(verb, s), fmt.Sprintf(verb, s.keys[0]), fmt.Sprintf(verb, s.keys))
	}
	out = append(out, logs.String(), s.String(), string(s.JWKS()))
	for _, o := range out {
		for _, sec := range secrets {
			if strings.Contains(strings.ToLower(o), strings.ToLower(sec)) {
				t.Fatalf("output %.200q contains key material", o)
			}
		}
	}
	for _, kid := range s.KeyIDs() {
		if !strings.Contains(s.String(), kid) || !strings.Contains(logs.String(), kid) {
			t.Errorf("kid %s missing from String or logs", kid)
		}
	}
	if !strings.Contains(logs.String(), f1) {
		t.Error("the log does not name the key files")
	}
	var nilSigner *Signer
	if got := fmt.Sprint(nilSigner); got != "identity.Signer(nil)" {
		t.Errorf("nil signer prints %q", got)
	}
}

// BenchmarkCached is the per-call cost once the token is cached.
func BenchmarkCached(b *testing.B) {
	s, err := NewSigner(Options{Issuer: testIssuer})
	if err != nil {
		b.Fatal(err)
	}
	scopes := []string{"tools:read", "tools:write", "resources:read"}
	if _, err := s.Cached("alice@example.com", "acme", scopes, "https://up.example.com/mcp"); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Cached("alice@example.com", "acme", scopes, "https://up.example.com/mcp"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Cached("alice@example.com", "acme", scopes, "https://up.example.com/mcp"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkToken is the cost of minting, per algorithm.
func BenchmarkToken(b *testing.B) {
	dir := b.TempDir()
	files := map[string]string{
		"ES256": writePEM(b, dir, "ec.pem", pkcs8(b, ecKey(b, elliptic.P256()))),
		"RS256": writePEM(b, dir, "rsa.pem", pkcs8(b, rsaKey(b))),
	}
	for _, alg := range []string{"ES256", "RS256"} {
		b.Run(alg, func(b *testing.B) {
			s, err := NewSigner(Options{Issuer: testIssuer, KeyFiles: []string{files[alg]}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := s.Token("alice@example.com", "acme", []string{"tools:read", "tools:write"}, "https://up.example.com/mcp"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
