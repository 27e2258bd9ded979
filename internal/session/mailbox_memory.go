package session

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// The memory store's mailboxes (see Mailbox): a queue of messages per key,
// and the Takes waiting on it, in the store's lock.

// mailbox is one [Memory] mailbox. At most one of msgs and waiters is
// non-empty: Post hands a message to a waiting Take rather than queue it.
type mailbox struct {
	msgs    [][]byte // oldest first; owned by the store
	size    int64    // bytes in msgs
	expires time.Time
	// waiters are the channels of the Takes waiting, longest-waiting first.
	// Each has room for one message, so that Post never blocks.
	waiters []chan []byte
}

// expired reports whether b's messages have expired at now.
func (b *mailbox) expired(now time.Time) bool {
	return !now.Before(b.expires)
}

// Post implements [Mailbox.Post].
func (m *Memory) Post(ctx context.Context, key string, msg []byte, ttl time.Duration) error {
	if err := checkPost(key, ttl); err != nil {
		return err
	}
	msg = append([]byte{}, msg...) // a copy, never nil
	now := m.now()
	m.mbmu.Lock()
	defer m.mbmu.Unlock()
	b := m.boxes[key]
	if b == nil {
		if len(m.boxes) >= m.max {
			m.removeExpiredBoxesLocked(now)
		}
		if len(m.boxes) >= m.max {
			return fmt.Errorf("%w: %d mailboxes", ErrFull, m.max)
		}
		b = &mailbox{}
		m.boxes[key] = b
	} else if b.expired(now) {
		clear(b.msgs)
		b.msgs, b.size = b.msgs[:0], 0
	}
	if len(b.waiters) > 0 {
		w := b.waiters[0]
		b.waiters = slices.Delete(b.waiters, 0, 1)
		w <- msg // never blocks: w has room for one, and is sent to once
		if len(b.waiters) == 0 {
			delete(m.boxes, key)
		}
		return nil
	}
	if len(b.msgs) >= m.boxMsgs {
		return &LimitError{Limit: LimitMailboxMessages, Max: int64(m.boxMsgs)}
	}
	if b.size+int64(len(msg)) > m.boxBytes {
		if len(b.msgs) == 0 {
			delete(m.boxes, key) // do not keep the empty box just made
		}
		return &LimitError{Limit: LimitMailboxBytes, Max: m.boxBytes}
	}
	b.msgs = append(b.msgs, msg)
	b.size += int64(len(msg))
	b.expires = now.Add(ttl)
	return nil
}

// Take implements [Mailbox.Take].
func (m *Memory) Take(ctx context.Context, key string, wait time.Duration) ([]byte, error) {
	if err := checkTake(ctx, key); err != nil {
		return nil, err
	}
	now := m.now()
	m.mbmu.Lock()
	b := m.boxes[key]
	if b != nil && len(b.msgs) > 0 {
		if !b.expired(now) {
			msg := b.msgs[0]
			b.msgs[0] = nil
			b.msgs = b.msgs[1:]
			b.size -= int64(len(msg))
			if len(b.msgs) == 0 {
				delete(m.boxes, key)
			}
			m.mbmu.Unlock()
			return msg, nil
		}
		delete(m.boxes, key) // expired, and has no waiters since it has messages
		b = nil
	}
	if wait <= 0 {
		m.mbmu.Unlock()
		return nil, ErrNotFound
	}
	// A box that only has waiters does not count against MaxSessions: the
	// waiting goroutines bound those.
	if b == nil {
		b = &mailbox{}
		m.boxes[key] = b
	}
	ch := make(chan []byte, 1)
	b.waiters = append(b.waiters, ch)
	m.mbmu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var err error
	select {
	case msg := <-ch:
		return msg, nil
	case <-timer.C:
		err = ErrNotFound
	case <-ctx.Done():
		err = ctx.Err()
	}
	m.mbmu.Lock()
	removed := m.removeWaiterLocked(key, ch)
	m.mbmu.Unlock()
	if !removed {
		// A Post took ch off the list, so it sent to ch, as the wait
		// ended: the message is this Take's, or it would be lost.
		return <-ch, nil
	}
	return nil, err
}

// removeWaiterLocked removes ch from key's waiters and reports whether it
// was there. Only Post takes a waiter off the list otherwise.
func (m *Memory) removeWaiterLocked(key string, ch chan []byte) bool {
	b := m.boxes[key]
	if b == nil {
		return false
	}
	i := slices.Index(b.waiters, ch)
	if i < 0 {
		return false
	}
	b.waiters = slices.Delete(b.waiters, i, i+1)
	if len(b.waiters) == 0 && len(b.msgs) == 0 {
		delete(m.boxes, key)
	}
	return true
}

// removeExpiredBoxesLocked removes the mailboxes whose messages expired.
// Unlike records, mailboxes are not kept in expiry order (each Post moves a
// mailbox's expiry), so this walks them all: once per sweep, and in a Post
// only when the store is full.
func (m *Memory) removeExpiredBoxesLocked(now time.Time) {
	for key, b := range m.boxes {
		// A box with waiters has no messages, and must stay.
		if len(b.waiters) == 0 && b.expired(now) {
			delete(m.boxes, key)
		}
	}
}
