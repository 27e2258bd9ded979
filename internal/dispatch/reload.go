package dispatch

import (
	"context"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/generation"
)

// Prepare makes cfg, which must be valid with defaults applied, a
// generation ready to swap in, or fails with what makes it unusable;
// either way the Server is unchanged (see package generation).
func (h *Server) Prepare(cfg *config.Config) (*generation.Prepared, error) {
	var prev *generation.State
	if st := h.state.Load(); st != nil {
		prev = st.State
	}
	return generation.Prepare(cfg, prev, &h.shared)
}

// SetConfig makes generation gen (see Prepare) the configuration of every
// request that starts from now on; it cannot fail. Requests in
// flight finish with the snapshot they started with. Upstreams whose config
// is unchanged keep their clients and cached lists; the others start
// afresh (their sessions with the old server are re-opened on first use).
// It returns the snapshots before and after, for the caller to tell the
// sessions whose tenant now sees something else (see
// generation.TenantChanged).
//
// publish, if not nil, is called with the new snapshot once it is the
// Server's and before anything of the previous one is released: the
// caller makes it the snapshot requests enter with there, so that no
// request starts with a replaced upstream's client, and a client told that
// its lists changed finds the new ones. Calls must not overlap.
func (h *Server) SetConfig(gen *generation.Prepared, publish func(*State)) (prev, next *State) {
	prev = h.state.Load()
	next = &State{State: generation.Build(gen, prev.State, &h.shared)}
	h.catalog.Configure(gen.Config())
	for _, name := range generation.Replaced(prev.State, next.State) {
		h.catalog.Invalidate(name, catalog.Tools, catalog.Prompts, catalog.Resources, catalog.Templates)
	}
	h.state.Store(next)
	if publish != nil {
		publish(next)
	}
	h.syncWatches(next)
	// The Server's Close waits for what is released; once that has
	// begun, it is released here.
	generation.Release(prev.State, next.State, func(f func()) bool {
		return h.own.Go(func(context.Context) { f() })
	}, h.log)
	return prev, next
}
