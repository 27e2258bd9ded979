package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/time/rate"
)

// DefaultKeyRefreshInterval is the least time between two fetches of one
// issuer's key set (JWKS).
//
// go-oidc's RemoteKeySet refetches the key set whenever a token names a kid
// it has not cached, as OpenID Connect Core §10.1.1 suggests for key
// rotation. Anyone can mint a token with a random kid, so on its own that
// lets every request become a request to the IdP. The RemoteKeySet's HTTP
// client therefore goes through a [keyFetcher], a RoundTripper that lets
// one fetch per interval through to the IdP and answers the others with the
// key set it fetched last, as if the IdP had not changed it. A flood of
// bogus kids costs the IdP at most one request per interval (go-oidc
// already merges concurrent refreshes into one), and the tokens are refused
// as "unknown key". The price: a key first used within the interval after a
// fetch is unknown until the interval has passed; IdPs publish keys before
// they sign with them.
//
// A failed fetch keeps the previous keys, and the token that needed it gets
// [ErrIssuerUnavailable]. Until a fetch has succeeded there is no key set
// to answer with, so a fetch the limit holds back is an error too. Failed
// fetches count against the limit, which spares an IdP that is down.
const DefaultKeyRefreshInterval = 10 * time.Second

// maxJWKSBytes bounds a JWKS response.
const maxJWKSBytes = 1 << 20

// keyFetchError is a failure to fetch a key set. It travels through go-oidc
// wrapped with %w, so [keySet] can tell it from a bad signature.
type keyFetchError struct{ err error }

func (e *keyFetchError) Error() string { return "fetching signing keys: " + e.err.Error() }
func (e *keyFetchError) Unwrap() error { return e.err }

// A keyFetcher is the transport of one issuer's RemoteKeySet: it limits
// fetches as [DefaultKeyRefreshInterval] says and remembers the kids of the
// last key set. It is safe for concurrent use.
type keyFetcher struct {
	client  *http.Client // does the real fetch, following redirects
	limiter *rate.Limiter
	now     func() time.Time
	onFetch func(err error) // called after each real fetch; may be nil

	mu      sync.Mutex
	body    []byte          // the last key set fetched, nil before the first
	kids    map[string]bool // the kids in body
	lastErr error           // the last fetch's error, nil if it succeeded
}

var (
	_ http.RoundTripper = (*keyFetcher)(nil)
	_ oidc.KeySet       = (*keySet)(nil)
)

func newKeyFetcher(client *http.Client, interval time.Duration, now func() time.Time) *keyFetcher {
	return &keyFetcher{
		client:  client,
		limiter: rate.NewLimiter(rate.Every(interval), 1),
		now:     now,
	}
}

// RoundTrip implements http.RoundTripper.
func (f *keyFetcher) RoundTrip(req *http.Request) (*http.Response, error) {
	if !f.limiter.AllowN(f.now(), 1) {
		f.mu.Lock()
		body, lastErr := f.body, f.lastErr
		f.mu.Unlock()
		if body != nil {
			return jwksResponse(req, body), nil
		}
		if lastErr == nil {
			lastErr = errors.New("no key set fetched yet")
		}
		return nil, &keyFetchError{fmt.Errorf("next attempt rate-limited: %w", lastErr)}
	}
	body, kids, err := f.fetch(req)
	f.mu.Lock()
	f.lastErr = err
	if err == nil {
		f.body, f.kids = body, kids
	}
	f.mu.Unlock()
	if f.onFetch != nil {
		f.onFetch(err)
	}
	if err != nil {
		return nil, &keyFetchError{err}
	}
	return jwksResponse(req, body), nil
}

// fetch GETs the key set req asks for. Whatever the IdP answers other than
// a JSON key set within maxJWKSBytes is an error, so that go-oidc never
// caches a bad answer and every failure reaches it as a transport error.
func (f *keyFetcher) fetch(req *http.Request) ([]byte, map[string]bool, error) {
	out, err := http.NewRequestWithContext(req.Context(), http.MethodGet, req.URL.String(), nil)
	if err != nil {
		return nil, nil, err
	}
	out.Header.Set("Accept", "application/json")
	out.Header.Set("Cache-Control", "no-cache")
	resp, err := f.client.Do(out)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: %s", req.URL.Redacted(), resp.Status)
	}
	if len(body) > maxJWKSBytes {
		return nil, nil, fmt.Errorf("GET %s: key set larger than %d bytes", req.URL.Redacted(), maxJWKSBytes)
	}
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, nil, fmt.Errorf("GET %s: not a JSON key set: %v", req.URL.Redacted(), err)
	}
	kids := make(map[string]bool, len(set.Keys))
	for _, k := range set.Keys {
		kids[k.Kid] = true
	}
	return body, kids, nil
}

func jwksResponse(req *http.Request, body []byte) *http.Response {
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// hasKid reports whether the last key set fetched has a key with this kid.
func (f *keyFetcher) hasKid(kid string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kids[kid]
}

// status returns the error of the last fetch if no fetch has succeeded yet.
func (f *keyFetcher) status() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.body == nil {
		return f.lastErr
	}
	return nil
}

// A keySet is the oidc.KeySet of one issuer: a RemoteKeySet whose failures
// it classifies. go-oidc wraps KeySet errors with %v, so the classified
// error also goes to the [sigCheck] the caller put in the context.
type keySet struct {
	name    string // the issuer's
	remote  *oidc.RemoteKeySet
	fetcher *keyFetcher
	calls   atomic.Int64 // VerifySignature calls, for tests
}

type sigCheckKey struct{}

// A sigCheck carries one token's kid into [keySet.VerifySignature] and the
// classified error out of it.
type sigCheck struct {
	kid string
	err error
}

// VerifySignature implements oidc.KeySet.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	k.calls.Add(1)
	payload, err := k.remote.VerifySignature(ctx, jwt)
	if err == nil {
		return payload, nil
	}
	sc, _ := ctx.Value(sigCheckKey{}).(*sigCheck)
	var kid string
	if sc != nil {
		kid = sc.kid
	}
	var fe *keyFetchError
	switch {
	case errors.As(err, &fe):
		err = unavailable(fmt.Errorf("issuer %s: %w", k.name, fe))
	case ctx.Err() != nil:
		// The caller gave up while go-oidc waited for a fetch.
		err = unavailable(fmt.Errorf("issuer %s: waiting for signing keys: %w", k.name, context.Cause(ctx)))
	case kid != "" && !k.fetcher.hasKid(kid):
		err = invalid(ReasonUnknownKey, nil)
	default:
		err = invalid(ReasonBadSignature, nil)
	}
	if sc != nil {
		sc.err = err
	}
	return nil, err
}
