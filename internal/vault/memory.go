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
}

type memPending struct {
	principal string
	rec       []byte
	expires   time.Time
}

// NewMemory returns an empty store bounded by lim.
func NewMemory(lim Limits) *Memory {
	return &Memory{
		lim: lim, now: time.Now,
		tokens: make(map[Key][]byte), byTenant: make(map[string]int),
		pending: make(map[string]memPending), byPrin: make(map[string][]string),
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

func (m *Memory) PutPending(_ context.Context, id, principal string, rec []byte, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked()
	ids := m.byPrin[principal]
	for len(ids) >= m.lim.PendingPerPrincipal && len(ids) > 0 {
		delete(m.pending, ids[0])
		ids = ids[1:]
	}
	m.byPrin[principal] = ids
	if len(m.pending) >= m.lim.Pending {
		return ErrFull
	}
	m.pending[id] = memPending{principal: principal, rec: rec, expires: expires}
	m.byPrin[principal] = append(ids, id)
	return nil
}

// sweepLocked drops the expired pending consents.
func (m *Memory) sweepLocked() {
	now := m.now()
	for id, p := range m.pending {
		if !now.Before(p.expires) {
			m.removeLocked(id, p.principal)
		}
	}
}

func (m *Memory) removeLocked(id, principal string) {
	delete(m.pending, id)
	ids := slices.DeleteFunc(m.byPrin[principal], func(s string) bool { return s == id })
	if len(ids) == 0 {
		delete(m.byPrin, principal)
	} else {
		m.byPrin[principal] = ids
	}
}

func (m *Memory) TakePending(_ context.Context, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pending[id]
	if !ok {
		return nil, ErrNotFound
	}
	m.removeLocked(id, p.principal)
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
