package session

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

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

// TenantCounts returns, for the operator console, the sessions each of
// tenants holds across the replicas, as the per-tenant count sets have
// them (see "Per-principal and per-tenant bounds"): live sessions, and
// expired ones not pruned yet, so at most a day's worth too many. Without
// a per-principal or per-tenant bound the sets are not kept, and it
// returns nil.
func (r *Redis) TenantCounts(ctx context.Context, tenants []string) (map[string]int, error) {
	if r.maxPrin <= 0 && r.maxTenant <= 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	defer cancel()
	pipe := r.client.Pipeline()
	cards := make([]*redis.IntCmd, len(tenants))
	for i, t := range tenants {
		cards[i] = pipe.ZCard(ctx, r.countSets(Principal{Tenant: t})[1])
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make(map[string]int, len(tenants))
	for i, t := range tenants {
		out[t] = int(cards[i].Val())
	}
	return out, nil
}
