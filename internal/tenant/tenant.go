// Package tenant turns a principal's tenant id into that tenant's view of
// the configuration: which upstreams exist for it.
//
// Every layer below the router asks the tenant view, never the raw config, so
// per-tenant rules (allowlists, policies) land here without touching the
// router's handlers.
package tenant

import (
	"context"
	"errors"

	"github.com/mcpgw/gateway/internal/config"
)

// DefaultID is the tenant of requests when no tenants are configured.
const DefaultID = "default"

// ErrUnknown is returned for a tenant id the config does not name.
var ErrUnknown = errors.New("unknown tenant")

// A View is what one tenant may see and use.
type View struct {
	ID string
	// Upstreams are the names of the upstreams that exist for the tenant, in
	// config order.
	Upstreams []string
}

// Allows reports whether upstream name exists for the tenant.
func (v *View) Allows(name string) bool {
	for _, u := range v.Upstreams {
		if u == name {
			return true
		}
	}
	return false
}

// Resolve returns tenant id's view of cfg. Until per-tenant rules exist every
// tenant sees every upstream.
func Resolve(cfg *config.Config, id string) (*View, error) {
	if id == "" {
		return nil, ErrUnknown
	}
	v := &View{ID: id}
	for _, u := range cfg.Upstreams {
		v.Upstreams = append(v.Upstreams, u.Name)
	}
	return v, nil
}

type viewKey struct{}

// WithView returns a copy of ctx carrying v.
func WithView(ctx context.Context, v *View) context.Context {
	return context.WithValue(ctx, viewKey{}, v)
}

// FromContext returns the tenant view in ctx, if any.
func FromContext(ctx context.Context) (*View, bool) {
	v, ok := ctx.Value(viewKey{}).(*View)
	return v, ok && v != nil
}
