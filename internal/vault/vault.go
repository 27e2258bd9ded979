// Package vault keeps the tokens users granted the gateway at upstreams'
// authorization servers (auth mode user_oauth), and the consents pending
// that will get them.
//
// A token is keyed by whom it acts for and where: the principal (issuer,
// subject, tenant) and the upstream. It is stored encrypted
// (AES-256-GCM, see [Cipher]) with its key as additional data, so that a
// stored value moved under another key does not decrypt; what a store
// holds is useless without the vault's keys. A [Store] keeps the
// encrypted values: [Memory] for one replica, [Redis] for many.
//
// A pending consent is single-use ([Vault.Take] removes it), expires, and
// is bounded per principal, per tenant and in all: a principal that
// starts many loses its oldest, a tenant whose principals hold its share
// loses its oldest, and when all are taken the tenant that holds the most
// loses its oldest: the newcomer is never the one refused.
//
// Nothing here logs or returns a token outside [Vault.Token]; [Info] has
// no values.
package vault

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Errors of the stores.
var (
	// ErrFull says a bound was reached: the tenant's or the store's
	// tokens, or the pending consents in all.
	ErrFull = errors.New("vault: full")
	// ErrNotFound says there is no such pending consent (never was, used,
	// or expired: the same to whoever asks).
	ErrNotFound = errors.New("vault: no such consent, or it expired or was used")
)

// A Principal is whom a token acts for: a verified caller of the gateway.
type Principal struct {
	Issuer  string `json:"iss"`
	Subject string `json:"sub"`
	Tenant  string `json:"tenant"`
}

// Hash names p without its identifiers.
func (p Principal) Hash() string { return hashOf(p.Issuer, p.Subject, p.Tenant) }

// A Key names one token: its principal's, for one upstream.
type Key struct {
	Principal
	Upstream string `json:"upstream"`
}

// String names k for maps: its hash.
func (k Key) String() string { return k.id() }

// id is the store's name of k: a hash, so that no identifier reaches a
// store key (and none is too long for one).
func (k Key) id() string { return hashOf(k.Issuer, k.Subject, k.Tenant, k.Upstream) }

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:20])
}

// A Token is what an authorization server granted a user, for one
// upstream.
type Token struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	Scope        string    `json:"scope,omitempty"`
	// Issuer is the authorization server that granted it, whose token
	// and revocation endpoints refresh and revoke it.
	Issuer string `json:"issuer"`
	// Obtained is when it was granted or refreshed.
	Obtained time.Time `json:"obtained,omitzero"`
}

// String never shows the token.
func (t *Token) String() string { return "vault.Token(REDACTED)" }

// Format prints String whatever the verb.
func (t *Token) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(t.String())) }

// Info describes a stored token without its values.
type Info struct {
	Key
	Updated time.Time // when it was stored
	Expiry  time.Time // of its access token; zero: unknown
	Refresh bool      // it has a refresh token
}

// A Pending is a consent waiting for its user: first the link's (ID, no
// Verifier), then, once confirmed, the authorization's (ID is the OAuth
// state, Verifier the PKCE verifier).
type Pending struct {
	ID string `json:"-"`
	Principal
	Upstream string `json:"upstream"`
	// Elicitation is the elicitation id the client was given, and
	// Session its session (empty for a 2026-07-28 client): where
	// notifications/elicitation/complete goes.
	Elicitation string `json:"elicitation"`
	Session     string `json:"session,omitempty"`
	Verifier    string `json:"verifier,omitempty"`
	// Browser is the value of the cookie of the browser that confirmed.
	Browser string `json:"browser,omitempty"`
	// Login says the authorization is the sign-in at the gateway's own
	// authorization server that must show the principal first.
	Login bool `json:"login,omitempty"`
	// Issuer is the authorization server the authorization went to.
	Issuer  string    `json:"issuer,omitempty"`
	Expires time.Time `json:"expires"`
}

// record is what a store keeps of a token: its metadata in clear, its
// values sealed.
type record struct {
	Key     Key       `json:"key"`
	Updated time.Time `json:"updated"`
	Expiry  time.Time `json:"expiry,omitzero"`
	Refresh bool      `json:"refresh,omitempty"`
	Sealed  []byte    `json:"sealed"`
}

// A Filter selects tokens to list or delete: an empty field matches any.
type Filter struct {
	Tenant, Subject, Upstream string
}

func (f Filter) match(k Key) bool {
	return (f.Tenant == "" || f.Tenant == k.Tenant) && (f.Subject == "" || f.Subject == k.Subject) &&
		(f.Upstream == "" || f.Upstream == k.Upstream)
}

// A Store keeps the vault's records, values encrypted by the [Vault].
type Store interface {
	// GetToken returns the record of k's token, nil if none.
	GetToken(ctx context.Context, k Key) ([]byte, error)
	// PutToken stores the record of k's token, replacing k's: ErrFull
	// when k is new and its tenant's, or the store's, tokens are at
	// their bound.
	PutToken(ctx context.Context, k Key, rec []byte) error
	// DeleteToken removes k's token, reporting whether there was one.
	DeleteToken(ctx context.Context, k Key) (bool, error)
	// Tokens returns the records of the tokens f selects.
	Tokens(ctx context.Context, f Filter) ([][]byte, error)
	// PutPending stores pending consent id of principal (a hash) of
	// tenant until expires. The principal's oldest goes when it has its
	// bound already, the tenant's oldest when the tenant has its share,
	// and, when the store holds its bound in all, the oldest of the
	// tenant that holds the most: a newcomer is not refused for what
	// others hold. ErrFull only when the bound in all is zero.
	PutPending(ctx context.Context, id, principal, tenant string, rec []byte, expires time.Time) error
	// TakePending removes pending consent id and returns it: ErrNotFound
	// when there is none (expired, taken).
	TakePending(ctx context.Context, id string) ([]byte, error)
	// GetPending returns pending consent id, leaving it: ErrNotFound when
	// there is none.
	GetPending(ctx context.Context, id string) ([]byte, error)
}

// A Vault encrypts what it stores in a [Store].
type Vault struct {
	store  Store
	cipher *Cipher
	now    func() time.Time
}

// New returns a vault keeping its records in s, encrypted with c.
func New(s Store, c *Cipher) *Vault { return &Vault{store: s, cipher: c, now: time.Now} }

// Token returns k's token, nil if there is none (or it does not decrypt
// with the vault's keys: a key removed too early).
func (v *Vault) Token(ctx context.Context, k Key) (*Token, error) {
	raw, err := v.store.GetToken(ctx, k)
	if err != nil || raw == nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil || rec.Key != k {
		return nil, nil
	}
	plain, err := v.cipher.Open(rec.Sealed, []byte(k.id()))
	if err != nil {
		return nil, nil
	}
	var t Token
	if err := json.Unmarshal(plain, &t); err != nil {
		return nil, nil
	}
	return &t, nil
}

// Save stores t as k's token.
func (v *Vault) Save(ctx context.Context, k Key, t *Token) error {
	plain, err := json.Marshal(t)
	if err != nil {
		return err
	}
	rec := record{Key: k, Updated: v.now().UTC(), Expiry: t.Expiry, Refresh: t.RefreshToken != "",
		Sealed: v.cipher.Seal(plain, []byte(k.id()))}
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return v.store.PutToken(ctx, k, raw)
}

// Delete removes k's token, reporting whether there was one.
func (v *Vault) Delete(ctx context.Context, k Key) (bool, error) { return v.store.DeleteToken(ctx, k) }

// List describes the tokens f selects, without their values.
func (v *Vault) List(ctx context.Context, f Filter) ([]Info, error) {
	raws, err := v.store.Tokens(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(raws))
	for _, raw := range raws {
		var rec record
		if json.Unmarshal(raw, &rec) != nil || !f.match(rec.Key) {
			continue
		}
		out = append(out, Info{Key: rec.Key, Updated: rec.Updated, Expiry: rec.Expiry, Refresh: rec.Refresh})
	}
	return out, nil
}

// NewID returns a random identifier of 128 bits, URL-safe.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Begin stores p as pending until p.Expires, under a new random id (set
// in p.ID and returned).
func (v *Vault) Begin(ctx context.Context, p *Pending) (string, error) {
	p.ID = NewID()
	plain, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	sealed := v.cipher.Seal(plain, []byte("pending:"+p.ID))
	if err := v.store.PutPending(ctx, p.ID, p.Principal.Hash(), p.Tenant, sealed, p.Expires); err != nil {
		return "", err
	}
	return p.ID, nil
}

// Take removes pending consent id and returns it: ErrNotFound if there is
// none, or it expired.
func (v *Vault) Take(ctx context.Context, id string) (*Pending, error) {
	raw, err := v.store.TakePending(ctx, id)
	if err != nil {
		return nil, err
	}
	return v.pending(id, raw)
}

// Peek returns pending consent id without using it up.
func (v *Vault) Peek(ctx context.Context, id string) (*Pending, error) {
	raw, err := v.store.GetPending(ctx, id)
	if err != nil {
		return nil, err
	}
	return v.pending(id, raw)
}

func (v *Vault) pending(id string, raw []byte) (*Pending, error) {
	plain, err := v.cipher.Open(raw, []byte("pending:"+id))
	if err != nil {
		return nil, ErrNotFound
	}
	var p Pending
	if err := json.Unmarshal(plain, &p); err != nil || !v.now().Before(p.Expires) {
		return nil, ErrNotFound
	}
	p.ID = id
	return &p, nil
}
