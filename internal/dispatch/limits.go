package dispatch

import (
	"context"
	"sync"

	"github.com/mcpgw/gateway/internal/audit"
)

// Limits at the HTTP edge: what one caller is refused when it asks for more
// than its share (sessions, streams, batch messages, body bytes and time).
// Every refusal is counted in mcpgw_limit_rejections_total and audited as
// audit.EventLimit with the limit's name as the reason, so that an operator
// can tell which cap a tenant reached.

// LimitHit records a refusal at limit (a telemetry.Limit* name): the metric,
// and an audit record naming the limit.
func (h *Server) LimitHit(ctx context.Context, rq *Request, limit, method string) {
	tenant := rq.principal.Tenant
	h.metrics.LimitRejection(limit, tenant)
	r := audit.Record{
		Event: audit.EventLimit, Tenant: tenant, Subject: rq.principal.Subject, ClientID: rq.principal.ClientID,
		Method: method, Decision: audit.DecisionDeny, Outcome: audit.OutcomeDenied, Reason: limit,
	}
	if rq.Session != nil {
		r.SessionID = rq.Session.ID
	}
	h.audit.Record(ctx, r)
}

// Shares counts what principals and tenants hold of a replica's pool
// (upstream streams, detached calls), so that no one of them takes it all:
// a principal holds at most its share, a tenant at most its own, and all
// together at most the pool. Past any of them a new entry is refused (see
// Take); nothing held is taken back, since what is held is a live stream
// or call, not an idle entry. Its zero value is ready to use.
type Shares struct {
	mu         sync.Mutex
	total      int
	principals map[string]int // no zero entries
	tenants    map[string]int // no zero entries
}

// A Share is what one principal and one tenant may hold of a pool.
type Share struct {
	Pool, Principal, Tenant int
}

// Which limit a Take refused at.
const (
	SharePool = iota + 1
	SharePrincipal
	ShareTenant
)

// Take counts one more entry for principal and tenant, unless that would
// pass s's pool, the principal's share or the tenant's; it returns 0, or
// which of them refused it (SharePool, SharePrincipal, ShareTenant).
func (s *Shares) Take(principal, tenant string, sh Share) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.total >= sh.Pool:
		return SharePool
	case s.principals[principal] >= sh.Principal:
		return SharePrincipal
	case s.tenants[tenant] >= sh.Tenant:
		return ShareTenant
	}
	if s.principals == nil {
		s.principals = make(map[string]int)
		s.tenants = make(map[string]int)
	}
	s.total++
	s.principals[principal]++
	s.tenants[tenant]++
	return 0
}

// Give returns an entry Take counted.
func (s *Shares) Give(principal, tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	decrement(s.principals, principal)
	decrement(s.tenants, tenant)
}

// Held returns the entries held, in all.
func (s *Shares) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func decrement(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}
