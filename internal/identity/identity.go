// Package identity mints the gateway's signed identity tokens and publishes
// the keys that verify them.
//
// An upstream that trusts the gateway can be sent, with every call, a
// short-lived JWT the gateway signs: who the caller is (sub), in which
// tenant (tenant), with which scopes (scope), for which upstream (aud), said
// by the gateway (iss, its public URL). The upstream verifies it with the
// keys the gateway serves at /.well-known/jwks.json ([Signer.Handler]) and
// can attribute every call without ever seeing the client's token.
//
// # What it owns, and what it must not do
//
// This package owns the signing keys (loaded from PEM files or generated),
// the tokens minted with them, a small cache of those tokens, and the JSON
// Web Key Set of the public keys. It takes plain strings (subject, tenant,
// scopes, audience) that the caller has already established by verifying
// the client's token; it never sees the client's token and never forwards
// it, and nothing it mints contains any part of it. Private key material is
// never logged, formatted or returned: a [Signer] prints (fmt, slog) only
// its issuer and key ids, and key-file errors name the file, never its
// contents.
//
// # Tokens
//
// A token is a JWS (compact serialization) with header
//
//	{"alg":"ES256"|"RS256","kid":<key id>,"typ":"at+jwt"}
//
// and claims iss, sub, aud (one string), tenant, scope (space-separated,
// sorted, duplicates removed; omitted if there are none), client_id
// ([ClientID]), iat, nbf (= iat), exp (= iat + TTL) and jti (128 random bits,
// hex). The typ and claims follow RFC 9068 (JWT profile for OAuth 2.0 access
// tokens), so an upstream may validate it as an access token issued by the
// gateway for itself: check typ, iss, aud, exp and the signature. Times are
// whole seconds; upstreams should allow a little clock leeway since nbf is
// the moment of minting.
//
// # Keys
//
// Options.KeyFiles are PEM files, one private key each: PKCS#8 ("PRIVATE
// KEY"), SEC1 ("EC PRIVATE KEY", an "EC PARAMETERS" block beside it is
// ignored) or PKCS#1 ("RSA PRIVATE KEY"). A P-256 EC key signs ES256, an RSA
// key of 2048 to 8192 bits signs RS256; anything else (other curves, smaller
// or larger RSA keys, Ed25519, encrypted PEM) is refused. The first key
// signs; every key is published. A key's id (kid) is its RFC 7638 JWK
// thumbprint: the base64url SHA-256 of its canonical public JWK, so the same
// key has the same kid on every replica and across restarts.
//
// Without key files, NewSigner generates one P-256 key in memory. It lives
// as long as the process: a restart publishes a different key, and several
// replicas each publish only their own, so an upstream that fetched the key
// set from one replica cannot verify the tokens of another. Configure key
// files whenever there is more than one replica, or upstreams cache keys.
// Generate them with, for example,
//
//	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out identity-2025-01.pem
//
// # Rotation
//
// Tokens live at most the TTL, and upstreams cache the key set (this
// package's handler says max-age=300; an upstream may keep it longer). A key
// is rotated without a token failing verification by:
//
//  1. Add the new key file second in the key list and reload (or restart)
//     every replica. The new key is now published; the old one still signs.
//  2. Wait the TTL plus the upstreams' key-set cache time ([JWKSMaxAge]
//     seconds for an upstream that honours Cache-Control; some keep key sets
//     longer, see their settings), so that every upstream has fetched a key
//     set holding the new key before any token is signed with it.
//  3. Move the new key file first and reload every replica. The new key
//     signs; the old one is still published, so the tokens it signed, at
//     most a TTL old (cached ones included), still verify. While replicas reload one by one, some sign with the old key
//     and some with the new: both are published everywhere since step 1.
//  4. Later, at least a TTL after the last replica reloaded, remove the old
//     key file and reload.
//
// A compromised key is instead replaced at once (the new key first, the old
// one removed, one reload), accepting that calls fail at upstreams whose
// cached key set lacks the new key until they refetch it.
//
// # Cache
//
// Minting costs a signature (tens of microseconds for ES256, a millisecond
// or more for RS256 2048), too much for every call. [Signer.Cached]
// returns the token minted earlier for the same (subject, tenant, scopes,
// audience) until only 20% of its lifetime remains, then mints a new one.
// The cache is keyed by a SHA-256 of those values and holds at most
// [MaxCached] tokens; when it is full, the entries past their refresh point
// are dropped, then, if more than half remain, the oldest until half
// remain. Concurrent misses for the same key may each mint; the newest
// token is kept, and every token they return is valid.
package identity

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

const (
	// DefaultTTL is the lifetime of a token when Options.TTL is 0.
	DefaultTTL = 5 * time.Minute
	// MinTTL and MaxTTL bound Options.TTL.
	MinTTL = 10 * time.Second
	MaxTTL = time.Hour

	// ClientID is the client_id claim of every token (RFC 9068 §2.2): the
	// gateway is the client the upstream serves.
	ClientID = "mcp-gateway"

	// TokenType is the typ header of every token (RFC 9068 §2.1).
	TokenType = "at+jwt"

	// MaxCached bounds the number of tokens [Signer.Cached] keeps.
	MaxCached = 10000

	// MaxTokenBytes bounds a minted token: it travels in an HTTP header,
	// and servers commonly refuse header lines longer than 8 KiB.
	MaxTokenBytes = 8 << 10
)

// Options configure a [Signer].
type Options struct {
	// Issuer is the iss of every token: the gateway's public URL, exactly
	// as upstreams are configured to expect it. Required; http or https.
	Issuer string
	// KeyFiles are paths of PEM private keys, opened as given (the caller
	// resolves relative ones). The first signs, all are published.
	// If empty, one ES256 key is generated in memory (see the package
	// documentation for why that suits a single replica only).
	KeyFiles []string
	// TTL is the lifetime of a minted token: 0 means [DefaultTTL];
	// otherwise it must be between [MinTTL] and [MaxTTL].
	TTL time.Duration
	// Now returns the current time. If nil, time.Now is used.
	Now func() time.Time
	// Logger, if nil, means no logging. Keys and tokens are never logged.
	Logger *slog.Logger
}

// A Signer mints identity tokens and publishes its public keys. It is safe
// for concurrent use. Its keys are fixed at construction: a reload builds a
// new Signer.
type Signer struct {
	issuer string
	ttl    time.Duration
	now    func() time.Time
	log    *slog.Logger
	keys   []*key // keys[0] signs
	jwks   []byte // the key set, JSON
	etag   string // quoted, of jwks
	cache  cache
}

// NewSigner loads or generates the keys and returns a Signer.
func NewSigner(opts Options) (*Signer, error) {
	if err := checkIssuer(opts.Issuer); err != nil {
		return nil, err
	}
	ttl := opts.TTL
	switch {
	case ttl == 0:
		ttl = DefaultTTL
	case ttl < MinTTL || ttl > MaxTTL:
		return nil, fmt.Errorf("identity: ttl %v is outside %v..%v", ttl, MinTTL, MaxTTL)
	}
	s := &Signer{
		issuer: opts.Issuer,
		ttl:    ttl,
		now:    opts.Now,
		log:    opts.Logger,
		cache:  cache{max: MaxCached},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if len(opts.KeyFiles) == 0 {
		k, err := generateKey()
		if err != nil {
			return nil, err
		}
		s.keys = []*key{k}
		s.log.Info("identity: no key files; generated an in-memory ES256 key, valid for this process only (configure key files for several replicas)",
			slog.String("kid", k.kid))
	} else {
		seen := make(map[string]string, len(opts.KeyFiles)) // kid → file
		for _, f := range opts.KeyFiles {
			k, err := loadKeyFile(f)
			if err != nil {
				return nil, err
			}
			if prev, ok := seen[k.kid]; ok {
				return nil, fmt.Errorf("identity: key file %q holds the same key as %q", f, prev)
			}
			seen[k.kid] = f
			s.keys = append(s.keys, k)
		}
		for i, k := range s.keys {
			s.log.Info("identity: key loaded", slog.String("kid", k.kid), slog.String("alg", k.alg),
				slog.String("file", k.file), slog.Bool("signing", i == 0))
		}
	}
	var err error
	if s.jwks, err = marshalJWKS(s.keys); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(s.jwks)
	s.etag = `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`
	return s, nil
}

func checkIssuer(iss string) error {
	if iss == "" {
		return errors.New("identity: no issuer (the gateway's public URL)")
	}
	u, err := url.Parse(iss)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" {
		return fmt.Errorf("identity: issuer %q is not an http(s) URL without query, fragment or user info", iss)
	}
	return nil
}

// TTL returns the lifetime of the tokens the Signer mints.
func (s *Signer) TTL() time.Duration { return s.ttl }

// KeyIDs returns the kids of the published keys; the first is the signing
// key's.
func (s *Signer) KeyIDs() []string {
	ids := make([]string, len(s.keys))
	for i, k := range s.keys {
		ids[i] = k.kid
	}
	return ids
}

// claims are a token's claims, in the order they are written.
type claims struct {
	Iss      string `json:"iss"`
	Sub      string `json:"sub"`
	Aud      string `json:"aud"`
	Tenant   string `json:"tenant"`
	Scope    string `json:"scope,omitempty"`
	ClientID string `json:"client_id"`
	Iat      int64  `json:"iat"`
	Nbf      int64  `json:"nbf"`
	Exp      int64  `json:"exp"`
	Jti      string `json:"jti"`
}

// Token mints a token for subject in tenant, with scopes, for the upstream
// audience, and returns it with its expiry. subject, tenant and audience
// must be non-empty valid UTF-8; each scope must be non-empty valid UTF-8
// without white space or control characters. The scope claim is the scopes
// sorted, without duplicates.
func (s *Signer) Token(subject, tenant string, scopes []string, audience string) (string, time.Time, error) {
	scopes = canonScopes(scopes)
	if err := checkInputs(subject, tenant, scopes, audience); err != nil {
		return "", time.Time{}, err
	}
	return s.mint(subject, tenant, scopes, audience)
}

// mint signs a token for canonical, checked inputs.
func (s *Signer) mint(subject, tenant string, scopes []string, audience string) (string, time.Time, error) {
	iat := s.now().Truncate(time.Second)
	exp := iat.Add(s.ttl)
	var jti [16]byte
	_, _ = rand.Read(jti[:]) // never fails (crypto/rand since Go 1.24)
	payload, err := json.Marshal(claims{
		Iss: s.issuer, Sub: subject, Aud: audience, Tenant: tenant,
		Scope: strings.Join(scopes, " "), ClientID: ClientID,
		Iat: iat.Unix(), Nbf: iat.Unix(), Exp: exp.Unix(),
		Jti: hex.EncodeToString(jti[:]),
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("identity: encoding claims: %w", err)
	}
	k := s.keys[0]
	enc := base64.RawURLEncoding
	var b strings.Builder
	b.Grow(len(k.header) + 1 + enc.EncodedLen(len(payload)) + 1 + enc.EncodedLen(k.sigSize))
	b.WriteString(k.header)
	b.WriteByte('.')
	b.WriteString(enc.EncodeToString(payload))
	sig, err := k.method.Sign(b.String(), k.priv)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("identity: signing with key %s: %w", k.kid, err)
	}
	b.WriteByte('.')
	b.WriteString(enc.EncodeToString(sig))
	if b.Len() > MaxTokenBytes {
		return "", time.Time{}, fmt.Errorf("identity: token of %d bytes exceeds %d (subject, tenant, scopes or audience too long)", b.Len(), MaxTokenBytes)
	}
	return b.String(), exp, nil
}

// Cached returns a token for the same arguments as [Signer.Token]: the one
// minted earlier for the same subject, tenant, scopes (in any order, with
// or without duplicates) and audience while more than 20% of its lifetime
// remains, otherwise a new one, which it keeps.
func (s *Signer) Cached(subject, tenant string, scopes []string, audience string) (string, error) {
	scopes = canonScopes(scopes)
	ck := cacheKey(subject, tenant, scopes, audience)
	now := s.now()
	if tok, ok := s.cache.get(ck, now); ok {
		return tok, nil
	}
	if err := checkInputs(subject, tenant, scopes, audience); err != nil {
		return "", err
	}
	tok, exp, err := s.mint(subject, tenant, scopes, audience)
	if err != nil {
		return "", err
	}
	iat := exp.Add(-s.ttl)
	s.cache.put(ck, entry{token: tok, iat: iat, refresh: exp.Add(-s.ttl / 5)}, now)
	return tok, nil
}

// canonScopes returns scopes sorted without duplicates, as a new slice
// unless they already are.
func canonScopes(scopes []string) []string {
	sorted := true
	for i := 1; i < len(scopes); i++ {
		if scopes[i-1] >= scopes[i] {
			sorted = false
			break
		}
	}
	if sorted {
		return scopes
	}
	c := slices.Clone(scopes)
	slices.Sort(c)
	return slices.Compact(c)
}

func checkInputs(subject, tenant string, scopes []string, audience string) error {
	for _, f := range [...]struct{ name, v string }{{"subject", subject}, {"tenant", tenant}, {"audience", audience}} {
		if f.v == "" {
			return fmt.Errorf("identity: empty %s", f.name)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("identity: %s is not valid UTF-8", f.name)
		}
	}
	for _, sc := range scopes {
		if sc == "" {
			return errors.New("identity: empty scope")
		}
		if !utf8.ValidString(sc) {
			return errors.New("identity: a scope is not valid UTF-8")
		}
		if strings.ContainsFunc(sc, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			return fmt.Errorf("identity: scope %q contains white space or a control character", sc)
		}
	}
	return nil
}

// cacheKey is the SHA-256 of the length-prefixed subject, tenant and
// audience, the number of scopes and each length-prefixed scope; scopes are
// canonical.
func cacheKey(subject, tenant string, scopes []string, audience string) [sha256.Size]byte {
	buf := make([]byte, 0, 512)
	field := func(v string) {
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		buf = append(buf, v...)
	}
	field(subject)
	field(tenant)
	field(audience)
	buf = binary.AppendUvarint(buf, uint64(len(scopes)))
	for _, sc := range scopes {
		field(sc)
	}
	return sha256.Sum256(buf)
}

// An entry is one cached token.
type entry struct {
	token   string
	iat     time.Time
	refresh time.Time // the token is not returned from this time on
}

// A cache holds tokens by key, at most max of them.
type cache struct {
	max int
	mu  sync.Mutex
	m   map[[sha256.Size]byte]entry
}

func (c *cache) get(k [sha256.Size]byte, now time.Time) (string, bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	// A clock set back before the token's iat gets a new token too.
	if !ok || now.Before(e.iat) || !now.Before(e.refresh) {
		return "", false
	}
	return e.token, true
}

func (c *cache) put(k [sha256.Size]byte, e entry, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[[sha256.Size]byte]entry)
	}
	old, ok := c.m[k]
	if ok && old.refresh.After(e.refresh) {
		return // a concurrent miss stored a newer token
	}
	if !ok && len(c.m) >= c.max {
		c.evict(now)
	}
	c.m[k] = e
}

// evict drops the entries past their refresh point, then, if more than
// half of max remain, the oldest until half remain. Each eviction thus
// makes room for at least max/2 insertions.
func (c *cache) evict(now time.Time) {
	for k, e := range c.m {
		if !now.Before(e.refresh) {
			delete(c.m, k)
		}
	}
	keep := c.max / 2
	if len(c.m) <= keep {
		return
	}
	type aged struct {
		k   [sha256.Size]byte
		iat time.Time
	}
	all := make([]aged, 0, len(c.m))
	for k, e := range c.m {
		all = append(all, aged{k, e.iat})
	}
	slices.SortFunc(all, func(a, b aged) int { return a.iat.Compare(b.iat) })
	for _, a := range all[:len(all)-keep] {
		delete(c.m, a.k)
	}
}

// len returns the number of cached tokens.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// String returns the issuer and key ids; never key material.
func (s *Signer) String() string {
	if s == nil {
		return "identity.Signer(nil)"
	}
	return fmt.Sprintf("identity.Signer{issuer=%s signing=%s keys=%s}", s.issuer, s.keys[0].kid, strings.Join(s.KeyIDs(), ","))
}

// Format writes [Signer.String] whatever the verb, so that no fmt verb
// (%#v, %d, %x...) can print the keys.
func (s *Signer) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.String())) }

// GoString returns [Signer.String].
func (s *Signer) GoString() string { return s.String() }

// LogValue logs the issuer and key ids; never key material.
func (s *Signer) LogValue() slog.Value {
	if s == nil {
		return slog.StringValue("<nil>")
	}
	return slog.GroupValue(
		slog.String("issuer", s.issuer),
		slog.String("signing_kid", s.keys[0].kid),
		slog.Any("kids", s.KeyIDs()),
		slog.Duration("ttl", s.ttl),
	)
}
