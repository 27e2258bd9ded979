package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgw/gateway/internal/config"
)

// DefaultTokenCacheSize is the size of the verified-token cache when
// auth.token_cache_size is 0.
const DefaultTokenCacheSize = 10000

// maxTokenBytes bounds the tokens Verify looks at. Real access tokens are
// a few KiB; the bound keeps decoding cheap for garbage.
const maxTokenBytes = 64 << 10

// Options configure a [Verifier].
type Options struct {
	// HTTPClient fetches discovery documents and key sets. If nil, a client
	// with a 10s timeout is used; a client without a timeout gets one.
	HTTPClient *http.Client
	// Logger, if nil, means no logging. Tokens are never logged.
	Logger *slog.Logger
	// Now returns the current time. If nil, time.Now is used.
	Now func() time.Time
}

// tuning holds the verifier's timings; tests shorten them.
type tuning struct {
	keyRefresh   time.Duration // least time between two key-set fetches of an issuer
	backoffMin   time.Duration // wait after the first failed discovery
	backoffMax   time.Duration // longest wait between discoveries
	fetchTimeout time.Duration // bounds one discovery or key-set fetch
}

var defaultTuning = tuning{
	keyRefresh:   DefaultKeyRefreshInterval,
	backoffMin:   time.Second,
	backoffMax:   time.Minute,
	fetchTimeout: 10 * time.Second,
}

// backoff returns the wait after the n-th consecutive failure (n ≥ 1).
func (t tuning) backoff(n int) time.Duration {
	d := t.backoffMin
	for i := 1; i < n && d < t.backoffMax; i++ {
		d *= 2
	}
	return min(d, t.backoffMax)
}

// A Verifier checks access tokens: JWTs signed by one of the configured
// issuers, for this gateway. It is safe for concurrent use.
//
// Issuers are contacted lazily, when the first token of that issuer
// arrives (or [Verifier.Ready] is called), so the gateway starts while an
// IdP is down; see [Verifier.Verify] for what is checked and
// [DefaultKeyRefreshInterval] for how key fetches are bounded.
//
// A Verifier is built for one Config. On reload, build a new one: it
// starts with an empty cache and rediscovers the issuers.
type Verifier struct {
	issuers map[string]*issuer // by issuer_url
	order   []*issuer          // in config order
	algs    map[string]bool    // every algorithm some issuer accepts
	leeway  time.Duration
	cache   *tokenCache // nil: caching disabled
	now     func() time.Time
}

// NewVerifier returns a verifier for the issuers in cfg.Auth. cfg must be
// valid with defaults applied; empty audiences still default to
// server.public_url, empty algorithms to RS256, PS256, ES256 and EdDSA.
// auth.token_cache_size 0 means [DefaultTokenCacheSize] and a negative one
// disables the cache. NewVerifier makes no network request.
func NewVerifier(cfg *config.Config, opts Options) (*Verifier, error) {
	return newVerifier(cfg, opts, defaultTuning)
}

func newVerifier(cfg *config.Config, opts Options, tune tuning) (*Verifier, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	var client http.Client
	if opts.HTTPClient != nil {
		client = *opts.HTTPClient
	}
	if client.Timeout == 0 {
		client.Timeout = tune.fetchTimeout
	}
	v := &Verifier{
		issuers: make(map[string]*issuer, len(cfg.Auth.Issuers)),
		algs:    make(map[string]bool),
		leeway:  cfg.Auth.Leeway.D(),
		now:     now,
	}
	switch n := cfg.Auth.TokenCacheSize; {
	case n == 0:
		v.cache = newTokenCache(DefaultTokenCacheSize)
	case n > 0:
		v.cache = newTokenCache(n)
	}
	var errs []error
	for i := range cfg.Auth.Issuers {
		ic := &cfg.Auth.Issuers[i]
		is, err := newIssuer(ic, cfg.Server.PublicURL, v.leeway, &client, now, log, tune)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v.issuers[is.url] != nil {
			errs = append(errs, fmt.Errorf("issuer %s: issuer_url %s configured twice", is.name, is.url))
			continue
		}
		v.issuers[is.url] = is
		v.order = append(v.order, is)
		for a := range is.algSet {
			v.algs[a] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return v, nil
}

// Verify checks an access token and returns the principal it stands for.
// The returned Principal may be shared with other callers and must not be
// modified.
//
// The token must be a compact JWS whose unverified iss names a configured
// issuer exactly; its alg must be in that issuer's allowlist (never none or
// HS*, checked before any key is looked up); its signature must verify with
// a key of the issuer's key set; iss must match, aud must contain one of
// the issuer's audiences (the RFC 8707 resource, by default the gateway's
// public URL), exp is required, exp, nbf and iat are checked with the
// configured leeway, and sub and the tenant must be non-empty strings.
// Scopes are not checked here but by [Middleware], so that results can be
// cached whatever the route asks for.
//
// Errors match [ErrInvalidToken] or [ErrIssuerUnavailable]; [Reason] names
// the cause. Verified tokens are cached by their SHA-256 until their exp
// (plus leeway) or for 5 minutes, whichever comes first; failures are not
// cached.
func (v *Verifier) Verify(ctx context.Context, token string) (*Principal, error) {
	now := v.now()
	var key [32]byte
	if v.cache != nil {
		key = sha256.Sum256([]byte(token))
		if e, ok := v.cache.get(key, now); ok {
			if !now.Before(e.expiry.Add(v.leeway)) {
				v.cache.remove(key)
				return nil, invalid(ReasonExpired, nil)
			}
			return e.p, nil
		}
	}
	p, exp, err := v.verify(ctx, token)
	if err != nil {
		return nil, err
	}
	if v.cache != nil && now.Before(exp.Add(v.leeway)) {
		// Served until exp (checked on every hit) or for maxCacheAge.
		v.cache.add(key, p, exp, now.Add(maxCacheAge))
	}
	return p, nil
}

func (v *Verifier) verify(ctx context.Context, token string) (*Principal, time.Time, error) {
	hdr, iss, err := peek(token)
	if err != nil {
		return nil, time.Time{}, err
	}
	if !v.algs[hdr.Alg] {
		return nil, time.Time{}, invalid(ReasonUnsupportedAlgorithm, nil)
	}
	is := v.issuers[iss]
	if is == nil {
		return nil, time.Time{}, invalid(ReasonUnknownIssuer, nil)
	}
	if !is.algSet[hdr.Alg] {
		return nil, time.Time{}, invalid(ReasonUnsupportedAlgorithm, nil)
	}
	if is.requireATJWT && !isATJWT(hdr.Typ) {
		// Before any key is looked up, like the algorithm: an ID token
		// or another JWT of the issuer is refused for its type alone.
		return nil, time.Time{}, invalid(ReasonWrongTokenType, nil)
	}
	idv, _, err := is.idVerifier(ctx)
	if err != nil {
		return nil, time.Time{}, unavailable(fmt.Errorf("issuer %s: %w", is.name, err))
	}
	sc := &sigCheck{kid: hdr.Kid}
	idt, err := idv.Verify(context.WithValue(ctx, sigCheckKey{}, sc), token)
	if err != nil {
		if sc.err != nil {
			return nil, time.Time{}, sc.err
		}
		// The signature was fine or never checked: go-oidc could not parse
		// the token or its claims.
		return nil, time.Time{}, invalid(ReasonMalformed, err)
	}
	var claims jwt.MapClaims
	if err := idt.Claims(&claims); err != nil {
		return nil, time.Time{}, invalid(ReasonMalformed, err)
	}
	return is.checkClaims(claims)
}

type jwsHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// isATJWT reports whether typ names an RFC 9068 access token. RFC 9068 §4:
// resource servers MUST check that typ is "at+jwt" or "application/at+jwt"
// and reject any other value; typ is a media type (RFC 7515 §4.1.9), so
// it compares case-insensitively, and the "application/" prefix may be
// omitted.
func isATJWT(typ string) bool {
	typ = strings.TrimSpace(typ)
	if len(typ) > len("application/") && strings.EqualFold(typ[:len("application/")], "application/") {
		typ = typ[len("application/"):]
	}
	return strings.EqualFold(typ, "at+jwt")
}

// peek decodes a compact JWS's header and its payload's iss, without
// checking anything: enough to pick the issuer and refuse algorithms before
// any key is looked up.
func peek(token string) (jwsHeader, string, error) {
	var hdr jwsHeader
	if len(token) > maxTokenBytes {
		return hdr, "", invalid(ReasonMalformed, errors.New("token too long"))
	}
	h, rest, ok1 := strings.Cut(token, ".")
	p, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(sig, ".") {
		return hdr, "", invalid(ReasonMalformed, errors.New("not a compact JWS"))
	}
	if err := decodeSegment(h, &hdr); err != nil {
		return hdr, "", invalid(ReasonMalformed, fmt.Errorf("header: %w", err))
	}
	var payload struct {
		Iss string `json:"iss"`
	}
	if err := decodeSegment(p, &payload); err != nil {
		return hdr, "", invalid(ReasonMalformed, fmt.Errorf("payload: %w", err))
	}
	return hdr, payload.Iss, nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return errors.New("not base64url")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errors.New("not a JSON object of the right shape")
	}
	return nil
}

// Ready reports whether every issuer can check tokens. It runs the
// discovery of issuers not discovered yet (unless one failed recently and
// is backing off) and returns one line per failing issuer, such as
// "issuer corp: discovery failing: ...", or "issuer corp: key set fetch
// failing: ..." for an issuer whose first key fetch failed. An issuer with
// a jwks_url that has seen no token yet counts as ready.
//
// A readiness check that fails while one IdP of several is down takes
// every replica out of rotation alike; callers may prefer to report it
// without failing.
func (v *Verifier) Ready(ctx context.Context) error {
	errs := make([]error, len(v.order))
	var wg sync.WaitGroup
	for i, is := range v.order {
		wg.Go(func() { errs[i] = is.status(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
