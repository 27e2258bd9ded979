package transport

import "maps"

// StreamsByTenant returns the GET streams this replica holds open, by
// the tenant of their sessions (for the operator console): the counts
// limits.streams_per_tenant checks.
func (h *Handler) StreamsByTenant() map[string]int {
	h.streams.mu.Lock()
	defer h.streams.mu.Unlock()
	return maps.Clone(h.streams.byTenant)
}
