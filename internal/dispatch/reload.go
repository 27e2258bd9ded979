package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/guard"
	"github.com/mcpgw/gateway/internal/identity"
	"github.com/mcpgw/gateway/internal/policy"
)

// A Generation is a config made ready to serve: what of it can fail (the
// signing keys, the vault keys) is built, and nothing the Server shares
// is changed. SetConfig makes it the Server's; one that is not used needs
// no cleaning up.
type Generation struct {
	cfg     *config.Config
	signer  *identity.Signer
	keysSum string
	broker  *credentials.BrokerConfig
	policy  *policy.Engine
	guards  *guard.Engine
	// pdpCreds are the gateway's token for the policy decision point;
	// nil without policy.pdp.auth. The State built from the generation
	// owns them, and closes them when it is replaced.
	pdpCreds credentials.Source
}

// Config returns the generation's config.
func (g *Generation) Config() *config.Config { return g.cfg }

// Prepare makes cfg, which must be valid with defaults applied, a
// generation, or fails with what makes it unusable; either way the
// Server is unchanged. The signing keys it loads are the ones the
// generation signs with (a key file rotated between Prepare and SetConfig
// is seen at the next reload).
func (h *Server) Prepare(cfg *config.Config) (*Generation, error) {
	gen := &Generation{cfg: cfg}
	var err error
	if gen.signer, gen.keysSum, err = h.signerFor(cfg, h.state.Load()); err != nil {
		return nil, err
	}
	if gen.broker, err = h.broker.Prepare(cfg); err != nil {
		return nil, fmt.Errorf("user_oauth: %w", err)
	}
	if gen.policy, gen.pdpCreds, err = h.compilePolicy(cfg); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if gen.guards, err = h.compileGuards(cfg); err != nil {
		if gen.pdpCreds != nil {
			gen.pdpCreds.Close()
		}
		return nil, fmt.Errorf("guards: %w", err)
	}
	return gen, nil
}

// CheckConfig reports what Prepare would refuse cfg for (its signing or
// vault keys unusable), without a Server: for gateway validate.
func CheckConfig(cfg *config.Config) error {
	h := &Server{log: slog.New(slog.DiscardHandler)}
	if _, _, err := h.signerFor(cfg, nil); err != nil {
		return err
	}
	if _, err := credentials.VaultCipher(cfg); err != nil {
		return fmt.Errorf("user_oauth: %w", err)
	}
	_, src, err := h.compilePolicy(cfg)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if src != nil {
		src.Close()
	}
	if _, err := h.compileGuards(cfg); err != nil {
		return fmt.Errorf("guards: %w", err)
	}
	return nil
}

// SetConfig makes generation gen (see Prepare) the configuration of every
// request that starts from now on; it cannot fail. Requests in
// flight finish with the snapshot they started with. Upstreams whose config
// is unchanged keep their clients and cached lists; the others start
// afresh (their sessions with the old server are re-opened on first use).
// It returns the snapshots before and after, for the caller to tell the
// sessions whose tenant now sees something else (see [TenantChanged]).
//
// publish, if not nil, is called with the new snapshot once it is the
// Server's and before anything of the previous one is released: the
// caller makes it the snapshot requests enter with there, so that no
// request starts with a replaced upstream's client, and a client told that
// its lists changed finds the new ones. Calls must not overlap.
func (h *Server) SetConfig(gen *Generation, publish func(*State)) (prev, next *State) {
	prev = h.state.Load()
	next = h.build(gen, prev)
	h.catalog.Configure(gen.cfg)
	for name, old := range prev.ByName {
		if next.ByName[name] != old {
			h.catalog.Invalidate(name, catalog.Tools, catalog.Prompts, catalog.Resources, catalog.Templates)
		}
	}
	h.state.Store(next)
	if publish != nil {
		publish(next)
	}
	h.syncWatches(next)

	if old := prev.PDPCreds; old != nil && old != next.PDPCreds {
		if !h.own.Go(func(context.Context) { old.Close() }) {
			old.Close()
		}
	}
	for name, old := range prev.ByName {
		if next.ByName[name] != old {
			// In-flight requests still hold the old client; Close only
			// waits for its background work (bounded by the upstream's
			// timeout) and drops idle connections. The Server's Close
			// waits for it; once that has begun, it is done here.
			closeOld := func(context.Context) {
				if err := old.Client.Close(); err != nil {
					h.log.Warn("closing the client of a replaced upstream", "upstream", name, "error", err)
				}
			}
			if !h.own.Go(closeOld) {
				closeOld(context.Background())
			}
		}
	}
	return prev, next
}

// TenantChanged reports whether what tenant id sees may differ between two
// states: its rules changed, or an upstream it sees in either was added,
// removed or reconfigured.
func TenantChanged(prev, next *State, id string) bool {
	pv, err1 := prev.tenants.Get(id)
	nv, err2 := next.tenants.Get(id)
	if err1 != nil || err2 != nil {
		return true
	}
	if !reflect.DeepEqual(tenantConfig(prev.Cfg, id), tenantConfig(next.Cfg, id)) {
		return true
	}
	if !slices.Equal(pv.Upstreams, nv.Upstreams) {
		return true
	}
	for _, name := range nv.Upstreams {
		if prev.ByName[name] != next.ByName[name] {
			return true
		}
	}
	return false
}

func tenantConfig(cfg *config.Config, id string) *config.Tenant {
	for i := range cfg.Tenants {
		if cfg.Tenants[i].ID == id {
			return &cfg.Tenants[i]
		}
	}
	return nil
}
