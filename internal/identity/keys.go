package identity

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

const (
	// JWKSMaxAge is the max-age, in seconds, [Signer.Handler] gives the key
	// set.
	JWKSMaxAge = 300

	// RSA key sizes accepted: below 2048 bits is too weak, above 8192 too
	// slow to sign with for every call.
	minRSABits = 2048
	maxRSABits = 8192

	// maxKeyFileBytes bounds a key file read: a PEM private key is a few
	// KiB.
	maxKeyFileBytes = 64 << 10
)

// A key is one signing key and what is derived from it at load.
type key struct {
	kid     string
	alg     string // ES256 or RS256
	file    string // "" if generated
	method  jwt.SigningMethod
	priv    crypto.Signer // *ecdsa.PrivateKey or *rsa.PrivateKey
	sigSize int           // bytes of a signature
	header  string        // the JOSE header, base64url
	jwk     jwk
}

// String returns the key's id and algorithm; never key material.
func (k *key) String() string { return "identity key " + k.kid + " (" + k.alg + ")" }

// Format writes [key.String] whatever the verb.
func (k *key) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.String())) }

// A jwk is a public JSON Web Key (RFC 7517, RFC 7518 §6).
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// generateKey returns a new in-memory P-256 key.
func generateKey() (*key, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("identity: generating a key: %w", err)
	}
	return newKey(priv, "")
}

// loadKeyFile reads one PEM private key. Its errors name the file and never
// quote its contents.
func loadKeyFile(file string) (*key, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("identity: key file %q: "+format, append([]any{file}, a...)...)
	}
	f, err := os.Open(file)
	if err != nil {
		// The *PathError names the file; its message is the OS's.
		return nil, fmt.Errorf("identity: key file: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	f.Close()
	if err != nil {
		return nil, fail("reading: %w", err)
	}
	if len(data) > maxKeyFileBytes {
		return nil, fail("larger than %d bytes", maxKeyFileBytes)
	}
	var der []byte
	found := false
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY":
			if found {
				return nil, fail("holds more than one private key; put one key in each file")
			}
			if _, enc := b.Headers["Proc-Type"]; enc {
				return nil, fail("encrypted PEM is not supported")
			}
			der, found = b.Bytes, true
		case "ENCRYPTED PRIVATE KEY":
			return nil, fail("encrypted private keys are not supported")
		default:
			// EC PARAMETERS (openssl ecparam -genkey), certificates and
			// public keys beside the private key are ignored.
		}
	}
	clear(data)
	if !found {
		return nil, fail("no PEM private key block (PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY)")
	}
	priv, err := parsePrivateKey(der)
	clear(der)
	if err != nil {
		return nil, fail("%w", err)
	}
	k, err := newKey(priv, file)
	if err != nil {
		return nil, fail("%w", err)
	}
	return k, nil
}

// parsePrivateKey parses DER as PKCS#8, SEC1 or PKCS#1, whatever the PEM
// type said. Its errors are fixed text: the parsers' may describe the
// bytes.
func parsePrivateKey(der []byte) (crypto.PrivateKey, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("not a valid PKCS#8, SEC1 (EC) or PKCS#1 (RSA) private key")
}

// newKey checks priv's kind and size and derives the key's id, JWK and
// header.
func newKey(priv crypto.PrivateKey, file string) (*key, error) {
	k := &key{file: file}
	switch p := priv.(type) {
	case *ecdsa.PrivateKey:
		if p.Curve != elliptic.P256() {
			return nil, fmt.Errorf("EC key on curve %s is not supported (only P-256, for ES256)", p.Curve.Params().Name)
		}
		pt, err := p.PublicKey.Bytes() // 0x04 || X || Y
		if err != nil {
			return nil, fmt.Errorf("EC public key: %w", err)
		}
		k.alg, k.method, k.priv, k.sigSize = "ES256", jwt.SigningMethodES256, p, 64
		k.jwk = jwk{Kty: "EC", Crv: "P-256", X: b64(pt[1:33]), Y: b64(pt[33:65])}
	case *rsa.PrivateKey:
		bits := p.N.BitLen()
		if bits < minRSABits || bits > maxRSABits {
			return nil, fmt.Errorf("RSA key of %d bits is not supported (%d to %d bits, for RS256)", bits, minRSABits, maxRSABits)
		}
		k.alg, k.method, k.priv, k.sigSize = "RS256", jwt.SigningMethodRS256, p, p.Size()
		k.jwk = jwk{Kty: "RSA", N: b64(p.N.Bytes()), E: b64(big.NewInt(int64(p.E)).Bytes())}
	case ed25519.PrivateKey:
		return nil, errors.New("Ed25519 keys are not supported (use a P-256 EC key or an RSA key of at least 2048 bits)")
	default:
		return nil, fmt.Errorf("%T keys are not supported (use a P-256 EC key or an RSA key of at least 2048 bits)", priv)
	}
	k.kid = thumbprint(k.jwk)
	k.jwk.Kid, k.jwk.Alg, k.jwk.Use = k.kid, k.alg, "sig"
	hdr, err := json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}{k.alg, k.kid, TokenType})
	if err != nil {
		return nil, err
	}
	k.header = b64(hdr)
	return k, nil
}

// thumbprint is the RFC 7638 thumbprint of a public JWK: the base64url
// SHA-256 of its required members, sorted, without white space. The
// members' values are base64url or fixed names, which need no escaping.
func thumbprint(j jwk) string {
	var s string
	switch j.Kty {
	case "EC":
		s = `{"crv":"` + j.Crv + `","kty":"EC","x":"` + j.X + `","y":"` + j.Y + `"}`
	case "RSA":
		s = `{"e":"` + j.E + `","kty":"RSA","n":"` + j.N + `"}`
	}
	sum := sha256.Sum256([]byte(s))
	return b64(sum[:])
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// marshalJWKS returns the key set of keys' public keys, in their order.
func marshalJWKS(keys []*key) ([]byte, error) {
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: make([]jwk, len(keys))}
	for i, k := range keys {
		set.Keys[i] = k.jwk
	}
	return json.Marshal(set)
}

// JWKS returns the JSON Web Key Set of the Signer's public keys, the
// signing key's first: {"keys":[{"kty","crv","x","y"|"n","e","kid","alg",
// "use":"sig"}...]}. The slice is the caller's.
func (s *Signer) JWKS() []byte { return bytes.Clone(s.jwks) }

// Handler serves [Signer.JWKS] to GET and HEAD, as application/json with
// Cache-Control max-age [JWKSMaxAge] and an ETag; the gateway mounts it at
// /.well-known/jwks.json.
func (s *Signer) Handler() http.Handler {
	length := strconv.Itoa(len(s.jwks))
	cacheControl := "public, max-age=" + strconv.Itoa(JWKSMaxAge)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Cache-Control", cacheControl)
		h.Set("ETag", s.etag)
		if etagMatch(r.Header.Values("If-None-Match"), s.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", "application/json")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Length", length)
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(s.jwks)
	})
}

// etagMatch reports whether an If-None-Match header names etag (weak
// comparison, RFC 9110 §13.1.2).
func etagMatch(headers []string, etag string) bool {
	for _, h := range headers {
		for t := range strings.SplitSeq(h, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
	}
	return false
}
