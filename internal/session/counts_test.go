package session_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/gateway/internal/session"
)

// TestMemoryTenants: the records held per tenant, as they are created and
// deleted.
func TestMemoryTenants(t *testing.T) {
	m := session.NewMemory(session.MemoryOptions{})
	t.Cleanup(func() { m.Close() })
	create := func(id, tenant string) {
		t.Helper()
		r := newRecord(id)
		r.Principal.Tenant = tenant
		if err := m.Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	create("a1", "acme")
	create("a2", "acme")
	create("g1", "globex")
	if err := m.Delete(t.Context(), "g1"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"acme": 2}, m.Tenants()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
