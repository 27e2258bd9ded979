package credentials

import (
	"context"
	"errors"
	"net/http"

	"github.com/mcpgw/gateway/internal/config"
)

// signed sends a token the gateway signs itself for the caller (see
// internal/identity): the upstream verifies it against the gateway's
// published keys and learns who calls without seeing the caller's token.
type signed struct {
	upstream, header, audience string
	scopes                     []string
	signer                     Signer
}

func newSigned(u *config.Upstream, a *config.UpstreamAuth, opts Options) *signed {
	aud := a.Audience
	if aud == "" {
		aud = u.URL
	}
	return &signed{upstream: u.Name, header: a.Header, audience: aud, scopes: a.Scopes, signer: opts.Signer}
}

func (s *signed) Mode(*Caller) string             { return ModeSignedIdentity }
func (s *signed) Partition(c *Caller) string      { return "u:" + principalHash(c) }
func (s *signed) NeedsCaller(*Caller) bool        { return true }
func (s *signed) Invalidate(context.Context) bool { return false }
func (s *signed) Close()                          {}

func (s *signed) Apply(ctx context.Context, h http.Header) error {
	c := From(ctx)
	if c.Subject == "" {
		return &Error{Upstream: s.upstream, Mode: ModeSignedIdentity, Err: ErrNoCaller}
	}
	if s.signer == nil {
		return &Error{Upstream: s.upstream, Mode: ModeSignedIdentity, Err: errors.New("no signing key configured")}
	}
	scopes := s.scopes
	if scopes == nil {
		scopes = c.Scopes
	}
	tok, err := s.signer.Cached(c.Subject, c.Tenant, scopes, s.audience)
	if err != nil {
		return &Error{Upstream: s.upstream, Mode: ModeSignedIdentity, Err: err}
	}
	setToken(h, s.header, tok)
	return nil
}
