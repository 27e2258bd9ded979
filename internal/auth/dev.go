package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgw/gateway/internal/config"
)

// DevIssuer is a throwaway token issuer FOR `gateway demo` ONLY (and the
// benchmarks' bench/issuer, which runs it on loopback for gateways of its
// own). It must never be trusted by a gateway that serves anyone but the
// person running the demo: whoever can reach [DevIssuer.Token]'s caller
// can mint any token for any tenant.
//
// It holds an ES256 key made by [NewDevIssuer], lives only in memory, and
// serves just enough of an OpenID provider for a [Verifier] to trust it:
// /.well-known/openid-configuration and /jwks. It has no authorization or
// token endpoint; tokens come from [DevIssuer.Token].
type DevIssuer struct {
	// URL is the issuer URL, the tokens' iss, such as http://127.0.0.1:4321.
	// [DevIssuer.Start] sets it; set it before serving [DevIssuer.Handler]
	// some other way.
	URL string
	// Logger receives the warning that a development issuer is running. If
	// nil, slog.Default() is used: the warning is not optional.
	Logger *slog.Logger

	key  *ecdsa.PrivateKey
	kid  string
	jwks []byte

	srv  *http.Server
	done chan struct{} // closed when Serve returns
}

// DevIssuerTenantClaim is the claim holding the tenant in the tokens of a
// [DevIssuer].
const DevIssuerTenantClaim = "tenant"

// NewDevIssuer returns a development issuer with a fresh ES256 key. See
// [DevIssuer] for why nothing but `gateway demo` may use it.
func NewDevIssuer() (*DevIssuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	d := &DevIssuer{key: key, kid: "dev-" + hex.EncodeToString(id[:])}
	jwk, err := publicJWK(d.kid, jwt.SigningMethodES256.Alg(), &key.PublicKey)
	if err != nil {
		return nil, err
	}
	d.jwks, err = json.Marshal(map[string]any{"keys": []any{jwk}})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Handler serves the issuer's OpenID configuration and key set.
func (d *DevIssuer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                d.URL,
			"jwks_uri":                              d.URL + "/jwks",
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{jwt.SigningMethodES256.Alg()},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(d.jwks)
	})
	return mux
}

// Start serves [DevIssuer.Handler] on ln until [DevIssuer.Close], sets URL
// to http://<ln's address> and logs a warning that a development issuer is
// running.
func (d *DevIssuer) Start(ln net.Listener) error {
	if d.srv != nil {
		return errors.New("dev issuer: already started")
	}
	d.URL = "http://" + ln.Addr().String()
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Warn("DEVELOPMENT TOKEN ISSUER RUNNING: for `gateway demo` only, it mints any token for any tenant; never trust it in production",
		slog.String("issuer_url", d.URL))
	d.srv = &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second}
	d.done = make(chan struct{})
	go func() {
		defer close(d.done)
		_ = d.srv.Serve(ln)
	}()
	return nil
}

// Close stops the server Start started and waits for it.
func (d *DevIssuer) Close() error {
	if d.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := d.srv.Shutdown(ctx)
	<-d.done
	return err
}

// Issuer returns the configuration entry under which a gateway trusts
// this issuer: its URL, its key set URL (no discovery needed) and the
// tenant claim.
func (d *DevIssuer) Issuer(name string) config.Issuer {
	return config.Issuer{
		Name:        name,
		IssuerURL:   d.URL,
		JWKSURL:     d.URL + "/jwks",
		TenantClaim: DevIssuerTenantClaim,
		Algorithms:  []string{jwt.SigningMethodES256.Alg()},
	}
}

// Token returns an ES256 access token for subject in tenant, with audience
// as aud (the gateway's public URL), the scopes as a space-separated scope
// claim, and an expiry ttl from now.
func (d *DevIssuer) Token(subject, tenant, audience string, scopes []string, ttl time.Duration) (string, error) {
	if d.URL == "" {
		return "", errors.New("dev issuer: URL not set; call Start first")
	}
	now := time.Now()
	var jti [16]byte
	_, _ = rand.Read(jti[:])
	claims := jwt.MapClaims{
		"iss":                d.URL,
		"sub":                subject,
		"aud":                audience,
		"iat":                now.Unix(),
		"exp":                now.Add(ttl).Unix(),
		"jti":                hex.EncodeToString(jti[:]),
		"client_id":          "gateway-demo",
		DevIssuerTenantClaim: tenant,
	}
	if len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	t.Header["kid"] = d.kid
	t.Header["typ"] = "at+jwt"
	return t.SignedString(d.key)
}

// publicJWK returns pub as a JSON Web Key (RFC 7517, RFC 7518 §6, RFC 8037
// §2). alg, if not empty, is set as the key's algorithm.
func publicJWK(kid, alg string, pub crypto.PublicKey) (map[string]string, error) {
	b64 := base64.RawURLEncoding.EncodeToString
	k := map[string]string{"kid": kid, "use": "sig"}
	if alg != "" {
		k["alg"] = alg
	}
	switch pub := pub.(type) {
	case *rsa.PublicKey:
		k["kty"] = "RSA"
		k["n"] = b64(pub.N.Bytes())
		k["e"] = b64(big.NewInt(int64(pub.E)).Bytes())
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() {
			return nil, errors.New("jwk: only P-256 keys are supported")
		}
		b, err := pub.Bytes() // 0x04 || X || Y
		if err != nil {
			return nil, err
		}
		k["kty"], k["crv"] = "EC", "P-256"
		k["x"], k["y"] = b64(b[1:33]), b64(b[33:])
	case ed25519.PublicKey:
		k["kty"], k["crv"] = "OKP", "Ed25519"
		k["x"] = b64(pub)
	default:
		return nil, fmt.Errorf("jwk: unsupported key type %T", pub)
	}
	return k, nil
}
