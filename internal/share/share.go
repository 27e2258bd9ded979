// Package share counts what principals and tenants hold of a pool all
// tenants share, so that none takes it all.
package share

import "sync"

// Counts counts what principals and tenants hold of a replica's pool
// (upstream streams, detached calls), so that no one of them takes it all:
// a principal holds at most its share, a tenant at most its own, and all
// together at most the pool. Past any of them a new entry is refused (see
// Take); nothing held is taken back, since what is held is a live stream
// or call, not an idle entry. Its zero value is ready to use.
type Counts struct {
	mu         sync.Mutex
	total      int
	principals map[string]int // no zero entries
	tenants    map[string]int // no zero entries
}

// A Share is what one principal and one tenant may hold of a pool.
type Share struct {
	Pool, Principal, Tenant int
}

// Which bound a Take refused at.
const (
	Pool = iota + 1
	Principal
	Tenant
)

// Take counts one more entry for principal and tenant, unless that would
// pass s's pool, the principal's share or the tenant's; it returns 0, or
// which of them refused it (Pool, Principal, Tenant).
func (s *Counts) Take(principal, tenant string, sh Share) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.total >= sh.Pool:
		return Pool
	case s.principals[principal] >= sh.Principal:
		return Principal
	case s.tenants[tenant] >= sh.Tenant:
		return Tenant
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
func (s *Counts) Give(principal, tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	decrement(s.principals, principal)
	decrement(s.tenants, tenant)
}

// Held returns the entries held, in all.
func (s *Counts) Held() int {
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
