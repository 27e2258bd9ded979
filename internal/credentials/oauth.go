package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpgw/gateway/internal/config"
)

const (
	// fetchTimeout bounds one token request, whatever the caller's context.
	fetchTimeout = 10 * time.Second
	// early is how long before its expiry a token is no longer used (a tenth
	// of its life for a short-lived one: see margin), after the background
	// refresh, at refreshAt, had its chance.
	early = 30 * time.Second
	// refreshAt is the share of a token's lifetime after which it is
	// refreshed in the background while still in use.
	refreshAt = 0.75
	// defaultLifetime is the life of a token whose expires_in is missing
	// or not positive.
	defaultLifetime = 5 * time.Minute
)

// endpoint is an authorization server's token endpoint: given, or found
// by discovery on first use (and again after a failure).
type endpoint struct {
	hc       *http.Client
	tokenURL string
	issuer   string
	mu       sync.Mutex
}

func (e *endpoint) url(ctx context.Context) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tokenURL != "" {
		return e.tokenURL, nil
	}
	base := strings.TrimSuffix(e.issuer, "/")
	for _, u := range discoveryURLs(base) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return "", err
		}
		resp, err := e.hc.Do(req)
		if err != nil {
			return "", fmt.Errorf("discovery: %w", err)
		}
		var md struct {
			Issuer        string `json:"issuer"`
			TokenEndpoint string `json:"token_endpoint"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&md)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			continue
		}
		if strings.TrimSuffix(md.Issuer, "/") != base || md.TokenEndpoint == "" {
			return "", errors.New("discovery: the metadata names another issuer, or no token endpoint")
		}
		e.tokenURL = md.TokenEndpoint
		return e.tokenURL, nil
	}
	return "", errors.New("discovery: no authorization server metadata at the issuer")
}

// discoveryURLs are where the metadata of issuer (without a trailing
// slash) may be, in the order 2025-11-25 basic/authorization ("Authorization
// Server Metadata Discovery") tries them: RFC 8414 §3.1 puts the
// well-known segment between the host and the issuer's path, as may
// OpenID Connect Discovery, which also appends it.
func discoveryURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil || u.Path == "" || u.Path == "/" {
		return []string{issuer + "/.well-known/oauth-authorization-server", issuer + "/.well-known/openid-configuration"}
	}
	path := u.Path
	u.Path = "/.well-known/oauth-authorization-server" + path
	as := u.String()
	u.Path = "/.well-known/openid-configuration" + path
	return []string{as, u.String(), issuer + "/.well-known/openid-configuration"}
}

// oauthError describes a token request's failure by its status and the
// standard error fields only (see refusal); sent are the credentials the
// request carried (a code, a verifier, a refresh token, the client's
// secret), which the description must not echo.
func oauthError(err error, sent ...string) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return errors.New(refusal("token request refused", status, re.ErrorCode, re.ErrorDescription, sent...))
	}
	return err
}

// refusal describes an authorization server's refusal (RFC 6749 §5.2):
// what, its HTTP status, its error code if a registered one, and its
// error_description if nothing in it could be a credential. An
// authorization server is not trusted to keep a token out of its answer:
// one that echoes the subject token, or any token, in its description
// would put it in the gateway's log, so a description with a token-like
// word, or with a piece of what the request sent, is left out whole.
func refusal(what string, status int, code, desc string, sent ...string) string {
	msg := fmt.Sprintf("%s (HTTP %d)", what, status)
	if code == "" {
		return msg
	}
	if !registeredErrors[code] {
		return msg + ": an unregistered error code"
	}
	msg += ": " + code
	if desc = truncate(desc, 200); desc != "" && !tokenLike(desc, sent) {
		msg += ": " + desc
	}
	return msg
}

// registeredErrors are the error codes of the token and revocation
// endpoints (RFC 6749 §5.2, RFC 8693 §2.2.2, RFC 8707 §2, RFC 7009 §2.2.1,
// RFC 8628 §3.5, RFC 9449 §5): the only ones shown as sent.
var registeredErrors = map[string]bool{
	"invalid_request": true, "invalid_client": true, "invalid_grant": true, "unauthorized_client": true,
	"unsupported_grant_type": true, "invalid_scope": true, "invalid_target": true, "unsupported_token_type": true,
	"access_denied": true, "server_error": true, "temporarily_unavailable": true, "authorization_pending": true,
	"slow_down": true, "expired_token": true, "invalid_dpop_proof": true, "use_dpop_nonce": true,
}

// minTokenRun is the length of a run of token characters (base64url, and
// the '.', '~', '+', '/' and '=' of JWTs and other encodings) from which a
// description is taken for one carrying a token; minPiece the length of a
// piece of a sent credential that betrays it.
const (
	minTokenRun = 24
	minPiece    = 8
)

// tokenLike reports whether s has a run of minTokenRun token characters,
// or holds minPiece bytes in a row of one of sent.
func tokenLike(s string, sent []string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~+/=", c) >= 0 {
			if run++; run >= minTokenRun {
				return true
			}
		} else {
			run = 0
		}
	}
	for _, v := range sent {
		for i := 0; i+minPiece <= len(v); i++ {
			if strings.Contains(s, v[i:i+minPiece]) {
				return true
			}
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// margin is how long before its expiry a token fetched at fetched stops
// being used: early, or a quarter of its life for a short-lived one.
func margin(fetched, expiry time.Time) time.Duration {
	return min(early, expiry.Sub(fetched)/10)
}

// clientCredentials fetches tokens with the gateway's own client
// (RFC 6749 §4.4): one token for every caller, cached until shortly before
// its expiry, fetched once however many requests need it at the same
// moment, and refreshed in the background once most of its life is over.
type clientCredentials struct {
	upstream string
	header   string
	ep       *endpoint
	cfg      clientcredentials.Config
	hc       *http.Client
	onFetch  func(upstream, mode, outcome string)

	mu        sync.Mutex
	tok       *oauth2.Token
	fetched   time.Time
	flight    chan struct{} // closed when the fetch in progress ends
	flightErr error
	bg        sync.WaitGroup
}

func newClientCredentials(u *config.Upstream, a *config.UpstreamAuth, opts Options) *clientCredentials {
	hc := opts.HTTPClient
	c := &clientCredentials{
		upstream: u.Name, header: a.Header, hc: hc, onFetch: opts.OnFetch,
		ep: &endpoint{hc: hc, tokenURL: a.TokenURL, issuer: a.Issuer},
		cfg: clientcredentials.Config{
			ClientID: a.ClientID, ClientSecret: a.ClientSecret, Scopes: a.Scopes,
			AuthStyle: oauth2.AuthStyleInHeader,
		},
	}
	if a.Resource != "" {
		c.cfg.EndpointParams = map[string][]string{"resource": {a.Resource}}
	}
	return c
}

func (c *clientCredentials) Mode(*Caller) string      { return ModeClientCredentials }
func (c *clientCredentials) Partition(*Caller) string { return "" }
func (c *clientCredentials) NeedsCaller(*Caller) bool { return false }
func (c *clientCredentials) Close()                   { c.bg.Wait() }

func (c *clientCredentials) Apply(ctx context.Context, h http.Header) error {
	tok, err := c.token(ctx)
	if err != nil {
		return &Error{Upstream: c.upstream, Mode: ModeClientCredentials, Err: err}
	}
	setToken(h, c.header, tok)
	return nil
}

func (c *clientCredentials) Invalidate(context.Context) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tok = nil
	return true
}

// token returns a usable token, fetching one if there is none.
func (c *clientCredentials) token(ctx context.Context) (string, error) {
	for {
		c.mu.Lock()
		now := time.Now()
		if t := c.tok; t != nil && (t.Expiry.IsZero() || now.Before(t.Expiry.Add(-margin(c.fetched, t.Expiry)))) {
			if !t.Expiry.IsZero() && c.flight == nil && now.After(c.fetched.Add(time.Duration(refreshAt*float64(t.Expiry.Sub(c.fetched))))) {
				// Most of its life is over: a new one in the background,
				// while this one serves.
				c.startLocked()
			}
			c.mu.Unlock()
			return t.AccessToken, nil
		}
		fl := c.flight
		if fl == nil {
			fl = c.startLocked()
		}
		c.mu.Unlock()
		select {
		case <-fl:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
		c.mu.Lock()
		err, tok := c.flightErr, c.tok
		c.mu.Unlock()
		if tok == nil {
			if err == nil {
				err = errors.New("no token")
			}
			return "", err
		}
	}
}

// startLocked starts a fetch, which outlives the request that needed it
// (others may wait for it) and is bounded by fetchTimeout. c.mu is held.
func (c *clientCredentials) startLocked() chan struct{} {
	fl := make(chan struct{})
	c.flight = fl
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
		defer cancel()
		tok, err := c.fetch(ctx)
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		if c.onFetch != nil {
			c.onFetch(c.upstream, ModeClientCredentials, outcome)
		}
		c.mu.Lock()
		if err == nil {
			c.tok, c.fetched = tok, time.Now()
		}
		c.flightErr = err
		c.flight = nil
		c.mu.Unlock()
		close(fl)
	}()
	return fl
}

func (c *clientCredentials) fetch(ctx context.Context) (*oauth2.Token, error) {
	u, err := c.ep.url(ctx)
	if err != nil {
		return nil, err
	}
	cfg := c.cfg
	cfg.TokenURL = u
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, c.hc))
	if err != nil {
		return nil, oauthError(err, cfg.ClientSecret)
	}
	if !tok.Expiry.IsZero() && !tok.Expiry.After(time.Now()) {
		// expires_in zero or negative: a server's mistake, taken as the
		// usual lifetime rather than as a token to fetch again at once.
		tok.Expiry = time.Now().Add(defaultLifetime)
	}
	return tok, nil
}
