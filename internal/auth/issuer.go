package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgw/gateway/internal/config"
)

// An issuer is one trusted token issuer and what the verifier has learnt
// about it. Its fields up to mu are fixed at construction.
type issuer struct {
	name       string
	url        string // issuer_url, equal to the tokens' iss
	jwksURL    string // configured jwks_url; "" means discovery
	algs       []string
	algSet     map[string]bool
	tenant     string   // fixed tenant, or ""
	tenantPath []string // tenant_claim split at dots, or nil
	tenantKey  string   // tenant_claim as written
	// requireATJWT accepts only typ at+jwt (require_at_jwt, RFC 9068 §4).
	requireATJWT bool
	validator    *jwt.Validator

	client *http.Client // for discovery and key fetches; has a timeout
	now    func() time.Time
	log    *slog.Logger
	tune   tuning

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier // nil until discovery has succeeded
	keys     *keySet               // with verifier
	attempt  chan struct{}         // closed when the discovery in flight ends; nil if none
	failures int                   // consecutive failed discoveries
	lastErr  error                 // error of the last discovery, if it failed
	retryAt  time.Time             // no discovery before this, after a failure
}

func newIssuer(ic *config.Issuer, publicURL string, leeway time.Duration, client *http.Client, now func() time.Time, log *slog.Logger, tune tuning) (*issuer, error) {
	aud := ic.Audiences
	if len(aud) == 0 && publicURL != "" {
		aud = []string{publicURL}
	}
	if len(aud) == 0 {
		// Without an audience every token of the issuer would do, whatever
		// resource it was minted for (RFC 8707 §2; MCP authorization,
		// "Token Handling").
		return nil, fmt.Errorf("issuer %s: no audiences and no server.public_url", ic.Name)
	}
	algs := ic.Algorithms
	if len(algs) == 0 {
		algs = defaultAlgorithms
	}
	is := &issuer{
		name:         ic.Name,
		url:          ic.IssuerURL,
		jwksURL:      ic.JWKSURL,
		algs:         algs,
		algSet:       make(map[string]bool, len(algs)),
		tenant:       ic.Tenant,
		client:       client,
		requireATJWT: ic.RequireATJWT,
		now:          now,
		log:          log.With(slog.String("issuer", ic.Name)),
		tune:         tune,
	}
	for _, a := range algs {
		if !asymmetricAlgorithms[a] {
			return nil, fmt.Errorf("issuer %s: algorithm %q not supported", ic.Name, a)
		}
		is.algSet[a] = true
	}
	switch {
	case ic.TenantClaim != "" && ic.Tenant != "":
		return nil, fmt.Errorf("issuer %s: both tenant_claim and tenant set", ic.Name)
	case ic.TenantClaim != "":
		is.tenantKey = ic.TenantClaim
		is.tenantPath = strings.Split(ic.TenantClaim, ".")
	case ic.Tenant == "":
		return nil, fmt.Errorf("issuer %s: neither tenant_claim nor tenant set", ic.Name)
	}
	is.validator = jwt.NewValidator(
		jwt.WithIssuer(ic.IssuerURL),
		jwt.WithAudience(aud...),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(now),
	)
	if is.jwksURL != "" {
		// Nothing to discover; the keys are fetched with the first token.
		is.verifier, is.keys = is.newIDVerifier(is.jwksURL)
	}
	return is, nil
}

// defaultAlgorithms are accepted when an issuer lists none; they are also
// every algorithm the verifier supports. Symmetric algorithms (HS*) are
// absent on purpose: a resource server shares no secret with the IdP, and
// accepting them opens the door to tokens "signed" with a public key.
var defaultAlgorithms = []string{oidc.RS256, oidc.PS256, oidc.ES256, oidc.EdDSA}

var asymmetricAlgorithms = map[string]bool{oidc.RS256: true, oidc.PS256: true, oidc.ES256: true, oidc.EdDSA: true}

// newIDVerifier returns a go-oidc verifier over a rate-limited remote key
// set at jwksURL (see [keyFetcher]). go-oidc checks the signature against
// the issuer's algorithms and the iss claim; exp, nbf, iat and aud are
// checked by [issuer.validator], which knows about leeway and about several
// audiences.
func (is *issuer) newIDVerifier(jwksURL string) (*oidc.IDTokenVerifier, *keySet) {
	f := newKeyFetcher(is.client, is.tune.keyRefresh, is.now)
	f.onFetch = func(err error) {
		if err != nil {
			is.log.Warn("fetching signing keys failed", slog.String("jwks_url", jwksURL), slog.Any("error", err))
		} else {
			is.log.Debug("fetched signing keys", slog.String("jwks_url", jwksURL))
		}
	}
	ctx := oidc.ClientContext(context.Background(), &http.Client{Transport: f})
	ks := &keySet{name: is.name, remote: oidc.NewRemoteKeySet(ctx, jwksURL), fetcher: f}
	v := oidc.NewVerifier(is.url, ks, &oidc.Config{
		SupportedSigningAlgs: is.algs,
		SkipClientIDCheck:    true,
		SkipExpiryCheck:      true,
		Now:                  is.now,
	})
	return v, ks
}

// idVerifier returns the issuer's go-oidc verifier, running discovery first
// if it has not succeeded yet. One discovery runs at a time; the others
// wait for it. After a failure, no discovery runs until a backoff (doubling
// from tune.backoffMin up to tune.backoffMax) has passed, and until then
// the last error is returned at once.
//
// The caller that runs discovery waits for it even if ctx ends, for at most
// tune.fetchTimeout: its result serves every later caller.
func (is *issuer) idVerifier(ctx context.Context) (*oidc.IDTokenVerifier, *keySet, error) {
	for {
		is.mu.Lock()
		if is.verifier != nil {
			v, ks := is.verifier, is.keys
			is.mu.Unlock()
			return v, ks, nil
		}
		if ch := is.attempt; ch != nil {
			is.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, nil, context.Cause(ctx)
			}
		}
		if is.now().Before(is.retryAt) {
			err := is.lastErr
			is.mu.Unlock()
			return nil, nil, err
		}
		ch := make(chan struct{})
		is.attempt = ch
		is.mu.Unlock()

		v, ks, err := is.discover(ctx)

		is.mu.Lock()
		is.attempt = nil
		close(ch)
		if err != nil {
			is.failures++
			is.lastErr = err
			delay := is.tune.backoff(is.failures)
			is.retryAt = is.now().Add(delay)
			is.mu.Unlock()
			is.log.Warn("OIDC discovery failed", slog.Any("error", err), slog.Duration("retry_in", delay))
			return nil, nil, err
		}
		is.verifier, is.keys = v, ks
		is.failures, is.lastErr = 0, nil
		is.mu.Unlock()
		is.log.Info("OIDC discovery succeeded")
		return v, ks, nil
	}
}

// discover fetches the issuer's OpenID configuration. go-oidc checks that
// the document's issuer is exactly issuer_url.
func (is *issuer) discover(ctx context.Context) (*oidc.IDTokenVerifier, *keySet, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), is.tune.fetchTimeout)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, is.client), is.url)
	if err != nil {
		return nil, nil, fmt.Errorf("discovery: %w", err)
	}
	var meta struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKSURI == "" {
		return nil, nil, errors.New("discovery: the OpenID configuration has no jwks_uri")
	}
	v, ks := is.newIDVerifier(meta.JWKSURI)
	return v, ks, nil
}

// status reports why the issuer cannot check tokens, if it cannot: its
// discovery (run now if due) or its first key fetch is failing.
func (is *issuer) status(ctx context.Context) error {
	_, ks, err := is.idVerifier(ctx)
	if err != nil {
		return fmt.Errorf("issuer %s: discovery failing: %w", is.name, err)
	}
	if err := ks.fetcher.status(); err != nil {
		return fmt.Errorf("issuer %s: key set fetch failing: %w", is.name, err)
	}
	return nil
}

// checkClaims validates the verified claims and turns them into a
// principal; it also returns the token's expiry.
func (is *issuer) checkClaims(claims jwt.MapClaims) (*Principal, time.Time, error) {
	if err := is.validator.Validate(claims); err != nil {
		return nil, time.Time{}, classifyClaimsError(claims, err)
	}
	exp, _ := claims.GetExpirationTime() // present: the validator requires it
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return nil, time.Time{}, invalid(ReasonMissingClaim, errors.New("no sub"))
	}
	tenant := is.tenant
	if tenant == "" {
		tenant = is.tenantOf(claims)
		if tenant == "" {
			return nil, time.Time{}, invalid(ReasonMissingTenant, nil)
		}
	}
	scopes, err := scopesOf(claims)
	if err != nil {
		return nil, time.Time{}, invalid(ReasonMalformed, err)
	}
	clientID, _ := claims["client_id"].(string)
	if clientID == "" {
		clientID, _ = claims["azp"].(string)
	}
	p := &Principal{
		Issuer:   is.url,
		Subject:  sub,
		ClientID: clientID,
		Tenant:   tenant,
		Scopes:   scopes,
		Claims:   claims,
	}
	return p, exp.Time, nil
}

// classifyClaimsError turns the golang-jwt validator's joined errors into
// one reason, the most telling first.
func classifyClaimsError(claims jwt.MapClaims, err error) error {
	switch {
	case errors.Is(err, jwt.ErrInvalidType):
		return invalid(ReasonMalformed, err)
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return invalid(ReasonWrongAudience, nil)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return invalid(ReasonUnknownIssuer, nil)
	case errors.Is(err, jwt.ErrTokenExpired):
		return invalid(ReasonExpired, nil)
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return invalid(ReasonNotYetValid, nil)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		if aud, _ := claims.GetAudience(); len(aud) == 0 || len(aud) == 1 && aud[0] == "" {
			return invalid(ReasonWrongAudience, errors.New("no aud"))
		}
		return invalid(ReasonMissingClaim, err)
	}
	return invalid(ReasonMalformed, err)
}

// tenantOf returns the tenant claim, or "" if it is absent, empty or not a
// string. A claim named exactly tenant_claim wins over the dotted path, so
// that namespaced claims ("https://example.com/tenant") work too.
func (is *issuer) tenantOf(claims jwt.MapClaims) string {
	if v, ok := claims[is.tenantKey]; ok {
		s, _ := v.(string)
		return s
	}
	var cur any = map[string]any(claims)
	for _, k := range is.tenantPath {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[k]
	}
	s, _ := cur.(string)
	return s
}

// scopesOf returns the token's scopes: the space-separated "scope" string
// of RFC 9068 §2.2.3 / RFC 8693 §4.2, or else "scp" as an array of strings
// (Okta, Azure AD) or a space-separated string.
func scopesOf(claims jwt.MapClaims) ([]string, error) {
	if v, ok := claims["scope"]; ok {
		s, ok := v.(string)
		if !ok {
			return nil, errors.New("scope is not a string")
		}
		return strings.Fields(s), nil
	}
	switch v := claims["scp"].(type) {
	case nil:
		return nil, nil
	case string:
		return strings.Fields(v), nil
	case []any:
		scopes := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, errors.New("scp holds a non-string")
			}
			scopes = append(scopes, s)
		}
		return scopes, nil
	}
	return nil, errors.New("scp is neither a string nor an array")
}
