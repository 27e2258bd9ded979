package session

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// MemoryEvents is an [EventLog] in process memory, for a gateway with a
// single replica: a ring of events per stream.
//
// It holds at most MaxStreams logs and MaxBytes bytes of events in all,
// of which the logs of one principal's sessions hold at most
// MaxStreamsPerPrincipal and MaxBytesPerPrincipal, and those of one
// tenant's at most MaxStreamsPerTenant and MaxBytesPerTenant (see "Fair
// shares" in scale.go). A holder that would pass its share loses its own
// least recently written logs (a tenant, those of its heaviest
// principal); a full store, those of the heaviest holder (the tenant
// holding the most, then its principal holding the most). A log that
// cannot be kept whole even so (larger than a share) is dropped, and its
// Append fails with ErrFull, so that a stream is never resumed with a gap.
// A session holds at most StreamsPerSession logs. An expired log is
// invisible at once and freed by the next Open that finds the store full,
// or the next call that touches it.
//
// A cursor is the event's sequence number in its stream, from 1 (the
// empty first event of Open).
type MemoryEvents struct {
	lim EventLimits
	now func() time.Time

	mu        sync.Mutex
	logs      map[eventKey]*memLog
	bySession map[string][]string // a session's streams, oldest first
	bytes     int64               // of the events of every log
	// streams and held count the logs and bytes of each principal and
	// tenant; byPrin holds the sentinels of each principal's list of
	// logs, least recently written first.
	streams, held shares
	byPrin        map[Principal]*memLog
}

var _ EventLog = (*MemoryEvents)(nil)

type eventKey struct{ sid, stream string }

// memLog is one stream's log: the events numbered first to next-1.
type memLog struct {
	key eventKey
	who Principal
	// pprev and pnext link the logs of who, least recently written
	// first; proot is their sentinel.
	pprev, pnext, proot *memLog

	events  []memEvent
	first   uint64
	next    uint64
	size    int64
	expires time.Time
	owner   []byte    // a call's: see EventLog.Open
	lease   time.Time // with an owner: when the writer is taken for dead
	// wake is closed, and replaced, by each Append, waking the Reads
	// that wait.
	wake chan struct{}
}

type memEvent struct {
	data  []byte // never modified
	final bool
}

// NewMemoryEvents returns an empty log with limits lim. now, if nil, is
// time.Now.
func NewMemoryEvents(lim EventLimits, now func() time.Time) *MemoryEvents {
	if now == nil {
		now = time.Now
	}
	return &MemoryEvents{
		lim: lim.withDefaults(), now: now,
		logs: make(map[eventKey]*memLog), bySession: make(map[string][]string),
		byPrin: make(map[Principal]*memLog),
	}
}

// Len returns the number of logs held, expired ones not yet freed
// included.
func (m *MemoryEvents) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.logs)
}

// Bytes returns the bytes of events held.
func (m *MemoryEvents) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}

// Open implements [EventLog.Open].
func (m *MemoryEvents) Open(ctx context.Context, who Principal, sid, stream string, owner []byte) (string, error) {
	if err := checkEventStream(sid, stream); err != nil {
		return "", err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := eventKey{sid, stream}
	if old := m.logs[k]; old != nil {
		m.dropLocked(old)
	}
	if own := m.bySession[sid]; len(own) >= m.lim.StreamsPerSession {
		m.dropLocked(m.logs[eventKey{sid, own[0]}])
	}
	// Room within who's shares, then in the store: each drop frees one.
	for m.streams.principal(who) >= int64(m.lim.MaxStreamsPerPrincipal) {
		if !m.dropOldestLocked(who, nil, false) {
			return "", fmt.Errorf("%w: %d event logs", ErrFull, m.lim.MaxStreamsPerPrincipal)
		}
	}
	for m.streams.tenant(who.Tenant) >= int64(m.lim.MaxStreamsPerTenant) {
		q, ok := m.streams.heaviestOf(who.Tenant, who)
		if !ok || !m.dropOldestLocked(q, nil, false) {
			return "", fmt.Errorf("%w: %d event logs", ErrFull, m.lim.MaxStreamsPerTenant)
		}
	}
	if len(m.logs) >= m.lim.MaxStreams {
		m.sweepLocked(now)
	}
	for len(m.logs) >= m.lim.MaxStreams {
		q, ok := m.streams.heaviest(who)
		if !ok || !m.dropOldestLocked(q, nil, false) {
			return "", fmt.Errorf("%w: %d event logs", ErrFull, m.lim.MaxStreams)
		}
	}
	l := &memLog{key: k, who: who, events: []memEvent{{}}, first: 1, next: 2, expires: now.Add(m.lim.TTL), wake: make(chan struct{})}
	if len(owner) > 0 {
		l.owner, l.lease = slices.Clone(owner), now.Add(m.lim.Lease)
	}
	m.logs[k] = l
	m.bySession[sid] = append(m.bySession[sid], stream)
	m.streams.add(who, 1)
	root := m.byPrin[who]
	if root == nil {
		root = &memLog{}
		root.pprev, root.pnext = root, root
		m.byPrin[who] = root
	}
	l.proot = root
	l.pushBack()
	return "1", nil
}

// Append implements [EventLog.Append].
func (m *MemoryEvents) Append(ctx context.Context, sid, stream string, data []byte, final bool) (string, error) {
	if err := checkEventStream(sid, stream); err != nil {
		return "", err
	}
	data = slices.Clone(data)
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := eventKey{sid, stream}
	l := m.liveLocked(k, now)
	if l == nil {
		return "", ErrNotFound
	}
	seq := l.next
	l.next++
	l.events = append(l.events, memEvent{data: data, final: final})
	size := l.size + int64(len(data))
	for len(l.events) > 0 && (len(l.events) > m.lim.EventsPerStream || size > m.lim.BytesPerStream) {
		size -= int64(len(l.events[0].data))
		l.events[0] = memEvent{}
		l.events = l.events[1:]
		l.first++
	}
	m.resizeLocked(l, size)
	l.unlink()
	l.pushBack()
	if err := m.makeRoomLocked(l); err != nil {
		return "", err
	}
	l.expires = now.Add(m.lim.TTL)
	if l.owner != nil {
		l.lease = now.Add(m.lim.Lease)
	}
	close(l.wake)
	l.wake = make(chan struct{})
	return strconv.FormatUint(seq, 10), nil
}

// Touch implements [EventLog.Touch].
func (m *MemoryEvents) Touch(ctx context.Context, sid, stream string) error {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.liveLocked(eventKey{sid, stream}, now)
	if l == nil {
		return nil
	}
	l.expires = now.Add(m.lim.TTL)
	if l.owner != nil {
		l.lease = now.Add(m.lim.Lease)
	}
	l.unlink()
	l.pushBack()
	return nil
}

// Read implements [EventLog.Read]. The events' Data must not be modified.
func (m *MemoryEvents) Read(ctx context.Context, sid, stream, after string, wait time.Duration) ([]Event, error) {
	if err := checkEventStream(sid, stream); err != nil {
		return nil, ErrNotFound
	}
	cur, err := strconv.ParseUint(after, 10, 64)
	if err != nil {
		return nil, ErrNotFound
	}
	var timer *time.Timer
	for {
		m.mu.Lock()
		l := m.liveLocked(eventKey{sid, stream}, m.now())
		switch {
		case l == nil || cur < 1 || cur >= l.next:
			m.mu.Unlock()
			return nil, ErrNotFound
		case cur+1 < l.first:
			m.mu.Unlock()
			return nil, ErrEventsGone
		}
		from := int(cur + 1 - l.first)
		if from == len(l.events) && l.owner != nil && (len(l.events) == 0 || !l.events[len(l.events)-1].final) && !m.now().Before(l.lease) {
			owner := l.owner
			m.mu.Unlock()
			return []Event{{Final: true, Lost: true, Data: owner}}, nil
		}
		if from < len(l.events) || wait <= 0 {
			evs := make([]Event, 0, min(len(l.events)-from, maxEventsPerRead))
			for i := from; i < len(l.events) && len(evs) < maxEventsPerRead; i++ {
				e := l.events[i]
				evs = append(evs, Event{Cursor: strconv.FormatUint(l.first+uint64(i), 10), Data: e.data, Final: e.final})
			}
			m.mu.Unlock()
			return evs, nil
		}
		wake := l.wake
		m.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-wake:
		case <-timer.C:
			wait = 0 // one last look
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// End implements [EventLog.End].
func (m *MemoryEvents) End(ctx context.Context, sid string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, stream := range slices.Clone(m.bySession[sid]) {
		m.dropLocked(m.logs[eventKey{sid, stream}])
	}
	return nil
}

// liveLocked returns the log under k, or nil if there is none or it
// expired (then it is freed).
func (m *MemoryEvents) liveLocked(k eventKey, now time.Time) *memLog {
	l := m.logs[k]
	if l != nil && !now.Before(l.expires) {
		m.dropLocked(l)
		return nil
	}
	return l
}

// resizeLocked sets l's size, counting the difference against the
// store's bytes and its holders'.
func (m *MemoryEvents) resizeLocked(l *memLog, size int64) {
	d := size - l.size
	if d == 0 {
		return
	}
	l.size = size
	m.bytes += d
	m.held.add(l.who, d)
}

// makeRoomLocked drops logs until the bytes of l's principal, of its
// tenant and of the store are within their bounds: first the least
// recently written of l's principal, then those of its tenant's heaviest
// principal, then those of the heaviest holder's. If l itself would have
// to go, it is dropped, with ErrFull.
func (m *MemoryEvents) makeRoomLocked(l *memLog) error {
	who := l.who
	full := func(what string, n int64) error {
		m.dropLocked(l)
		return fmt.Errorf("%w: %s of %d bytes of events", ErrFull, what, n)
	}
	for m.held.principal(who) > m.lim.MaxBytesPerPrincipal {
		if !m.dropOldestLocked(who, l, true) {
			return full("a principal's share", m.lim.MaxBytesPerPrincipal)
		}
	}
	for m.held.tenant(who.Tenant) > m.lim.MaxBytesPerTenant {
		q, ok := m.held.heaviestOf(who.Tenant, who)
		if !ok || !m.dropOldestLocked(q, l, true) {
			return full("a tenant's share", m.lim.MaxBytesPerTenant)
		}
	}
	for m.bytes > m.lim.MaxBytes {
		q, ok := m.held.heaviest(who)
		if !ok || !m.dropOldestLocked(q, l, true) {
			return full("the store", m.lim.MaxBytes)
		}
	}
	return nil
}

// dropOldestLocked drops the least recently written log of p, other than
// keep, and with some bytes if withBytes. It reports whether it found one.
func (m *MemoryEvents) dropOldestLocked(p Principal, keep *memLog, withBytes bool) bool {
	root := m.byPrin[p]
	if root == nil {
		return false
	}
	for l := root.pnext; l != root; l = l.pnext {
		if l != keep && (!withBytes || l.size > 0) {
			m.dropLocked(l)
			return true
		}
	}
	return false
}

// dropLocked frees the log l, if not nil, and wakes its readers: they
// find it gone.
func (m *MemoryEvents) dropLocked(l *memLog) {
	if l == nil {
		return
	}
	k := l.key
	delete(m.logs, k)
	m.resizeLocked(l, 0)
	m.streams.add(l.who, -1)
	l.unlink()
	if l.proot.pnext == l.proot {
		delete(m.byPrin, l.who)
	}
	close(l.wake)
	own := m.bySession[k.sid]
	if i := slices.Index(own, k.stream); i >= 0 {
		own = slices.Delete(own, i, i+1)
	}
	if len(own) == 0 {
		delete(m.bySession, k.sid)
	} else {
		m.bySession[k.sid] = own
	}
}

// sweepLocked frees the expired logs. Logs are not kept in expiry order
// (each Append moves one), so this walks them all: only when an Open
// finds the store full.
func (m *MemoryEvents) sweepLocked(now time.Time) {
	for _, l := range m.logs {
		if !now.Before(l.expires) {
			m.dropLocked(l)
		}
	}
}

// pushBack makes l its principal's most recently written log.
func (l *memLog) pushBack() {
	last := l.proot.pprev
	l.pprev, l.pnext = last, l.proot
	last.pnext, l.proot.pprev = l, l
}

// unlink takes l out of its principal's list.
func (l *memLog) unlink() {
	l.pprev.pnext, l.pnext.pprev = l.pnext, l.pprev
	l.pprev, l.pnext = nil, nil
}
