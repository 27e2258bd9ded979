package dispatch

import (
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/pipe"
)

// UpstreamState is what this replica knows of one upstream now, for the
// operator console.
type UpstreamState struct {
	Name string
	// Tried: a request was sent to it; LastError is how its last one
	// failed (nil: it answered).
	Tried     bool
	LastError error
	// Circuit is its circuit breaker's state ("closed", "open",
	// "half-open"); "" without a breaker.
	Circuit string
	// InFlight and Waiting are the requests its concurrency gate holds
	// and queues (0 without a gate).
	InFlight, Waiting int
	// Processes, for a stdio upstream, is what its processes did on this
	// replica since its config last changed (a reload that changes it
	// starts it afresh); nil for any other upstream.
	Processes *pipe.Stats
	// Lists are the listings of it this replica's catalog holds, by
	// kind.
	Lists []catalog.ListStat
}

// UpstreamStates returns the state of every upstream of the config in
// force, in config order.
func (h *Server) UpstreamStates() []UpstreamState {
	st := h.state.Load()
	out := make([]UpstreamState, 0, len(st.Upstreams))
	for _, up := range st.Upstreams {
		s := UpstreamState{Name: up.Cfg.Name}
		s.LastError, s.Tried = h.health.Last(up.Cfg.Name)
		out = append(out, s)
	}
	lists := h.catalog.ListStats()
	for i, up := range st.Upstreams {
		out[i].Lists = lists[up.Cfg.Name]
		if ps, ok := up.Client.PipeStats(); ok && up.Cfg.IsStdio() {
			out[i].Processes = &ps
		}
		if up.Breaker != nil {
			out[i].Circuit = up.Breaker.State()
		}
		if up.Gate != nil {
			out[i].InFlight = up.Gate.InFlight()
			out[i].Waiting, _ = up.Gate.Waiting("")
		}
	}
	return out
}

// PinMismatches returns the tools and prompts whose definitions do not
// match their pins, as last listed on this replica, quarantined first.
func (h *Server) PinMismatches() []catalog.PinStatus { return h.catalog.PinMismatches() }
