package session

import (
	"context"
	"errors"
	"sync"
	"time"
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
// finding whom to evict O(log n)). A record is kept packed into one
// string, with what sessions share (the principal, protocol versions,
// small raw JSON members) kept once: see memory_record.go. A packed
// record is never modified (SetUpstream packs a new one), which lets Get
// copy it out after releasing the lock, once it has looked up the interned
// values it refers to.
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

	// interned holds the index in values of each small distinct raw JSON
	// member (client info and capabilities, upstream capabilities) that a
	// live record holds, shared by every record with those bytes; free
	// holds the indices of values' free slots. See intern.
	// Lock order: mu before imu.
	imu      sync.Mutex
	interned map[string]uint32
	values   []internValue
	free     []uint32

	mu  sync.Mutex
	ids idTable
	// held counts the records held (expired ones not yet removed
	// included) of each principal and tenant.
	held shares
	// root is the sentinel of a circular list of entries, least recently
	// seen first, and byPrin the sentinels of each principal's.
	root   entry
	byPrin map[Principal]*prinRoot

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
// is proot's head). Its principal is proot's: kept once per principal,
// not once per record.
type entry struct {
	rec          string // packed (see memory_record.go); never modified
	lastSeen     time.Time
	prev, next   *entry
	pprev, pnext *entry
	proot        *prinRoot
}

// prinRoot is the sentinel of a principal's list of entries, and the
// principal.
type prinRoot struct {
	head entry
	p    Principal
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
		byPrin:    make(map[Principal]*prinRoot),
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
	created := r.Created
	if created.IsZero() {
		created = now
	}
	rec := m.pack(r, created)

	var expired []*entry
	m.mu.Lock()
	evicted, err := m.admitLocked(r.ID, r.Principal, now, &expired)
	if err == nil {
		e := &entry{rec: rec, lastSeen: now}
		m.ids.put(e)
		m.insertLocked(e, r.Principal)
	}
	m.mu.Unlock()
	if err != nil {
		m.release(rec)
	}
	m.reportExpired(expired)
	if m.onEvict != nil {
		for _, e := range expired[len(expired)-evicted:] {
			m.onEvict(e.proot.p)
		}
	}
	return err
}

// admitLocked reports why a record id of p's cannot be stored now, if it
// cannot, removing expired records (appended to *expired) where that makes
// room, and in a full store evicting one (appended too). Expired records count against no
// bound, but are only removed when one is hit. The shares are checked
// before the pool: a principal or tenant at its share is refused, never
// served by evicting another's record. The evicted records are the last
// evicted of *expired.
func (m *Memory) admitLocked(id string, p Principal, now time.Time, expired *[]*entry) (evicted int, err error) {
	if e := m.ids.get(id); e != nil {
		if !m.isExpired(e, now) {
			return 0, ErrExists
		}
		m.removeLocked(e)
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
	if m.ids.len() >= m.max {
		sweep()
	}
	for m.ids.len() >= m.max {
		v := m.victimLocked(p)
		if v == nil {
			return evicted, ErrFull // not reached: a full store has a heaviest holder
		}
		m.removeLocked(v)
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
	if root == nil || root.head.pnext == &root.head {
		return nil
	}
	return root.head.pnext
}

// Get implements [Store.Get].
func (m *Memory) Get(ctx context.Context, id string) (*Record, error) {
	now := m.now()
	m.mu.Lock()
	e := m.ids.get(id)
	if e == nil || m.isExpired(e, now) {
		m.mu.Unlock()
		return nil, ErrNotFound
	}
	// Concurrent Gets may take the lock in another order than they read the
	// clock; LastSeen never goes back.
	if now.After(e.lastSeen) {
		e.lastSeen = now
	}
	m.moveToBackLocked(e)
	// The interned values under the lock: once it is released, a Delete
	// may drop those the record refers to, and their slots may be reused.
	var buf [8]string
	vals := m.resolve(e.rec, buf[:0])
	rec, p, lastSeen := e.rec, e.proot.p, e.lastSeen
	m.mu.Unlock()

	out := recordOf(rec, vals) // safe unlocked: rec is never modified
	out.Principal, out.LastSeen = p, lastSeen
	return out, nil
}

// SetUpstream implements [Store.SetUpstream].
func (m *Memory) SetUpstream(ctx context.Context, id, name, prev string, u Upstream) (Upstream, error) {
	pu := m.packUpstream(name, u)
	now := m.now()
	m.mu.Lock()
	e := m.ids.get(id)
	if e == nil || m.isExpired(e, now) {
		m.mu.Unlock()
		m.releaseUpstream(pu)
		return Upstream{}, ErrNotFound
	}
	p := unpack(e.rec)
	i := p.upstream(name)
	var cur packedUpstream
	if i >= 0 {
		cur = p.ups[i]
	}
	if cur.sessionID != prev {
		var out Upstream
		if i >= 0 {
			res := resolver{m.resolveRefs(nil, cur.version, cur.caps)}
			out = res.upstream(cur)
		}
		m.mu.Unlock()
		m.releaseUpstream(pu)
		return out, ErrConflict
	}
	// The new packed record takes over the old one's interned references,
	// but for the entry it replaces.
	var old packedUpstream
	if i >= 0 {
		old = p.ups[i]
		p.ups[i] = pu
	} else {
		p.ups = append(p.ups, pu)
	}
	e.rec = pack(&p)
	m.releaseUpstream(old)
	m.mu.Unlock()
	return cloneUpstream(u), nil
}

// Delete implements [Store.Delete]. OnExpire is not called.
func (m *Memory) Delete(ctx context.Context, id string) error {
	m.mu.Lock()
	e := m.ids.get(id)
	if e != nil {
		m.removeLocked(e)
	}
	m.mu.Unlock()
	if e != nil {
		m.release(e.rec)
	}
	return nil
}

// Len returns the number of records held, expired ones the sweeper has not
// removed yet included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ids.len()
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
		m.removeLocked(e)
		dst = append(dst, e)
		e = next
	}
	return dst
}

// reportExpired passes copies of the removed entries' records to OnExpire,
// then drops the interned references they held (removeLocked leaves them,
// so that the values are still there to copy). It must be called without
// m.mu held. Removed entries are no longer reachable from the store, so
// reading them unlocked is safe.
func (m *Memory) reportExpired(expired []*entry) {
	for _, e := range expired {
		if m.onExpire != nil {
			r := m.record(e.rec)
			r.Principal, r.LastSeen = e.proot.p, e.lastSeen
			m.onExpire(r)
		}
		m.release(e.rec)
	}
}

// insertLocked adds e, the most recently seen record, to the lists and
// to its holders' counts.
func (m *Memory) insertLocked(e *entry, p Principal) {
	m.held.add(p, 1)
	root := m.byPrin[p]
	if root == nil {
		root = &prinRoot{p: p}
		root.head.pprev, root.head.pnext = &root.head, &root.head
		m.byPrin[p] = root
	}
	m.pushBackLocked(e, root)
}

// removeLocked removes e from the store. It keeps e.proot,
// so that e's principal is known, and the interned references e.rec
// holds: the caller must release them once it no longer needs them, after
// copying the record out if it reports it.
func (m *Memory) removeLocked(e *entry) {
	p := e.proot.p
	m.held.add(p, -1)
	m.ids.remove(e)
	e.prev.next, e.next.prev = e.next, e.prev
	e.pprev.pnext, e.pnext.pprev = e.pnext, e.pprev
	if e.proot.head.pnext == &e.proot.head {
		delete(m.byPrin, p)
	}
	e.prev, e.next, e.pprev, e.pnext = nil, nil, nil, nil
}

// pushBackLocked puts e last in the store's list and in its principal's,
// whose sentinel is proot's head.
func (m *Memory) pushBackLocked(e *entry, proot *prinRoot) {
	last := m.root.prev
	e.prev, e.next = last, &m.root
	last.next, m.root.prev = e, e
	head := &proot.head
	plast := head.pprev
	e.pprev, e.pnext, e.proot = plast, head, proot
	plast.pnext, head.pprev = e, e
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
