package dispatch

import (
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/generation"
)

// UpstreamStates returns the state of every upstream of the config in
// force, in config order, for the operator console.
func (h *Server) UpstreamStates() []generation.UpstreamState {
	return h.state.Load().UpstreamStates(h.health.Last, h.catalog.ListStats())
}

// PinMismatches returns the tools and prompts whose definitions do not
// match their pins, as last listed on this replica, quarantined first.
func (h *Server) PinMismatches() []catalog.PinStatus { return h.catalog.PinMismatches() }
