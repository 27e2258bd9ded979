package transport

import (
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/dispatch"
)

// upstreamListChanged is the catalog's hook: an upstream's list of kind k
// changed, so every session whose tenant sees that upstream is told.
func (h *Handler) upstreamListChanged(st *dispatch.State, upstream string, k catalog.Kind) {
	msg := catalog.ListChanged(k)
	h.streams.each(func(s *stream) {
		if v, err := st.Tenants().Get(s.tenant); err == nil && v.Allows(upstream) {
			s.send(msg)
		}
	})
}
