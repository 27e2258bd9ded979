package dispatch

import (
	"context"
	"encoding/json"

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

// refresh fetches again the listings the catalog holds for up of kinds
// had, on the watch's session us, or tells the clients at once of those
// it cannot fetch as they were (partitioned): see catalog.Catalog.Refresh.
func (h *Server) refresh(ctx context.Context, up *upstreamRef, us session.Upstream, had, partitioned []catalog.Kind) {
	err := h.catalog.Refresh(ctx, &up.Cat, had, partitioned, func(k catalog.Kind) { h.upstreamListChanged(up.Cfg.Name, k) },
		func(ctx context.Context, k catalog.Kind, b catalog.Bounds) ([]json.RawMessage, bool, error) {
			return upcall.ListOn(ctx, up.Client, us, k, "watch", b)
		})
	if err != nil {
		h.log.Debug("refreshing a changed list", "upstream", up.Cfg.Name, "error", err)
	}
}
