package credentials

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/mcpgw/gateway/internal/config"
)

// Options configure the sources of a config.
type Options struct {
	// HTTPClient talks to authorization servers; nil means a default one.
	HTTPClient *http.Client
	// Signer mints signed-identity tokens; required by that mode.
	Signer Signer
	// OnFetch, if set, is told of every token fetch: the upstream, the
	// mode and "ok" or "error".
	OnFetch func(upstream, mode, outcome string)
	Logger  *slog.Logger
	// Broker holds users' tokens; required by mode user_oauth.
	Broker *Broker
}

// A Signer mints the gateway's own tokens (see internal/identity).
type Signer interface {
	Cached(subject, tenant string, scopes []string, audience string) (string, error)
}

// ForUpstream returns the source of upstream u's credentials under cfg:
// its auth, and each tenant's headers and auth (or, for a stdio upstream,
// env) for it. nil means static
// headers alone, the same for every caller (the upstream client sends
// those).
func ForUpstream(cfg *config.Config, u *config.Upstream, opts Options) Source {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: fetchTimeout}
	}
	base := forAuth(u, u.Auth, nil, opts)
	byTenant := make(map[string]tenantSource)
	for i := range cfg.Tenants {
		t := &cfg.Tenants[i]
		tu := t.TenantUpstream(u.Name)
		// A tenant's env for a stdio upstream is credentials too, passed
		// to its own process rather than in a header: its source sets
		// nothing, but its partition is the tenant's.
		ownEnv := u.IsStdio() && len(tu.GetEnv()) > 0
		if tu == nil || (len(tu.Headers) == 0 && tu.Auth == nil && !ownEnv) {
			continue
		}
		byTenant[t.ID] = tenantSource{forAuth(u, config.EffectiveAuth(u, tu), tu.Headers, opts), "t:" + t.ID + "/"}
	}
	if base == nil && len(byTenant) == 0 {
		return nil
	}
	return &perTenant{base: base, byTenant: byTenant}
}

// forAuth returns the source of auth a with static headers hs on top of
// the upstream's, or nil for neither.
func forAuth(u *config.Upstream, a *config.UpstreamAuth, hs map[string]string, opts Options) Source {
	var s Source
	if a != nil {
		switch a.Mode {
		case config.AuthClientCredentials:
			s = newClientCredentials(u, a, opts)
		case config.AuthTokenExchange:
			s = newExchange(u, a, opts)
		case config.AuthSignedIdentity:
			s = newSigned(u, a, opts)
		case config.AuthUserOAuth:
			s = newUserOAuth(u, a, opts)
		}
	}
	if len(hs) == 0 {
		return s
	}
	st := &static{h: make(http.Header, len(hs))}
	for k, v := range hs {
		st.h.Set(k, v)
	}
	if s == nil {
		return st
	}
	return &both{static: st, auth: s}
}

// perTenant is an upstream's source: the tenant's, where it has one, else
// the upstream's.
type perTenant struct {
	base     Source // nil: static headers only
	byTenant map[string]tenantSource
}

// tenantSource is a tenant's own source, and the prefix of its partitions.
type tenantSource struct {
	Source
	partition string // "t:<tenant>/"
}

// pick returns c's source: its tenant's, with the prefix of that tenant's
// partitions, or the upstream's, with none.
func (p *perTenant) pick(c *Caller) (Source, string) {
	if ts, ok := p.byTenant[c.Tenant]; ok && c.Tenant != "" {
		return ts.Source, ts.partition
	}
	return p.base, ""
}

func (p *perTenant) Mode(c *Caller) string {
	if s, _ := p.pick(c); s != nil {
		return s.Mode(c)
	}
	return ModeStatic
}

func (p *perTenant) Partition(c *Caller) string {
	s, prefix := p.pick(c)
	if s == nil {
		return prefix
	}
	if part := s.Partition(c); part != "" {
		return prefix + part
	}
	return prefix // no allocation on a call of a tenant with static credentials
}

func (p *perTenant) NeedsCaller(c *Caller) bool {
	s, _ := p.pick(c)
	return s != nil && s.NeedsCaller(c)
}

func (p *perTenant) Apply(ctx context.Context, h http.Header) error {
	if s, _ := p.pick(From(ctx)); s != nil {
		return s.Apply(ctx, h)
	}
	return nil
}

func (p *perTenant) Invalidate(ctx context.Context) bool {
	if s, _ := p.pick(From(ctx)); s != nil {
		return s.Invalidate(ctx)
	}
	return false
}

func (p *perTenant) Close() {
	if p.base != nil {
		p.base.Close()
	}
	for _, ts := range p.byTenant {
		if ts.Source != nil {
			ts.Close()
		}
	}
}

// static adds fixed headers.
type static struct{ h http.Header }

func (s *static) Mode(*Caller) string             { return ModeStatic }
func (s *static) Partition(*Caller) string        { return "" }
func (s *static) NeedsCaller(*Caller) bool        { return false }
func (s *static) Invalidate(context.Context) bool { return false }
func (s *static) Close()                          {}
func (s *static) Apply(_ context.Context, h http.Header) error {
	for k, v := range s.h {
		h[k] = v
	}
	return nil
}

// both is static headers, then a token mode's.
type both struct {
	static *static
	auth   Source
}

func (b *both) Mode(c *Caller) string               { return b.auth.Mode(c) }
func (b *both) Partition(c *Caller) string          { return b.auth.Partition(c) }
func (b *both) NeedsCaller(c *Caller) bool          { return b.auth.NeedsCaller(c) }
func (b *both) Invalidate(ctx context.Context) bool { return b.auth.Invalidate(ctx) }
func (b *both) Close()                              { b.auth.Close() }
func (b *both) Apply(ctx context.Context, h http.Header) error {
	_ = b.static.Apply(ctx, h)
	return b.auth.Apply(ctx, h)
}
