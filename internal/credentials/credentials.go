// Package credentials produces what the gateway sends an upstream to say
// who it is, or whom it calls for: per-tenant static headers, an OAuth
// client-credentials token (RFC 6749 §4.4), the caller's token exchanged
// for one meant for the upstream (RFC 8693), or a token the gateway signs
// itself (see internal/identity).
//
// A [Source] answers for one upstream: given the caller (in the request's
// context, see [With]), it sets the headers of one upstream request,
// caches what it fetched, and forgets it when the upstream refuses it.
// [Source.Partition] names whose credentials they are, so that what one
// identity was shown (upstream sessions, cached lists) is never served to
// another.
//
// It must not send the caller's own token anywhere but to the
// authorization server that issued it (token exchange), and never to an
// upstream. Secrets (client secrets, tokens, keys) never appear in its
// errors or logs.
package credentials

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
)

// The modes, as metrics and audit records name them.
const (
	ModeStatic            = "static"
	ModeClientCredentials = "client_credentials"
	ModeTokenExchange     = "token_exchange"
	ModeSignedIdentity    = "signed_identity"
)

// A Caller is whom an upstream request is made for.
type Caller struct {
	Issuer, Subject, Tenant string
	Scopes                  []string
	// Token is the caller's verified access token: token exchange sends it
	// to the authorization server that issued it, and nothing else reads
	// it.
	Token Secret
}

// Secret is a string that does not print: fmt (whatever the verb, and
// inside structs, where fmt prints the fields themselves), slog and
// encoding/json see only that it is set. The value is held behind a
// pointer, so that not even a struct printed field by field shows it.
type Secret struct{ p *string }

// NewSecret wraps s.
func NewSecret(s string) Secret {
	if s == "" {
		return Secret{}
	}
	return Secret{&s}
}

// Value returns the secret itself.
func (s Secret) Value() string {
	if s.p == nil {
		return ""
	}
	return *s.p
}

func (s Secret) String() string {
	if s.p == nil {
		return ""
	}
	return "REDACTED"
}

// Format prints String whatever the verb.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// GoString is like String.
func (s Secret) GoString() string { return s.String() }

// LogValue logs only that the secret is set.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON encodes only that the secret is set.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

type callerKey struct{}

// With returns ctx carrying c, the caller of the upstream requests made
// with it.
func With(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// From returns the caller ctx carries, or an empty one.
func From(ctx context.Context) *Caller {
	if c, ok := ctx.Value(callerKey{}).(*Caller); ok && c != nil {
		return c
	}
	return &Caller{}
}

// A Source produces the credentials of one upstream's requests.
type Source interface {
	// Mode names the mode (Mode* constants) used for c.
	Mode(c *Caller) string
	// Partition names whose credentials c gets: "" when every caller gets
	// the same, else a value proper to c's tenant or to c.
	Partition(c *Caller) string
	// NeedsCaller reports whether c's requests are made as c, the user:
	// then nothing can be done as c without c's own request (the
	// gateway's own requests, with an empty caller, do without these
	// credentials, and explain lists nothing for such a tenant).
	NeedsCaller(c *Caller) bool
	// Apply sets on h the credentials of one request for the caller ctx
	// carries.
	Apply(ctx context.Context, h http.Header) error
	// Invalidate forgets what Apply used for ctx's caller, after the
	// upstream refused it (HTTP 401), and reports whether another attempt
	// may get something else.
	Invalidate(ctx context.Context) bool
	// Close waits for the source's background work.
	Close()
}

// Error is a failure to get credentials for an upstream. Its message names
// the upstream and the mode, never a secret.
type Error struct {
	Upstream, Mode string
	Err            error
}

func (e *Error) Error() string {
	return "credentials for upstream " + e.Upstream + " (" + e.Mode + "): " + e.Err.Error()
}
func (e *Error) Unwrap() error { return e.Err }

// ErrNoCaller is what a mode that acts for the caller says of a request
// that has none.
var ErrNoCaller = errors.New("no caller to act for")

// principalHash names a caller without its identifiers: issuer, subject and
// tenant, hashed.
func principalHash(c *Caller) string {
	h := sha256.New()
	for _, s := range []string{c.Issuer, c.Subject, c.Tenant} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// setToken puts tok in header name: "Authorization" as a bearer token, any
// other as the token alone.
func setToken(h http.Header, name, tok string) {
	if name == "" || strings.EqualFold(name, "Authorization") {
		h.Set("Authorization", "Bearer "+tok)
		return
	}
	h.Set(name, tok)
}
