package generation

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

// UpstreamStates returns the state of every upstream of s, in config
// order: last tells how the last request to an upstream went (see
// upcall.Health), lists are the catalog's listings by upstream.
func (s *State) UpstreamStates(last func(name string) (error, bool), lists map[string][]catalog.ListStat) []UpstreamState {
	out := make([]UpstreamState, len(s.Upstreams))
	for i, up := range s.Upstreams {
		st := &out[i]
		st.Name = up.Cfg.Name
		st.LastError, st.Tried = last(up.Cfg.Name)
		st.Lists = lists[up.Cfg.Name]
		if ps, ok := up.Client.PipeStats(); ok && up.Cfg.IsStdio() {
			st.Processes = &ps
		}
		if up.Breaker != nil {
			st.Circuit = up.Breaker.State()
		}
		if up.Gate != nil {
			st.InFlight = up.Gate.InFlight()
			st.Waiting, _ = up.Gate.Waiting("")
		}
	}
	return out
}
