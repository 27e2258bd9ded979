package vault

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Limits bound what a store keeps.
type Limits struct {
	TokensPerTenant, Tokens      int
	PendingPerPrincipal, Pending int
	// PendingPerTenant is a tenant's share of Pending; zero: no share
	// but Pending.
	PendingPerTenant int
}

// Memory is a [Store] in this process: for one replica.
type Memory struct {
	lim Limits
	now func() time.Time

	mu       sync.Mutex
	tokens   map[Key][]byte
	byTenant map[string]int
	pending  map[string]memPending
	byPrin   map[string][]string // principal → its pending ids, oldest first
	byTen    map[string][]string // tenant → its pending ids, oldest first
}

type memPending struct {
	principal, tenant string
	rec               []byte
	expires           time.Time
}

// NewMemory returns an empty store bounded by lim.
func NewMemory(lim Limits) *Memory {
	return &Memory{
		lim: lim, now: time.Now,
		tokens: make(map[Key][]byte), byTenant: make(map[string]int),
		pending: make(map[string]memPending), byPrin: make(map[string][]string), byTen: make(map[string][]string),
	}
}

// SetLimits replaces the bounds: what is over a new bound stays until it
// goes.
func (m *Memory) SetLimits(lim Limits) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lim = lim
}

func (m *Memory) GetToken(_ context.Context, k Key) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tokens[k], nil
}

func (m *Memory) PutToken(_ context.Context, k Key, rec []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tokens[k]; !ok {
		if m.byTenant[k.Tenant] >= m.lim.TokensPerTenant || len(m.tokens) >= m.lim.Tokens {
			return ErrFull
		}
		m.byTenant[k.Tenant]++
	}
	m.tokens[k] = rec
	return nil
}

func (m *Memory) DeleteToken(_ context.Context, k Key) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tokens[k]; !ok {
		return false, nil
	}
	delete(m.tokens, k)
	if m.byTenant[k.Tenant]--; m.byTenant[k.Tenant] <= 0 {
		delete(m.byTenant, k.Tenant)
	}
	return true, nil
}

func (m *Memory) Tokens(_ context.Context, f Filter) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out [][]byte
	for k, rec := range m.tokens {
		if f.match(k) {
			out = append(out, rec)
		}
	}
	return out, nil
}

func (m *Memory) PutPending(_ context.Context, id, principal, tenant string, rec []byte, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lim.Pending <= 0 {
		return ErrFull
	}
	m.sweepLocked()
	for ids := m.byPrin[principal]; len(ids) > 0 && len(ids) >= m.lim.PendingPerPrincipal; ids = m.byPrin[principal] {
		m.removeLocked(ids[0])
	}
	for ids := m.byTen[tenant]; len(ids) > 0 && m.lim.PendingPerTenant > 0 && len(ids) >= m.lim.PendingPerTenant; ids = m.byTen[tenant] {
		m.removeLocked(ids[0])
	}
	for len(m.pending) >= m.lim.Pending {
		heavy := m.heaviestLocked()
		if len(heavy) == 0 {
			return ErrFull
		}
		m.removeLocked(heavy[0])
	}
	m.pending[id] = memPending{principal: principal, tenant: tenant, rec: rec, expires: expires}
	m.byPrin[principal] = append(m.byPrin[principal], id)
	m.byTen[tenant] = append(m.byTen[tenant], id)
	return nil
}

// heaviestLocked returns the pending ids of the tenant that has the most,
// oldest first (of two as heavy, the one whose oldest is older).
func (m *Memory) heaviestLocked() []string {
	var heavy []string
	for _, ids := range m.byTen {
		if len(ids) > len(heavy) || len(ids) == len(heavy) && m.pending[ids[0]].expires.Before(m.pending[heavy[0]].expires) {
			heavy = ids
		}
	}
	return heavy
}

// sweepLocked drops the expired pending consents.
func (m *Memory) sweepLocked() {
	now := m.now()
	for id, p := range m.pending {
		if !now.Before(p.expires) {
			m.removeLocked(id)
		}
	}
}

// removeLocked removes pending consent id, wherever it is listed.
func (m *Memory) removeLocked(id string) {
	p := m.pending[id]
	delete(m.pending, id)
	unlist(m.byPrin, p.principal, id)
	unlist(m.byTen, p.tenant, id)
}

// unlist removes id from lists[key], and the list once empty.
func unlist(lists map[string][]string, key, id string) {
	ids := slices.DeleteFunc(lists[key], func(s string) bool { return s == id })
	if len(ids) == 0 {
		delete(lists, key)
	} else {
		lists[key] = ids
	}
}

func (m *Memory) TakePending(_ context.Context, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pending[id]
	if !ok {
		return nil, ErrNotFound
	}
	m.removeLocked(id)
	if !m.now().Before(p.expires) {
		return nil, ErrNotFound
	}
	return p.rec, nil
}

func (m *Memory) GetPending(_ context.Context, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pending[id]
	if !ok || !m.now().Before(p.expires) {
		return nil, ErrNotFound
	}
	return p.rec, nil
}
