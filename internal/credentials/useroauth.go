package credentials

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/sync/singleflight"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/vault"
)

// ModeUserOAuth is the mode of upstreams that act as the user, with the
// user's own token from the upstream's authorization server, which the
// user granted through a consent link (see [Broker]).
const ModeUserOAuth = "user_oauth"

// Paths of the consent flow, on the public listener.
const (
	ConsentPath  = "/oauth/consent"
	CallbackPath = "/oauth/callback"
	TokensPath   = "/oauth/tokens"
)

// ConsentRequired says that the caller has no token for an upstream: a
// person must grant the gateway access first, through a consent link
// (see [ConsentRequired.Link]), and the call be retried. It is the Err of
// an [Error]. No link exists until one is asked for, so that requests
// whose failure the client never sees (listings, the upstream sessions of
// initialize) leave no pending consent behind.
type ConsentRequired struct {
	Upstream string
	b        *Broker
	key      vault.Key
}

func (e *ConsentRequired) Error() string {
	return "authorization required at upstream " + e.Upstream + ": the user must link an account"
}

// CallerMustAct says that the caller, not the upstream, must act: what
// remembers upstream failures (the catalog) does not remember this one.
func (e *ConsentRequired) CallerMustAct() bool { return true }

// A Consent is a consent link given to a client.
type Consent struct {
	// URL is the gateway's own page, never the authorization server's.
	URL string
	// ID names the consent: the elicitation id of
	// notifications/elicitation/complete.
	ID string
}

// Link makes a consent link for the caller, single-use and short-lived;
// session, if not empty, is the client session told of its completion.
func (e *ConsentRequired) Link(ctx context.Context, session string) (*Consent, error) {
	return e.b.begin(ctx, e.key, session)
}

// A Broker holds what user_oauth needs beyond one config snapshot: the
// vault, the pending consents, the authorization servers' metadata, the
// refreshes in flight, and the consent pages (see [Broker.Handler]).
type Broker struct {
	store   vault.Store
	hc      *http.Client
	log     *slog.Logger
	now     func() time.Time
	onFetch func(upstream, mode, outcome string)

	cur atomic.Pointer[brokerState]
	// linked, if set, is told of each account linked (see OnLinked).
	linked atomic.Pointer[func(ctx context.Context, upstream, session, elicitationID string)]

	// verify, if set, verifies a token of the gateway's own issuers (see
	// SetVerifier).
	verify atomic.Pointer[func(ctx context.Context, token string) (vault.Principal, error)]

	refresh singleflight.Group
	mu      sync.Mutex
	meta    map[string]*asMeta // by issuer; bounded by maxMeta
	stale   map[string]bool    // token keys an upstream refused; bounded by maxStale
}

// brokerState is what one config gives the broker.
type brokerState struct {
	cfg    *config.Config
	vault  *vault.Vault // nil: no keys (no upstream uses user_oauth)
	origin string       // scheme://host of server.public_url
}

const (
	maxMeta  = 1000
	maxStale = 10000
	// maxFormBytes bounds a consent page's POST body and maxQueryBytes
	// the query of its GETs and of the callback.
	maxFormBytes  = 4 << 10
	maxQueryBytes = 4 << 10
	// metaTTL is how long an authorization server's metadata is reused.
	metaTTL = 10 * time.Minute
)

// BrokerOptions configure a Broker.
type BrokerOptions struct {
	// Store keeps the tokens and pending consents.
	Store      vault.Store
	HTTPClient *http.Client
	Logger     *slog.Logger
	// OnFetch, if set, is told of each code redemption and refresh: the
	// upstream, ModeUserOAuth and "ok" or "error".
	OnFetch func(upstream, mode, outcome string)
}

// NewBroker returns a broker for cfg.
func NewBroker(cfg *config.Config, opts BrokerOptions) (*Broker, error) {
	b := &Broker{store: opts.Store, hc: opts.HTTPClient, log: opts.Logger, now: time.Now, onFetch: opts.OnFetch,
		meta: make(map[string]*asMeta), stale: make(map[string]bool)}
	if b.hc == nil {
		b.hc = &http.Client{Timeout: fetchTimeout}
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if err := b.Configure(cfg); err != nil {
		return nil, err
	}
	return b, nil
}

// VaultLimits are the store bounds cfg sets.
func VaultLimits(cfg *config.Config) vault.Limits {
	v := &cfg.Vault
	return vault.Limits{TokensPerTenant: v.TokensPerTenant, Tokens: v.Tokens, PendingPerPrincipal: v.PendingPerPrincipal, Pending: v.Pending, PendingPerTenant: v.PendingPerTenant}
}

// VaultCipher returns the cipher of cfg's vault keys, nil without keys.
func VaultCipher(cfg *config.Config) (*vault.Cipher, error) {
	if len(cfg.Vault.Keys) == 0 {
		return nil, nil
	}
	keys := make([]vault.KeyMaterial, 0, len(cfg.Vault.Keys))
	for _, k := range cfg.Vault.Keys {
		b, err := config.VaultKeyBytes(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("vault key %q: %w", k.ID, err)
		}
		keys = append(keys, vault.KeyMaterial{ID: k.ID, Secret: b})
	}
	return vault.NewCipher(keys)
}

// Configure makes cfg the broker's config: its vault keys, its upstreams.
func (b *Broker) Configure(cfg *config.Config) error {
	c, err := b.Prepare(cfg)
	if err != nil {
		return err
	}
	b.Apply(c)
	return nil
}

// A BrokerConfig is a config made ready for a broker (see Prepare).
type BrokerConfig struct{ st *brokerState }

// Prepare makes what of cfg the broker needs (its vault keys) ready,
// changing nothing: Apply makes it the broker's. It fails when the keys
// are unusable.
func (b *Broker) Prepare(cfg *config.Config) (*BrokerConfig, error) {
	st := &brokerState{cfg: cfg}
	c, err := VaultCipher(cfg)
	if err != nil {
		return nil, err
	}
	if c != nil && b.store != nil {
		st.vault = vault.New(b.store, c)
	}
	if u, err := url.Parse(cfg.Server.PublicURL); err == nil && u.Host != "" {
		st.origin = u.Scheme + "://" + u.Host
	}
	return &BrokerConfig{st: st}, nil
}

// Apply makes c, which Prepare returned, the broker's config, and its
// vault's bounds those of c's config.
func (b *Broker) Apply(c *BrokerConfig) {
	if ls, ok := b.store.(interface{ SetLimits(vault.Limits) }); ok {
		ls.SetLimits(VaultLimits(c.st.cfg))
	}
	b.cur.Store(c.st)
}

// OnLinked sets fn as what happens once a user linked an account at
// upstream: what was remembered of the upstream's refusals goes, and the
// client session (if any) is told that the consent of elicitationID is
// done (notifications/elicitation/complete).
func (b *Broker) OnLinked(fn func(ctx context.Context, upstream, session, elicitationID string)) {
	b.linked.Store(&fn)
}

// SetVerifier sets fn as how a token of the gateway's own issuers is
// verified, for vault.login: the principal it stands for.
func (b *Broker) SetVerifier(fn func(ctx context.Context, token string) (vault.Principal, error)) {
	b.verify.Store(&fn)
}

// Vault returns the vault of the config in force, nil without keys.
func (b *Broker) Vault() *vault.Vault { return b.cur.Load().vault }

// userOAuth is the source of an upstream in mode user_oauth.
type userOAuth struct {
	upstream, header, url string
	b                     *Broker
}

func newUserOAuth(u *config.Upstream, a *config.UpstreamAuth, opts Options) Source {
	return &userOAuth{upstream: u.Name, header: a.Header, url: u.URL, b: opts.Broker}
}

func (s *userOAuth) Mode(*Caller) string        { return ModeUserOAuth }
func (s *userOAuth) Partition(c *Caller) string { return "u:" + principalHash(c) }
func (s *userOAuth) NeedsCaller(*Caller) bool   { return true }
func (s *userOAuth) Close()                     {}

func (s *userOAuth) key(c *Caller) vault.Key {
	return vault.Key{Principal: vault.Principal{Issuer: c.Issuer, Subject: c.Subject, Tenant: c.Tenant}, Upstream: s.upstream}
}

// Invalidate marks the caller's token for a refresh: the upstream refused
// it.
func (s *userOAuth) Invalidate(ctx context.Context) bool {
	c := From(ctx)
	if c.Subject == "" || s.b == nil {
		return false
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if len(s.b.stale) >= maxStale {
		clear(s.b.stale)
	}
	s.b.stale[s.key(c).String()] = true
	return true
}

func (s *userOAuth) Apply(ctx context.Context, h http.Header) error {
	c := From(ctx)
	if c.Subject == "" {
		return &Error{Upstream: s.upstream, Mode: ModeUserOAuth, Err: ErrNoCaller}
	}
	if s.b == nil {
		return &Error{Upstream: s.upstream, Mode: ModeUserOAuth, Err: errors.New("no token vault")}
	}
	k := s.key(c)
	tok, err := s.b.token(ctx, k)
	if err != nil {
		return &Error{Upstream: s.upstream, Mode: ModeUserOAuth, Err: err}
	}
	if tok != "" {
		setToken(h, s.header, tok)
		return nil
	}
	return &Error{Upstream: s.upstream, Mode: ModeUserOAuth, Err: &ConsentRequired{Upstream: s.upstream, b: s.b, key: k}}
}

// auth returns the effective auth of upstream name for tenant, if it is
// user_oauth, and the upstream.
func (st *brokerState) auth(name, tenant string) (*config.Upstream, *config.UpstreamAuth) {
	u := st.cfg.Upstream(name)
	if u == nil {
		return nil, nil
	}
	var tu *config.TenantUpstream
	for i := range st.cfg.Tenants {
		if st.cfg.Tenants[i].ID == tenant {
			tu = st.cfg.Tenants[i].TenantUpstream(name)
		}
	}
	a := config.EffectiveAuth(u, tu)
	if a == nil || a.Mode != config.AuthUserOAuth {
		return nil, nil
	}
	return u, a
}

// token returns k's access token, refreshed first if it expires soon or
// the upstream refused it; "" when there is none (or the refresh failed,
// and the token is dropped): consent is needed.
func (b *Broker) token(ctx context.Context, k vault.Key) (string, error) {
	st := b.cur.Load()
	if st.vault == nil {
		return "", errors.New("the vault has no keys")
	}
	t, err := st.vault.Token(ctx, k)
	if err != nil {
		return "", errors.New("the token vault is unavailable")
	}
	if t == nil {
		return "", nil
	}
	b.mu.Lock()
	stale := b.stale[k.String()]
	b.mu.Unlock()
	if !stale && (t.Expiry.IsZero() || b.now().Before(t.Expiry.Add(-tokenMargin(t)))) {
		return t.AccessToken, nil
	}
	v, err, _ := b.refresh.Do(k.String(), func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		return b.refreshToken(ctx, st, k, t)
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

// tokenMargin is how long before its expiry a token is refreshed: 30s,
// or a tenth of its life for a short-lived one.
func tokenMargin(t *vault.Token) time.Duration {
	if t.Obtained.IsZero() {
		return early
	}
	return min(early, t.Expiry.Sub(t.Obtained)/10)
}

// refreshToken refreshes t, k's token, and stores the new one. A refusal
// drops t: the next call asks for consent again.
func (b *Broker) refreshToken(ctx context.Context, st *brokerState, k vault.Key, t *vault.Token) (string, error) {
	defer func() {
		b.mu.Lock()
		delete(b.stale, k.String())
		b.mu.Unlock()
	}()
	drop := func() (string, error) {
		if _, err := st.vault.Delete(ctx, k); err != nil {
			return "", errors.New("the token vault is unavailable")
		}
		return "", nil
	}
	if t.RefreshToken == "" {
		return drop()
	}
	u, a := st.auth(k.Upstream, k.Tenant)
	if a == nil {
		return drop()
	}
	c := b.forIssuer(b.conn(ctx, st, u, a), t.Issuer)
	meta, err := b.metadata(ctx, c, t.Issuer)
	if err != nil {
		return "", err
	}
	conf := b.oauthConfig(st, a, meta)
	nt, err := conf.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, c.hc), &oauth2.Token{
		RefreshToken: t.RefreshToken, Expiry: time.Unix(1, 0),
	}).Token()
	b.fetched(k.Upstream, err)
	if err != nil {
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) {
			return "", oauthError(err, t.RefreshToken, a.ClientSecret)
		}
		// Another replica may have refreshed it first, with a refresh
		// token that rotates: then the vault holds the new one.
		if cur, _ := st.vault.Token(ctx, k); cur != nil && cur.RefreshToken != t.RefreshToken {
			return cur.AccessToken, nil
		}
		b.log.Info("user_oauth: refresh refused; the token is dropped", "upstream", k.Upstream, "error", oauthError(err, t.RefreshToken, a.ClientSecret))
		return drop()
	}
	saved := b.fromOAuth(nt, meta.Issuer)
	if saved.RefreshToken == "" {
		saved.RefreshToken = t.RefreshToken
	}
	if err := st.vault.Save(ctx, k, saved); err != nil {
		return "", errors.New("the token vault is unavailable")
	}
	return saved.AccessToken, nil
}

// fetched counts a token request for upstream.
func (b *Broker) fetched(upstream string, err error) {
	if b.onFetch == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	b.onFetch(upstream, ModeUserOAuth, outcome)
}

func (b *Broker) fromOAuth(t *oauth2.Token, issuer string) *vault.Token {
	now := b.now()
	out := &vault.Token{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, TokenType: t.TokenType,
		Expiry: t.Expiry, Issuer: issuer, Obtained: now}
	if s, ok := t.Extra("scope").(string); ok {
		out.Scope = s
	}
	if !out.Expiry.IsZero() && !out.Expiry.After(now) {
		out.Expiry = now.Add(defaultLifetime)
	}
	return out
}

// redirectURI is the callback's URL.
func (st *brokerState) redirectURI() string { return st.origin + CallbackPath }

// resource is the RFC 8707 resource the tokens of a are for: the
// configured one, else the upstream's URL (2025-11-25 basic/authorization,
// "Resource Parameter Implementation").
func resource(u *config.Upstream, a *config.UpstreamAuth) string {
	if a.Resource != "" {
		return a.Resource
	}
	return u.URL
}

func (b *Broker) oauthConfig(st *brokerState, a *config.UpstreamAuth, meta *asMeta) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	if a.ClientSecret == "" {
		style = oauth2.AuthStyleInParams // a public client: client_id in the form
	}
	return &oauth2.Config{
		ClientID: a.ClientID, ClientSecret: a.ClientSecret, Scopes: a.Scopes, RedirectURL: st.redirectURI(),
		Endpoint: oauth2.Endpoint{AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint, AuthStyle: style},
	}
}

// begin stores a pending consent for k, for the client session (if any),
// and returns what the client is told.
func (b *Broker) begin(ctx context.Context, k vault.Key, session string) (*Consent, error) {
	st := b.cur.Load()
	if st.vault == nil {
		return nil, errors.New("the vault has no keys")
	}
	p := &vault.Pending{Principal: k.Principal, Upstream: k.Upstream, Session: session,
		Expires: b.now().Add(st.cfg.Vault.ConsentTTL.D())}
	id, err := st.vault.Begin(ctx, p)
	switch {
	case errors.Is(err, vault.ErrFull):
		return nil, errors.New("too many consents are pending at the gateway; try again later")
	case err != nil:
		return nil, errors.New("the token vault is unavailable")
	}
	return &Consent{URL: st.origin + ConsentPath + "?id=" + id, ID: id}, nil
}

// asMeta is what the gateway uses of an authorization server's metadata
// (RFC 8414).
type asMeta struct {
	Issuer                string   `json:"issuer"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	RevocationEndpoint    string   `json:"revocation_endpoint"`
	PKCEMethods           []string `json:"code_challenge_methods_supported"`
	fetched               time.Time
}
