package session

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"time"
	"unsafe"
)

// Defaults for [MemoryOptions] and, for the mailbox bounds, [RedisOptions].
// They match the config package's defaults.
const (
	DefaultIdleTTL     = 30 * time.Minute
	DefaultMaxSessions = 100_000
	// A mailbox carries the few messages of one client round trip; one that
	// fills up has no reader, and its poster should learn so rather than
	// fill memory.
	DefaultMailboxMessages       = 64
	DefaultMailboxBytes    int64 = 8 << 20
)

// maxSweepInterval caps how long an expired record may linger (holding
// memory, and with OnExpire not yet called) after it expires.
const maxSweepInterval = time.Minute

// minSweepInterval keeps a tiny IdleTTL from turning the sweeper into a
// busy loop.
const minSweepInterval = time.Millisecond

// MemoryOptions configures a [Memory] store. The zero value is usable.
type MemoryOptions struct {
	// IdleTTL is how long a record lives after it was created or last
	// returned by Get. If zero or negative, DefaultIdleTTL is used.
	IdleTTL time.Duration
	// MaxSessions is how many records the store holds at most, expired ones
	// not yet removed included. If zero or negative, DefaultMaxSessions is
	// used. It bounds the number of mailboxes holding messages too.
	MaxSessions int
	// Now returns the current time, for LastSeen and expiry. If nil,
	// time.Now is used. It must be safe for concurrent use. The sweeper runs
	// on real timers whatever Now returns.
	Now func() time.Time
	// MaxPerPrincipal and MaxPerTenant bound the live records of one
	// Principal and of one Principal.Tenant: Create fails with a
	// *[LimitError] beyond them. Zero or negative means no bound (the
	// gateway always sets both; see config.Sessions).
	MaxPerPrincipal int
	MaxPerTenant    int
	// MailboxMessages and MailboxBytes bound what one mailbox holds: Post
	// fails with a *[LimitError] beyond them. If zero or negative,
	// DefaultMailboxMessages and DefaultMailboxBytes are used.
	MailboxMessages int
	MailboxBytes    int64
	// OnExpire, if not nil, is called with a copy of each record removed
	// because it expired, or was evicted to make room in a full store; it
	// is not called for records removed by Delete.
	// It runs outside the store's lock, in the sweeper goroutine or in a
	// Create that removed expired records to make room, so it should return
	// quickly and hand slow work (such as closing upstream sessions) to
	// another goroutine. It must not call Close.
	OnExpire func(*Record)
	// OnEvict, if not nil, is called with the principal of each record
	// evicted to make room in a full store, after OnExpire, outside the
	// store's lock (to count evictions).
	OnEvict func(Principal)
}

// Memory is a [Store] that keeps records in process memory, for a gateway
// with a single replica.
//
// A record expires IdleTTL after its LastSeen. An expired record is invisible
// at once (Get and SetUpstream return ErrNotFound); a background sweeper
// removes it within min(IdleTTL/2, 1m) and reports it to OnExpire. The store
// holds at most MaxSessions records, so its memory stays bounded, and at
// most MaxPerPrincipal and MaxPerTenant live records of one principal and
// one tenant, so that no caller takes every session.
//
// A Create that finds the store full (once expired records are removed)
// evicts a record rather than fail: the least recently seen record of the
// principal holding the most records within the tenant holding the most
// (see "Fair shares" in scale.go). The evicted record is reported to
// OnExpire, like an expired one, and its id is unknown from then on: its
// client gets 404 and initializes again (2025-11-25 basic/transports,
// "Session Management" 4). The store cannot tell a session with a request
// in flight from an idle one; the least recently seen is the likeliest
// idle.
//
// Records are kept in a list ordered by LastSeen, and in one such list per
// principal, so the sweeper does work in proportion to the records that
// expired, not to the records held, and Get and eviction are O(1) (and
// finding whom to evict O(log n)). A stored *Record is never modified once stored (SetUpstream
// swaps in a new one), which lets Get copy it out after releasing the lock.
//
// Memory is also a [Mailbox]. A mailbox holds at most MailboxMessages
// messages and MailboxBytes bytes (Post fails with a *[LimitError] beyond
// them), and the store at most MaxSessions mailboxes with messages in them
// (Post fails with ErrFull beyond that). An expired mailbox is invisible at once, and the
// sweeper removes it along with expired records. A waiting Take costs no
// goroutine: Post hands the message to the longest-waiting Take directly.
//
// Call [Memory.Close] to stop the sweeper.
type Memory struct {
	ttl                time.Duration
	max                int
	maxPrin, maxTenant int
	boxMsgs            int
	boxBytes           int64
	now                func() time.Time
	onExpire           func(*Record)
	onEvict            func(Principal)

	// interned holds one copy of each small distinct raw JSON member
	// (client info and capabilities, upstream capabilities) that a live
	// record holds, shared by every record with those bytes; see intern.
	// Lock order: mu before imu.
	imu      sync.Mutex
	interned map[string]*internEntry

	mu   sync.Mutex
	byID map[string]*entry
	// held counts the records held (expired ones not yet removed
	// included) of each principal and tenant.
	held shares
	// root is the sentinel of a circular list of entries, least recently
	// seen first, and byPrin the sentinels of each principal's.
	root   entry
	byPrin map[Principal]*entry

	// Mailboxes have a lock of their own, so that sweeping them never holds
	// up session calls.
	mbmu  sync.Mutex
	boxes map[string]*mailbox

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ Store   = (*Memory)(nil)
	_ Mailbox = (*Memory)(nil)
)

// entry is a stored record and its place in the LastSeen orders: the
// store's (prev, next) and its principal's (pprev, pnext, whose sentinel
// is proot).
type entry struct {
	rec          *compact // never modified
	lastSeen     time.Time
	prev, next   *entry
	pprev, pnext *entry
	proot        *entry
}

// NewMemory returns a Memory store and starts its sweeper.
func NewMemory(opts MemoryOptions) *Memory {
	m := &Memory{
		ttl:       opts.IdleTTL,
		max:       opts.MaxSessions,
		maxPrin:   max(opts.MaxPerPrincipal, 0),
		maxTenant: max(opts.MaxPerTenant, 0),
		boxMsgs:   opts.MailboxMessages,
		boxBytes:  opts.MailboxBytes,
		now:       opts.Now,
		onExpire:  opts.OnExpire,
		onEvict:   opts.OnEvict,
		byID:      make(map[string]*entry),
		byPrin:    make(map[Principal]*entry),
		boxes:     make(map[string]*mailbox),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	if m.boxMsgs <= 0 {
		m.boxMsgs = DefaultMailboxMessages
	}
	if m.boxBytes <= 0 {
		m.boxBytes = DefaultMailboxBytes
	}
	if m.ttl <= 0 {
		m.ttl = DefaultIdleTTL
	}
	if m.max <= 0 {
		m.max = DefaultMaxSessions
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.root.prev, m.root.next = &m.root, &m.root
	interval := max(min(m.ttl/2, maxSweepInterval), minSweepInterval)
	go m.sweep(interval)
	return m
}

// Create implements [Store.Create]. If an expired record has r's id, Create
// replaces it, reporting it to OnExpire. Beyond MaxPerPrincipal or
// MaxPerTenant live records of r's principal or tenant, it fails with a
// *[LimitError]. In a full store, it evicts the least recently seen record
// of the heaviest holder (see [Memory]), reporting it to OnExpire.
func (m *Memory) Create(ctx context.Context, r *Record) error {
	if r == nil || r.ID == "" {
		return errors.New("session: record has no id")
	}
	now := m.now()
	rec := m.compact(r)
	if rec.created.IsZero() {
		rec.created = now
	}

	var expired []*entry
	m.mu.Lock()
	evicted, err := m.admitLocked(rec, now, &expired)
	if err == nil {
		e := &entry{rec: rec, lastSeen: now}
		m.byID[rec.id] = e
		m.insertLocked(e)
	} else {
		m.release(rec)
	}
	m.mu.Unlock()
	m.reportExpired(expired)
	if m.onEvict != nil {
		for _, e := range expired[len(expired)-evicted:] {
			m.onEvict(e.rec.principal)
		}
	}
	return err
}

// admitLocked reports why rec cannot be stored now, if it cannot, removing
// expired records (appended to *expired) where that makes room, and in a
// full store evicting one (appended too). Expired records count against no
// bound, but are only removed when one is hit. The shares are checked
// before the pool: a principal or tenant at its share is refused, never
// served by evicting another's record. The evicted records are the last
// evicted of *expired.
func (m *Memory) admitLocked(rec *compact, now time.Time, expired *[]*entry) (evicted int, err error) {
	if e, ok := m.byID[rec.id]; ok {
		if !m.isExpired(e, now) {
			return 0, ErrExists
		}
		m.removeLocked(rec.id, e)
		*expired = append(*expired, e)
	}
	swept := false
	// A refusal first sweeps expired records, at most a sweeper's batch
	// of them: a client at its cap must not make its request remove (and
	// report) a whole store's worth under the lock. Expired records past
	// the batch count until the sweeper takes them.
	sweep := func() {
		if !swept {
			swept = true
			*expired = m.removeExpiredLocked(now, *expired, sweepBatch)
		}
	}
	p := rec.principal
	if m.maxPrin > 0 && m.held.principal(p) >= int64(m.maxPrin) {
		if sweep(); m.held.principal(p) >= int64(m.maxPrin) {
			return 0, &LimitError{Limit: LimitMaxPerPrincipal, Max: int64(m.maxPrin)}
		}
	}
	if m.maxTenant > 0 && m.held.tenant(p.Tenant) >= int64(m.maxTenant) {
		if sweep(); m.held.tenant(p.Tenant) >= int64(m.maxTenant) {
			return 0, &LimitError{Limit: LimitMaxPerTenant, Max: int64(m.maxTenant)}
		}
	}
	if len(m.byID) >= m.max {
		sweep()
	}
	for len(m.byID) >= m.max {
		v := m.victimLocked(p)
		if v == nil {
			return evicted, ErrFull // not reached: a full store has a heaviest holder
		}
		m.removeLocked(v.rec.id, v)
		*expired = append(*expired, v)
		evicted++
	}
	return evicted, nil
}

// victimLocked returns the record a full store evicts to make room for one
// of p's: the least recently seen of the heaviest holder's (see
// shares.heaviest), nil if the store is empty.
func (m *Memory) victimLocked(p Principal) *entry {
	q, ok := m.held.heaviest(p)
	if !ok {
		return nil
	}
	root := m.byPrin[q]
	if root == nil || root.pnext == root {
		return nil
	}
	return root.pnext
}

// Get implements [Store.Get].
func (m *Memory) Get(ctx context.Context, id string) (*Record, error) {
	now := m.now()
	m.mu.Lock()
	e, ok := m.byID[id]
	if !ok || m.isExpired(e, now) {
		m.mu.Unlock()
		return nil, ErrNotFound
	}
	// Concurrent Gets may take the lock in another order than they read the
	// clock; LastSeen never goes back.
	if now.After(e.lastSeen) {
		e.lastSeen = now
	}
	m.moveToBackLocked(e)
	rec, lastSeen := e.rec, e.lastSeen
	m.mu.Unlock()

	out := rec.record() // safe unlocked: rec is never modified
	out.LastSeen = lastSeen
	return out, nil
}

// SetUpstream implements [Store.SetUpstream].
func (m *Memory) SetUpstream(ctx context.Context, id, name, prev string, u Upstream) (Upstream, error) {
	u.Capabilities = m.intern(u.Capabilities)
	u.Subscribed = slices.Clone(u.Subscribed)
	now := m.now()
	m.mu.Lock()
	e, ok := m.byID[id]
	if !ok || m.isExpired(e, now) {
		m.unintern(u.Capabilities)
		m.mu.Unlock()
		return Upstream{}, ErrNotFound
	}
	i := e.rec.upstream(name)
	var cur Upstream
	if i >= 0 {
		cur = e.rec.ups[i].Upstream
	}
	if cur.SessionID != prev {
		m.unintern(u.Capabilities)
		m.mu.Unlock()
		return cloneUpstream(cur), ErrConflict
	}
	// Copy on write: Gets in flight may still be copying e.rec. The new
	// record takes over the old one's interned references, but for the
	// entry it replaces.
	next := *e.rec
	next.ups = append(make([]namedUpstream, 0, len(e.rec.ups)+1), e.rec.ups...)
	if i >= 0 {
		m.unintern(next.ups[i].Capabilities)
		next.ups[i].Upstream = u
	} else {
		next.ups = append(next.ups, namedUpstream{name, u})
	}
	e.rec = &next
	m.mu.Unlock()
	return cloneUpstream(u), nil
}

// Delete implements [Store.Delete]. OnExpire is not called.
func (m *Memory) Delete(ctx context.Context, id string) error {
	m.mu.Lock()
	if e, ok := m.byID[id]; ok {
		m.removeLocked(id, e)
	}
	m.mu.Unlock()
	return nil
}

// Len returns the number of records held, expired ones the sweeper has not
// removed yet included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID)
}

// Close stops the sweeper and waits for it to return, including any OnExpire
// call in progress. The store stays usable; expired records are then removed
// only when Create needs room. Close may be called more than once, and
// always returns nil.
func (m *Memory) Close() error {
	m.closeOnce.Do(func() { close(m.stop) })
	<-m.done
	return nil
}

// sweep removes expired records every interval until Close.
func (m *Memory) sweep(interval time.Duration) {
	defer close(m.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			if m.stopped() { // select picks either when both are ready
				return
			}
			now := m.now()
			// In batches, so that a mass expiry neither holds the lock
			// (and every Get) for long nor reports more than a batch at
			// once, and Close need not wait for all of it.
			for batch := make([]*entry, 0, sweepBatch); ; {
				m.mu.Lock()
				batch = m.removeExpiredLocked(now, batch[:0], sweepBatch)
				m.mu.Unlock()
				m.reportExpired(batch)
				clear(batch) // let the records go before the next batch
				if len(batch) < sweepBatch || m.stopped() {
					break
				}
			}

			m.mbmu.Lock()
			m.removeExpiredBoxesLocked(now)
			m.mbmu.Unlock()
		}
	}
}

// isExpired reports whether e has been idle for IdleTTL or longer at now.
func (m *Memory) isExpired(e *entry, now time.Time) bool {
	return now.Sub(e.lastSeen) >= m.ttl
}

// sweepBatch is how many expired records the sweeper removes and reports
// per lock hold.
const sweepBatch = 1024

// stopped reports whether Close was called.
func (m *Memory) stopped() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

// removeExpiredLocked removes at most limit expired records and appends them
// to dst.
// It walks the list from the least recently seen entry and stops at the
// first live one. If Now ever goes back, a few expired records may be left
// for a later sweep; they stay invisible meanwhile.
func (m *Memory) removeExpiredLocked(now time.Time, dst []*entry, limit int) []*entry {
	for e, n := m.root.next, 0; e != &m.root && n < limit && m.isExpired(e, now); n++ {
		next := e.next
		m.removeLocked(e.rec.id, e)
		dst = append(dst, e)
		e = next
	}
	return dst
}

// reportExpired passes copies of the removed entries' records to OnExpire.
// It must be called without m.mu held. Removed entries are no longer
// reachable from the store, so reading them unlocked is safe.
func (m *Memory) reportExpired(expired []*entry) {
	if m.onExpire == nil {
		return
	}
	for _, e := range expired {
		r := e.rec.record()
		r.LastSeen = e.lastSeen
		m.onExpire(r)
	}
}

// insertLocked adds e, the most recently seen record, to the lists and
// to its holders' counts.
func (m *Memory) insertLocked(e *entry) {
	p := e.rec.principal
	m.held.add(p, 1)
	root := m.byPrin[p]
	if root == nil {
		root = &entry{}
		root.pprev, root.pnext = root, root
		m.byPrin[p] = root
	}
	m.pushBackLocked(e, root)
}

// removeLocked removes e, which is id's, from the store. e.rec stays
// readable (interned bytes are never modified, only forgotten).
func (m *Memory) removeLocked(id string, e *entry) {
	p := e.rec.principal
	m.held.add(p, -1)
	m.release(e.rec)
	delete(m.byID, id)
	e.prev.next, e.next.prev = e.next, e.prev
	e.pprev.pnext, e.pnext.pprev = e.pnext, e.pprev
	if e.proot.pnext == e.proot {
		delete(m.byPrin, p)
	}
	e.prev, e.next, e.pprev, e.pnext, e.proot = nil, nil, nil, nil, nil
}

// pushBackLocked puts e last in the store's list and in its principal's,
// whose sentinel is proot.
func (m *Memory) pushBackLocked(e, proot *entry) {
	last := m.root.prev
	e.prev, e.next = last, &m.root
	last.next, m.root.prev = e, e
	plast := proot.pprev
	e.pprev, e.pnext, e.proot = plast, proot, proot
	plast.pnext, proot.pprev = e, e
}

// moveToBackLocked makes e the most recently seen record: last in both its
// lists. A record last in the store's list is last in its principal's.
func (m *Memory) moveToBackLocked(e *entry) {
	if m.root.prev == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.pprev.pnext, e.pnext.pprev = e.pnext, e.pprev
	m.pushBackLocked(e, e.proot)
}

// compact is how Memory keeps a record: small, so that a replica holds
// many idle sessions (100,000 in well under 200 MiB). The upstream sessions
// are a short slice instead of a map, and the small raw JSON members are
// interned: most sessions come from a few kinds of client and see the same
// upstream capabilities, so their bytes are shared. Clients choose theirs,
// though, so the table is bounded and forgets a value with the last record
// holding it; see intern.
type compact struct {
	id, version            string
	clientInfo, clientCaps []byte
	principal              Principal
	ups                    []namedUpstream
	created                time.Time
}

type namedUpstream struct {
	name string
	Upstream
}

func (c *compact) upstream(name string) int {
	for i := range c.ups {
		if c.ups[i].name == name {
			return i
		}
	}
	return -1
}

// compact returns the stored form of r: it shares no memory with r.
func (m *Memory) compact(r *Record) *compact {
	c := &compact{
		id: r.ID, version: r.ProtocolVersion,
		clientInfo: m.intern(r.ClientInfo), clientCaps: m.intern(r.ClientCapabilities),
		principal: r.Principal, created: r.Created,
	}
	if len(r.Upstreams) > 0 {
		c.ups = make([]namedUpstream, 0, len(r.Upstreams))
		for name, u := range r.Upstreams {
			u.Capabilities = m.intern(u.Capabilities)
			u.Subscribed = slices.Clone(u.Subscribed)
			c.ups = append(c.ups, namedUpstream{name, u})
		}
	}
	return c
}

// record returns a new Record for c: it shares no memory with c.
func (c *compact) record() *Record {
	r := &Record{
		ID: c.id, ProtocolVersion: c.version,
		ClientInfo: bytes.Clone(c.clientInfo), ClientCapabilities: bytes.Clone(c.clientCaps),
		Principal: c.principal, Created: c.created,
	}
	if c.ups != nil {
		r.Upstreams = make(map[string]Upstream, len(c.ups))
		for _, u := range c.ups {
			r.Upstreams[u.name] = cloneUpstream(u.Upstream)
		}
	}
	return r
}

// The intern table's bounds. Clients choose their info and capabilities, so
// a value is only worth sharing if it is small (the common clients' are a
// few hundred bytes), and the table holds only so many; a value beyond
// either is copied into its record alone, and goes with the record. So the
// table holds at most maxInterned × maxInternBytes bytes, and only values
// that live records hold.
const (
	maxInterned    = 10_000
	maxInternBytes = 1 << 10
)

// internEntry is one interned value: s is the map key itself, so the bytes
// are held once, and refs counts the references live records hold.
type internEntry struct {
	s    string
	refs int
}

// intern returns a copy of b shared with every other record holding the same
// bytes, or a copy of its own if b is too large to share or the table is
// full. Every value intern returns must be passed to unintern exactly once
// when the record holding it goes. Stored bytes are never modified, and Get
// hands out copies.
func (m *Memory) intern(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(b) == 0 || len(b) > maxInternBytes {
		return bytes.Clone(b)
	}
	m.imu.Lock()
	defer m.imu.Unlock()
	if ie, ok := m.interned[string(b)]; ok { // no allocation for the lookup
		ie.refs++
		return unsafe.Slice(unsafe.StringData(ie.s), len(ie.s))
	}
	if len(m.interned) >= maxInterned {
		return bytes.Clone(b)
	}
	if m.interned == nil {
		m.interned = make(map[string]*internEntry)
	}
	ie := &internEntry{s: string(b), refs: 1}
	m.interned[ie.s] = ie
	// The string's bytes are never written: callers only read them, and
	// compact.record copies them out.
	return unsafe.Slice(unsafe.StringData(ie.s), len(ie.s))
}

// unintern drops a reference intern returned; once a value has none left,
// the table forgets it. A value intern copied rather than shared is not in
// the table (or is, but as other bytes), and is left to the collector.
func (m *Memory) unintern(b []byte) {
	if len(b) == 0 || len(b) > maxInternBytes {
		return
	}
	m.imu.Lock()
	defer m.imu.Unlock()
	ie, ok := m.interned[string(b)]
	if !ok || unsafe.StringData(ie.s) != unsafe.SliceData(b) {
		return
	}
	if ie.refs--; ie.refs <= 0 {
		delete(m.interned, ie.s)
	}
}

// release drops the interned references c holds.
func (m *Memory) release(c *compact) {
	m.unintern(c.clientInfo)
	m.unintern(c.clientCaps)
	for _, u := range c.ups {
		m.unintern(u.Capabilities)
	}
}

// internedLen returns the number of values interned, for tests.
func (m *Memory) internedLen() int {
	m.imu.Lock()
	defer m.imu.Unlock()
	return len(m.interned)
}

func cloneUpstream(u Upstream) Upstream {
	u.Capabilities = bytes.Clone(u.Capabilities)
	u.Subscribed = slices.Clone(u.Subscribed)
	return u
}
