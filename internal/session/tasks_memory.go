package session

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemoryTasks is a [TaskStore] in process memory, for a gateway with a
// single replica.
//
// Expired tasks are invisible at once and removed lazily, without a
// goroutine: a principal's when its tasks are counted or listed, all of
// them when the store is full. So the store never holds more than MaxTasks
// records, nor a principal or tenant more live ones than its bound.
type MemoryTasks struct {
	now func() time.Time

	mu        sync.Mutex
	byID      map[string]*Task
	byUp      map[string]string             // upstreamTaskKey → id
	byPrin    map[Principal]map[string]bool // principal → ids
	perTenant map[string]int
	// tenantPrins: tenant → its principals holding tasks, so that a
	// tenant at its bound prunes its own principals only.
	tenantPrins map[string]map[Principal]bool
}

var _ TaskStore = (*MemoryTasks)(nil)

// NewMemoryTasks returns an empty store. now, if nil, is time.Now.
func NewMemoryTasks(now func() time.Time) *MemoryTasks {
	if now == nil {
		now = time.Now
	}
	return &MemoryTasks{
		now:       now,
		byID:      make(map[string]*Task),
		byUp:      make(map[string]string),
		byPrin:    make(map[Principal]map[string]bool),
		perTenant: make(map[string]int),

		tenantPrins: make(map[string]map[Principal]bool),
	}
}

// CreateTask implements [TaskStore.CreateTask].
func (m *MemoryTasks) CreateTask(ctx context.Context, t *Task, lim TaskLimits) error {
	now := m.now()
	if err := checkTask(t, now); err != nil {
		return err
	}
	c := *t
	c.Expires = c.Expires.Truncate(time.Millisecond)
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.byID[c.ID]; ok {
		if old.Expires.After(now) {
			return ErrExists
		}
		m.removeLocked(old)
	}
	m.pruneLocked(c.Principal, now)
	if lim.MaxPerPrincipal > 0 && len(m.byPrin[c.Principal]) >= lim.MaxPerPrincipal {
		return &LimitError{Limit: LimitTasksPerPrincipal, Max: int64(lim.MaxPerPrincipal)}
	}
	if lim.MaxPerTenant > 0 && m.perTenant[c.Principal.Tenant] >= lim.MaxPerTenant {
		// The tenant's other principals may hold expired ones.
		for p := range m.tenantPrins[c.Principal.Tenant] {
			m.pruneLocked(p, now)
		}
		if m.perTenant[c.Principal.Tenant] >= lim.MaxPerTenant {
			return &LimitError{Limit: LimitTasksPerTenant, Max: int64(lim.MaxPerTenant)}
		}
	}
	if lim.MaxTasks > 0 && len(m.byID) >= lim.MaxTasks {
		for _, old := range m.byID {
			if !old.Expires.After(now) {
				m.removeLocked(old)
			}
		}
		if len(m.byID) >= lim.MaxTasks {
			return &LimitError{Limit: LimitTasks, Max: int64(lim.MaxTasks)}
		}
	}
	m.byID[c.ID] = &c
	m.byUp[upstreamTaskKey(c.Upstream, c.Session.SessionID, c.UpstreamTaskID)] = c.ID
	ids := m.byPrin[c.Principal]
	if ids == nil {
		ids = make(map[string]bool)
		m.byPrin[c.Principal] = ids
		prins := m.tenantPrins[c.Principal.Tenant]
		if prins == nil {
			prins = make(map[Principal]bool)
			m.tenantPrins[c.Principal.Tenant] = prins
		}
		prins[c.Principal] = true
	}
	ids[c.ID] = true
	m.perTenant[c.Principal.Tenant]++
	return nil
}

// pruneLocked removes p's expired tasks.
func (m *MemoryTasks) pruneLocked(p Principal, now time.Time) {
	for id := range m.byPrin[p] {
		if t := m.byID[id]; t != nil && !t.Expires.After(now) {
			m.removeLocked(t)
		}
	}
}

func (m *MemoryTasks) removeLocked(t *Task) {
	delete(m.byID, t.ID)
	key := upstreamTaskKey(t.Upstream, t.Session.SessionID, t.UpstreamTaskID)
	if m.byUp[key] == t.ID {
		delete(m.byUp, key)
	}
	if ids := m.byPrin[t.Principal]; ids[t.ID] {
		delete(ids, t.ID)
		if len(ids) == 0 {
			delete(m.byPrin, t.Principal)
			if prins := m.tenantPrins[t.Principal.Tenant]; prins != nil {
				delete(prins, t.Principal)
				if len(prins) == 0 {
					delete(m.tenantPrins, t.Principal.Tenant)
				}
			}
		}
		if m.perTenant[t.Principal.Tenant]--; m.perTenant[t.Principal.Tenant] <= 0 {
			delete(m.perTenant, t.Principal.Tenant)
		}
	}
}

// GetTask implements [TaskStore.GetTask].
func (m *MemoryTasks) GetTask(ctx context.Context, id string) (*Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.getLocked(id)
}

func (m *MemoryTasks) getLocked(id string) (*Task, error) {
	t, ok := m.byID[id]
	if !ok || !t.Expires.After(m.now()) {
		return nil, ErrNotFound
	}
	c := *t
	return &c, nil
}

// FindTask implements [TaskStore.FindTask].
func (m *MemoryTasks) FindTask(ctx context.Context, upstream, sessionID, upstreamTaskID string) (*Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.byUp[upstreamTaskKey(upstream, sessionID, upstreamTaskID)]
	if !ok {
		return nil, ErrNotFound
	}
	return m.getLocked(id)
}

// ListTasks implements [TaskStore.ListTasks].
func (m *MemoryTasks) ListTasks(ctx context.Context, p Principal, c TaskCursor, n int) ([]*Task, bool, error) {
	m.mu.Lock()
	m.pruneLocked(p, m.now())
	var out []*Task
	for id := range m.byPrin[p] {
		t := m.byID[id]
		if !c.before(t.Expires.UnixMilli(), t.ID) {
			c := *t
			out = append(out, &c)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b *Task) int {
		if d := a.Expires.Compare(b.Expires); d != 0 {
			return d
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(out) > n {
		return out[:n], true, nil
	}
	return out, false, nil
}

// UpdateTask implements [TaskStore.UpdateTask].
func (m *MemoryTasks) UpdateTask(ctx context.Context, t *Task) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.byID[t.ID]
	if !ok || !old.Expires.After(m.now()) {
		return ErrNotFound
	}
	c := *old
	c.Input = t.Input // all a task record may change
	m.byID[t.ID] = &c
	return nil
}

// DeleteTask implements [TaskStore.DeleteTask].
func (m *MemoryTasks) DeleteTask(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.byID[id]; ok {
		m.removeLocked(t)
	}
	return nil
}

// Len returns how many records the store holds, expired ones not yet
// removed included.
func (m *MemoryTasks) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID)
}
