package dispatch

import "github.com/mcpgw/gateway/internal/observe"

// PinNotes returns one line per tool or prompt whose definition does not
// match its pin, quarantined first, for /readyz: detail, not a verdict.
func (h *Server) PinNotes() []string { return observe.PinNotes(h.catalog.PinMismatches()) }
