package observe

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

// PinMismatch is the catalog's OnPin hook: the log and the audit log say
// what changed, by field (never the upstream's text), and what the
// gateway does about it.
func (r *Recorder) PinMismatch(st catalog.PinStatus) {
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
	r.log.Warn(noun+" definition does not match its pin", "upstream", st.Upstream, noun, strconv.QuoteToASCII(st.Name),
		"reason", reason, "action", action, "sha256", st.SHA256)
	r.audit.Record(context.Background(), audit.Record{
		Event: EventPinChanged, Upstream: st.Upstream, Tool: st.Name, Decision: decision, Reason: reason + "; " + action,
	})
}

// PinNotes returns one line per tool or prompt whose definition does not
// match its pin, for /readyz: detail, not a verdict.
func PinNotes(mismatches []catalog.PinStatus) []string {
	var notes []string
	for _, st := range mismatches {
		notes = append(notes, "upstream "+st.Upstream+": "+st.Kind.Info().Noun+" "+strconv.QuoteToASCII(st.Name)+" "+st.Describe())
	}
	return notes
}
