package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/session"
)

// TestPrincipalRecord: the record is made once per key, found again by
// any caller of the same key and principal, and refused to another
// principal.
func TestPrincipalRecord(t *testing.T) {
	s := session.NewMemory(session.MemoryOptions{IdleTTL: time.Hour})
	defer s.Close()
	ctx := context.Background()
	alice := session.Principal{Issuer: "idp", Subject: "alice", Tenant: "t"}
	first, err := session.PrincipalRecord(ctx, s, "p-", "alice-key", alice, "2026-07-28")
	if err != nil || len(first.ID) != len("p-")+32 || first.ID[:2] != "p-" || first.Principal != alice || first.ProtocolVersion != "2026-07-28" {
		t.Fatalf("PrincipalRecord = %+v, %v", first, err)
	}
	again, err := session.PrincipalRecord(ctx, s, "p-", "alice-key", alice, "2026-07-28")
	if err != nil || again.ID != first.ID {
		t.Errorf("again: %+v, %v", again, err)
	}
	if other, err := session.PrincipalRecord(ctx, s, "p-", "alice-key-2", alice, "2026-07-28"); err != nil || other.ID == first.ID {
		t.Errorf("another key: %+v, %v", other, err)
	}
	if _, err := session.PrincipalRecord(ctx, s, "p-", "alice-key", session.Principal{Issuer: "idp", Subject: "mallory", Tenant: "t"}, "2026-07-28"); err == nil {
		t.Error("another principal got alice's record")
	}
}
