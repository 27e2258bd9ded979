package credentials

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/config"
)

// maxExchanged bounds the exchanged tokens one upstream's source keeps;
// when full, the expired go, then the half that expires first.
const maxExchanged = 10000

// exchange trades the caller's verified access token for one whose
// audience is the upstream (RFC 8693), at the authorization server that
// issued it, authenticating as the gateway's own client. Tokens are cached
// per caller (issuer, subject, tenant, scopes) under a hash, never under
// the token, until shortly before their expiry.
type exchange struct {
	upstream, header   string
	issuer             string // the configured issuer, without a trailing slash; "" with token_url
	ep                 *endpoint
	hc                 *http.Client
	clientID, secret   string
	scopes             []string
	resource, audience string
	onFetch            func(upstream, mode, outcome string)

	// actor, if set, gets the gateway's own token, sent as actor_token.
	actor *clientCredentials

	flights map[[32]byte]*flight // by caller key, guarded by mu
	bg      sync.WaitGroup       // exchanges in flight, which outlive the requests that left
	mu      sync.Mutex
	cache   map[[32]byte]exchanged
}

type exchanged struct {
	token           string
	fetched, expiry time.Time
}

func newExchange(u *config.Upstream, a *config.UpstreamAuth, opts Options) *exchange {
	hc := opts.HTTPClient
	x := &exchange{
		upstream: u.Name, header: a.Header, hc: hc, onFetch: opts.OnFetch,
		issuer:   strings.TrimSuffix(a.Issuer, "/"),
		ep:       &endpoint{hc: hc, tokenURL: a.TokenURL, issuer: a.Issuer},
		clientID: a.ClientID, secret: a.ClientSecret, scopes: slices.Clone(a.Scopes),
		resource: a.Resource, audience: a.Audience,
		cache: make(map[[32]byte]exchanged),
	}
	if a.Actor {
		x.actor = newClientCredentials(u, a, opts)
		x.actor.ep = x.ep
	}
	return x
}

func (x *exchange) Mode(*Caller) string        { return ModeTokenExchange }
func (x *exchange) Partition(c *Caller) string { return "u:" + principalHash(c) }
func (x *exchange) NeedsCaller(*Caller) bool   { return true }
func (x *exchange) Close() {
	x.bg.Wait()
	if x.actor != nil {
		x.actor.Close()
	}
}

func (x *exchange) key(c *Caller) [32]byte {
	h := sha256.New()
	for _, s := range append([]string{c.Issuer, c.Subject, c.Tenant, x.upstream}, c.Scopes...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func (x *exchange) Invalidate(ctx context.Context) bool {
	k := x.key(From(ctx))
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.cache, k)
	return true
}

func (x *exchange) Apply(ctx context.Context, h http.Header) error {
	c := From(ctx)
	if c.Token.Value() == "" {
		return &Error{Upstream: x.upstream, Mode: ModeTokenExchange, Err: ErrNoCaller}
	}
	k := x.key(c)
	x.mu.Lock()
	e, ok := x.cache[k]
	x.mu.Unlock()
	if ok && time.Now().Before(e.expiry.Add(-margin(e.fetched, e.expiry))) {
		setToken(h, x.header, e.token)
		return nil
	}
	if x.issuer != "" && strings.TrimSuffix(c.Issuer, "/") != x.issuer {
		// The caller's token goes only to the server that issued it.
		return &Error{Upstream: x.upstream, Mode: ModeTokenExchange, Err: errors.New("the caller's token was issued by another issuer than the one configured")}
	}
	fl := x.start(ctx, k, c)
	select {
	case <-fl.done:
	case <-ctx.Done():
		// The exchange goes on, bounded by fetchTimeout, for whoever
		// needs it next; Close waits for it.
		return &Error{Upstream: x.upstream, Mode: ModeTokenExchange, Err: context.Cause(ctx)}
	}
	if fl.err != nil {
		return &Error{Upstream: x.upstream, Mode: ModeTokenExchange, Err: fl.err}
	}
	setToken(h, x.header, fl.e.token)
	return nil
}

// flight is one exchange in progress; e and err are set before done is
// closed.
type flight struct {
	done chan struct{}
	e    exchanged
	err  error
}

// start returns the exchange in progress for key k, starting one for
// caller c if there is none: one exchange per caller at a time, however
// many requests need it. It outlives the request that started it, bounded
// by fetchTimeout, and Close waits for it.
func (x *exchange) start(ctx context.Context, k [32]byte, c *Caller) *flight {
	x.mu.Lock()
	defer x.mu.Unlock()
	if fl := x.flights[k]; fl != nil {
		return fl
	}
	fl := &flight{done: make(chan struct{})}
	if x.flights == nil {
		x.flights = make(map[[32]byte]*flight)
	}
	x.flights[k] = fl
	x.bg.Add(1)
	go func() {
		defer x.bg.Done()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		e, err := x.fetch(fctx, c)
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		if x.onFetch != nil {
			x.onFetch(x.upstream, ModeTokenExchange, outcome)
		}
		if err == nil {
			x.store(k, e)
		}
		x.mu.Lock()
		delete(x.flights, k)
		x.mu.Unlock()
		fl.e, fl.err = e, err
		close(fl.done)
	}()
	return fl
}

func (x *exchange) store(k [32]byte, e exchanged) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.cache) >= maxExchanged {
		now := time.Now()
		for key, v := range x.cache {
			if now.After(v.expiry) {
				delete(x.cache, key)
			}
		}
		if len(x.cache) >= maxExchanged {
			ends := make([]time.Time, 0, len(x.cache))
			for _, v := range x.cache {
				ends = append(ends, v.expiry)
			}
			slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
			cut := ends[len(ends)/2]
			for key, v := range x.cache {
				if !v.expiry.After(cut) {
					delete(x.cache, key)
				}
			}
		}
	}
	x.cache[k] = e
}

// fetch performs one exchange (RFC 8693 §2.1).
func (x *exchange) fetch(ctx context.Context, c *Caller) (exchanged, error) {
	u, err := x.ep.url(ctx)
	if err != nil {
		return exchanged{}, err
	}
	form := url.Values{
		"grant_type":           {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":        {c.Token.Value()},
		"subject_token_type":   {"urn:ietf:params:oauth:token-type:access_token"},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	if x.resource != "" {
		form.Set("resource", x.resource)
	}
	if x.audience != "" {
		form.Set("audience", x.audience)
	}
	if len(x.scopes) > 0 {
		form.Set("scope", strings.Join(x.scopes, " "))
	}
	if x.actor != nil {
		tok, err := x.actor.token(ctx)
		if err != nil {
			return exchanged{}, fmt.Errorf("the gateway's actor token: %w", err)
		}
		form.Set("actor_token", tok)
		form.Set("actor_token_type", "urn:ietf:params:oauth:token-type:access_token")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return exchanged{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(x.clientID), url.QueryEscape(x.secret))
	resp, err := x.hc.Do(req)
	if err != nil {
		// net/http's *url.Error quotes the URL; the cause alone is enough.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return exchanged{}, fmt.Errorf("token exchange: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken      string `json:"access_token"`
		IssuedTokenType  string `json:"issued_token_type"`
		TokenType        string `json:"token_type"`
		ExpiresIn        int64  `json:"expires_in"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil && resp.StatusCode == http.StatusOK {
		return exchanged{}, errors.New("token exchange: malformed response")
	}
	if resp.StatusCode != http.StatusOK || body.AccessToken == "" {
		// Nothing of the answer but its registered fields, and none that
		// echoes what was sent: the caller's token above all.
		sent := []string{c.Token.Value(), x.secret, form.Get("actor_token")}
		return exchanged{}, errors.New(refusal("token exchange refused", resp.StatusCode, body.Error, body.ErrorDescription, sent...))
	}
	if !strings.EqualFold(body.TokenType, "bearer") {
		return exchanged{}, errors.New("token exchange: the token_type is not Bearer")
	}
	ttl := time.Duration(body.ExpiresIn) * time.Second
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	now := time.Now()
	return exchanged{token: body.AccessToken, fetched: now, expiry: now.Add(ttl)}, nil
}
