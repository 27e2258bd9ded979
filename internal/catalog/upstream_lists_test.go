package catalog

import (
	"testing"

	"github.com/mcpgw/gateway/internal/config"
)

// TestNewUpstreamLists: how lists (unset, shared, per_session) and the
// way the upstream is reached decide which listings are shared.
func TestNewUpstreamLists(t *testing.T) {
	stdio := func(iso string) *config.Upstream {
		return &config.Upstream{Name: "u", Command: []string{"srv"}, Stdio: &config.UpstreamStdio{Isolation: iso}}
	}
	for _, tc := range []struct {
		name                          string
		u                             *config.Upstream
		shared, sessionRes, perTenant bool
		toolsShared, resourcesShared  bool
	}{
		{"http unset", &config.Upstream{Name: "u", URL: "http://u/mcp"}, true, true, false, true, false},
		{"http shared", &config.Upstream{Name: "u", URL: "http://u/mcp", Lists: config.ListsShared}, true, false, false, true, true},
		{"http per_session", &config.Upstream{Name: "u", URL: "http://u/mcp", Lists: config.ListsPerSession}, false, false, false, false, false},
		{"stdio unset", &config.Upstream{Name: "u", Command: []string{"srv"}}, true, false, true, true, true},
		{"stdio tenant", stdio(config.IsolationTenant), true, false, true, true, true},
		{"stdio session", stdio(config.IsolationSession), true, true, true, true, false},
		{"stdio shared", stdio(config.IsolationShared), true, false, false, true, true},
	} {
		up := NewUpstream(tc.u)
		if up.Shared != tc.shared || up.SessionResources != tc.sessionRes || up.PerTenant != tc.perTenant ||
			up.sharedKind(Tools) != tc.toolsShared || up.sharedKind(Resources) != tc.resourcesShared {
			t.Errorf("%s: %+v", tc.name, up)
		}
	}
}

// TestTenantScopedKeys: an upstream reached per tenant keeps one shared
// listing per tenant, within the credentials' partition, and the key of
// a call does not allocate.
func TestTenantScopedKeys(t *testing.T) {
	c := New(0, nil, nil)
	up := &Upstream{Name: "u", Shared: true, PerTenant: true}
	a, b := c.shared(up, Tools, Scope{Tenant: "a"}), c.shared(up, Tools, Scope{Tenant: "b"})
	if a == b || !sharedKey(a) || !sharedKey(b) {
		t.Errorf("keys %q and %q", a.scope, b.scope)
	}
	if p := c.shared(up, Tools, Scope{Tenant: "a", Partition: "u:x"}); p == a {
		t.Errorf("a partition within a tenant is not apart: %q", p.scope)
	}
	if n := testing.AllocsPerRun(100, func() { c.shared(up, Tools, Scope{Tenant: "a"}) }); n != 0 {
		t.Errorf("%v allocations per key", n)
	}
	plain := &Upstream{Name: "u", Shared: true}
	if k := c.shared(plain, Tools, Scope{Tenant: "a"}); k.scope != "" {
		t.Errorf("an upstream not reached per tenant keyed by tenant: %q", k.scope)
	}
}
