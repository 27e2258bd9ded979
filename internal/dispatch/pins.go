package dispatch

import (
	"context"
	"strconv"
	"strings"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/catalog"
)

// EventPinChanged is the audit event of a tool or prompt whose definition
// does not match its pin (see catalog.PinStatus).
const EventPinChanged = "pin_mismatch"

// pinMismatch is the catalog's OnPin hook: the log and the audit log say
// what changed, by field (never the upstream's text), and what the
// gateway does about it.
func (h *Server) pinMismatch(st catalog.PinStatus) {
	noun := st.Kind.Info().Noun
	action := "served"
	decision := audit.DecisionAllow
	if st.Quarantined {
		action, decision = "quarantined", audit.DecisionDeny
	}
	reason := "not pinned"
	if !st.New {
		reason = "changed: " + strings.Join(st.Changed, ", ")
	}
	h.log.Warn(noun+" definition does not match its pin", "upstream", st.Upstream, noun, strconv.QuoteToASCII(st.Name),
		"reason", reason, "action", action, "sha256", st.SHA256)
	r := audit.Record{Event: EventPinChanged, Upstream: st.Upstream, Tool: st.Name, Decision: decision, Reason: reason + "; " + action}
	h.audit.Record(context.Background(), r)
}

// PinNotes returns one line per tool or prompt whose definition does not
// match its pin, quarantined first, for /readyz: detail, not a verdict.
func (h *Server) PinNotes() []string {
	var notes []string
	for _, st := range h.catalog.PinMismatches() {
		notes = append(notes, "upstream "+st.Upstream+": "+st.Kind.Info().Noun+" "+strconv.QuoteToASCII(st.Name)+" "+st.Describe())
	}
	return notes
}
