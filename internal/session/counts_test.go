package session_test

import (
	"strconv"
	"testing"
	"time"

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

// TestRedisTenantCounts: with session bounds, a Redis store counts each
// tenant's sessions across replicas (two stores on one prefix); without,
// it does not count them.
func TestRedisTenantCounts(t *testing.T) {
	e := newRedisEnv(t)
	opts := session.RedisOptions{IdleTTL: time.Minute, MaxPerPrincipal: 10, MaxPerTenant: 10}
	a, b := e.store(opts), e.store(opts)
	ctx := t.Context()
	for i, s := range []*session.Redis{a, a, b} {
		if err := s.Create(ctx, recordOf(session.NewID(), "u"+strconv.Itoa(i), "acme")); err != nil {
			t.Fatal(err)
		}
	}
	gone := recordOf(session.NewID(), "x", "beta")
	if err := b.Create(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	got, err := b.TenantCounts(ctx, []string{"acme", "beta", "none"})
	if err != nil || got["acme"] != 3 || got["beta"] != 0 || got["none"] != 0 {
		t.Errorf("TenantCounts = %v, %v", got, err)
	}
	unbounded := newRedisEnv(t).store(session.RedisOptions{IdleTTL: time.Minute})
	if got, err := unbounded.TenantCounts(ctx, []string{"acme"}); got != nil || err != nil {
		t.Errorf("without bounds: %v, %v", got, err)
	}
}
