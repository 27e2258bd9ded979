package audit_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/audit"
)

// TestRing: the ring keeps the last records, newest first, filters them,
// and never keeps arguments; a Tee writes the log line and the ring.
func TestRing(t *testing.T) {
	r := audit.NewRing(3)
	var line bytes.Buffer
	l := audit.New(&line).Tee(r)
	for i := range 5 {
		l.Record(context.Background(), audit.Record{Event: audit.EventToolCall, Tenant: fmt.Sprint("t", i%2), Tool: fmt.Sprint("tool", i), Arguments: "sha256:secret-shape"})
	}
	got := r.Last(10, nil)
	if len(got) != 3 || got[0].Tool != "tool4" || got[2].Tool != "tool2" {
		t.Fatalf("Last = %+v, want tool4, tool3, tool2", got)
	}
	for _, rec := range got {
		if rec.Arguments != "" || rec.Time.IsZero() {
			t.Errorf("ring record %+v: arguments kept or no time", rec)
		}
	}
	if !strings.Contains(line.String(), "secret-shape") {
		t.Errorf("the log line lost its arguments: %s", line.String())
	}
	t0 := r.Last(10, func(rec *audit.Record) bool { return rec.Tenant == "t0" })
	if len(t0) != 2 || t0[0].Tool != "tool4" {
		t.Errorf("filtered = %+v, want tool4, tool2", t0)
	}
	if got := r.Last(1, nil); len(got) != 1 {
		t.Errorf("Last(1) = %d records", len(got))
	}
	// Audit output off: the ring alone.
	var off *audit.Logger
	r2 := audit.NewRing(2)
	off.Tee(r2).Record(context.Background(), audit.Record{Event: audit.EventAuthFailure})
	if got := r2.Last(5, nil); len(got) != 1 {
		t.Errorf("ring of a nil logger's Tee holds %d records, want 1", len(got))
	}
	if off.Tee(nil) != nil {
		t.Error("Tee(nil) of a nil Logger is not nil")
	}
}
