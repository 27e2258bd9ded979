package dispatch

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upcall"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Watching upstreams: internal/watch keeps one notification stream per
// watched upstream and replica; watchHooks is what it tells the Server.

// syncWatches makes the watches those of st's upstreams that want one: an
// upstream reached as each caller has no stream of the gateway's own (its
// lists go by the TTL).
func (h *Server) syncWatches(st *State) {
	ups := make([]*upstreamRef, 0, len(st.Upstreams))
	for _, up := range st.Upstreams {
		if up.Watched() {
			ups = append(ups, up)
		}
	}
	h.watch.Sync(ups)
}

// watchHooks are the Server, to its watches.
type watchHooks struct{ h *Server }

func (w watchHooks) Opened(up *upstreamRef, res *upstream.InitResult) {
	w.h.seenCaps.Remember(up.Cfg.Name, res.Session.Capabilities)
	w.h.instructions.Remember(up.Cfg.Name, res.Instructions)
}

func (w watchHooks) Notified(ctx context.Context, up *upstreamRef, us session.Upstream, msg *jsonrpc.Message) {
	had, partitioned := w.h.observe(up, msg)
	w.h.refresh(ctx, up, us, had, partitioned)
}

func (w watchHooks) Missed(ctx context.Context, up *upstreamRef, us session.Upstream) {
	had, partitioned := w.h.catalog.Stale(up.Cfg.Name, catalog.Tools, catalog.Prompts, catalog.Resources, catalog.Templates)
	w.h.refresh(ctx, up, us, had, partitioned)
}

// refresh fetches again the listings of kinds had that the catalog holds
// for up, on the watch's session, so that the catalog tells the clients
// whose view changed (catalog.onChange) and has the new lists ready. The
// listings of partitioned kinds were fetched on sessions announced other
// capabilities, or with other credentials, than the watch's: it cannot
// fetch them as they were, so it tells the clients at once, and each
// listing is fetched again when next used.
func (h *Server) refresh(ctx context.Context, up *upstreamRef, us session.Upstream, had, partitioned []catalog.Kind) {
	for _, k := range partitioned {
		h.upstreamListChanged(up.Cfg.Name, k)
	}
	for _, k := range had {
		if slices.Contains(partitioned, k) {
			continue // told already
		}
		_, err := h.catalog.Get(ctx, &up.Cat, k, catalog.Scope{}, func(ctx context.Context, b catalog.Bounds) ([]json.RawMessage, bool, error) {
			return upcall.ListOn(ctx, up.Client, us, k, "watch", b)
		})
		if err != nil {
			h.log.Debug("refreshing a changed list", "upstream", up.Cfg.Name, "list", k.Info().ListMethod, "error", err)
		}
	}
}
