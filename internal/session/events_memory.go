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
// It holds at most MaxStreams logs and MaxBytes bytes of events in all:
// Open beyond MaxStreams (once expired logs are gone) fails with ErrFull,
// and an Append that would pass MaxBytes drops its own log and fails with
// ErrFull, so that a stream that cannot be logged whole is not resumed
// with a gap. A session holds at most StreamsPerSession logs, which with
// sessions.max_per_principal bounds what one principal holds. An expired
// log is invisible at once and freed by the next Open that needs room, or
// the next call that touches it.
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
}

var _ EventLog = (*MemoryEvents)(nil)

type eventKey struct{ sid, stream string }

// memLog is one stream's log: the events numbered first to next-1.
type memLog struct {
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
func (m *MemoryEvents) Open(ctx context.Context, sid, stream string, owner []byte) (string, error) {
	if err := checkEventStream(sid, stream); err != nil {
		return "", err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := eventKey{sid, stream}
	if old := m.logs[k]; old != nil {
		m.dropLocked(k, old)
	}
	if len(m.logs) >= m.lim.MaxStreams {
		m.sweepLocked(now)
	}
	if len(m.logs) >= m.lim.MaxStreams {
		return "", fmt.Errorf("%w: %d event logs", ErrFull, m.lim.MaxStreams)
	}
	if own := m.bySession[sid]; len(own) >= m.lim.StreamsPerSession {
		oldest := eventKey{sid, own[0]}
		m.dropLocked(oldest, m.logs[oldest])
	}
	l := &memLog{events: []memEvent{{}}, first: 1, next: 2, expires: now.Add(m.lim.TTL), wake: make(chan struct{})}
	if len(owner) > 0 {
		l.owner, l.lease = slices.Clone(owner), now.Add(m.lim.Lease)
	}
	m.logs[k] = l
	m.bySession[sid] = append(m.bySession[sid], stream)
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
	l.size += int64(len(data))
	m.bytes += int64(len(data))
	for len(l.events) > 0 && (len(l.events) > m.lim.EventsPerStream || l.size > m.lim.BytesPerStream) {
		n := int64(len(l.events[0].data))
		l.size -= n
		m.bytes -= n
		l.events[0] = memEvent{}
		l.events = l.events[1:]
		l.first++
	}
	if m.bytes > m.lim.MaxBytes {
		m.dropLocked(k, l)
		return "", fmt.Errorf("%w: %d bytes of events", ErrFull, m.lim.MaxBytes)
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
		k := eventKey{sid, stream}
		m.dropLocked(k, m.logs[k])
	}
	return nil
}

// liveLocked returns the log under k, or nil if there is none or it
// expired (then it is freed).
func (m *MemoryEvents) liveLocked(k eventKey, now time.Time) *memLog {
	l := m.logs[k]
	if l != nil && !now.Before(l.expires) {
		m.dropLocked(k, l)
		return nil
	}
	return l
}

// dropLocked frees the log l under k.
func (m *MemoryEvents) dropLocked(k eventKey, l *memLog) {
	if l == nil {
		return
	}
	delete(m.logs, k)
	m.bytes -= l.size
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
	for k, l := range m.logs {
		if !now.Before(l.expires) {
			m.dropLocked(k, l)
		}
	}
}
