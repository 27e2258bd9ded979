package session

// Tenants returns the records held of each tenant, expired ones the
// sweeper has not removed yet included (as Len), for the operator
// console. A Redis store has no such count: a tenant's records are
// counted there only under a per-tenant bound, and only as a lower bound
// of what expired.
func (m *Memory) Tenants() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.held.tenants.heap))
	for _, w := range m.held.tenants.heap {
		out[w.key] = int(w.w)
	}
	return out
}
