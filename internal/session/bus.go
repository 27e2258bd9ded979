package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
)

// Bus carries messages to a session's server-to-client stream, wherever
// it is open: a replica that has something for a session's client
// publishes it under the session id, and the replica holding the
// session's GET stream, which subscribed under that id, relays it. A
// message published while no replica subscribes is dropped: delivery is
// at most once, for the streams open at that moment, and never waits for
// a reader. All of a Bus's methods must be safe for use by multiple
// goroutines.
//
// [MemoryBus] serves one process; [RedisBus] every replica sharing a
// Redis, over one pub/sub connection per replica.
type Bus interface {
	// Publish hands a copy of msg to every subscriber of sessionID, on
	// every replica, without waiting for any to read it. It fails with a
	// *[LimitError] (ErrLimit) for a message over the bus's size bound,
	// and with ErrUnavailable when the bus cannot be reached.
	Publish(ctx context.Context, sessionID string, msg []byte) error
	// Subscribe sends to ch the messages published for sessionID from
	// now on, until cancel, which must be called once the caller is done;
	// once cancel returns nothing more is sent on ch, which the bus never
	// closes. The bus never waits for ch: a message that finds it full is
	// dropped for this subscriber (and counted, see [BusOptions.OnDrop]),
	// so ch's capacity bounds what waits for the subscriber. Each message
	// is the subscriber's to keep.
	Subscribe(sessionID string, ch chan<- []byte) (cancel func())
}

// LimitBusMessageBytes names the bound of one bus message in a *LimitError.
const LimitBusMessageBytes = "bus_message_bytes"

// DefaultBusMessageBytes bounds one bus message, unless
// [BusOptions.MaxMessageBytes] says otherwise.
const DefaultBusMessageBytes = 1 << 20

// BusOptions configure a bus. The zero value is usable.
type BusOptions struct {
	// MaxMessageBytes bounds a published message; zero or negative means
	// DefaultBusMessageBytes.
	MaxMessageBytes int
	// OnDrop, if set, is called for each message dropped because a
	// subscriber's channel was full. It must not block.
	OnDrop func()
}

func (o BusOptions) withDefaults() BusOptions {
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultBusMessageBytes
	}
	if o.OnDrop == nil {
		o.OnDrop = func() {}
	}
	return o
}

// checkSize reports a message over the bound as a *LimitError.
func (o BusOptions) checkSize(msg []byte) error {
	if len(msg) > o.MaxMessageBytes {
		return &LimitError{Limit: LimitBusMessageBytes, Max: int64(o.MaxMessageBytes)}
	}
	return nil
}

// busSub is one subscriber: its channel, which the owning table sends on
// only under its lock, so that once remove returned nothing more is sent.
type busSub struct {
	ch chan<- []byte
}

// subTable is the subscribers of one process, by key (a session id, or
// the Redis channel it maps to).
type subTable struct {
	mu   sync.Mutex
	subs map[string][]*busSub
	opts BusOptions
}

// add registers a new subscriber of channel ch under key and reports
// whether it is the first there.
func (t *subTable) add(key string, ch chan<- []byte) (*busSub, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs == nil {
		t.subs = make(map[string][]*busSub)
	}
	s := &busSub{ch: ch}
	first := len(t.subs[key]) == 0
	t.subs[key] = append(t.subs[key], s)
	return s, first
}

// remove unregisters s and reports whether key has no subscriber left.
func (t *subTable) remove(key string, s *busSub) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.subs[key]
	for i, x := range list {
		if x == s {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(t.subs, key)
		return true
	}
	t.subs[key] = list
	return false
}

// deliver hands msg to every subscriber of key without blocking; the
// first gets msg itself, the others copies.
func (t *subTable) deliver(key string, msg []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, s := range t.subs[key] {
		m := msg
		if i > 0 {
			m = append([]byte(nil), msg...)
		}
		select {
		case s.ch <- m:
		default:
			t.opts.OnDrop()
		}
	}
}

// len returns the number of keys with subscribers.
func (t *subTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.subs)
}

// busChannel is the Redis channel of a session's messages: a hash of its
// id, so that the id (which, with the principal's token, opens the
// session) never appears in what Redis shows (PUBSUB CHANNELS, MONITOR).
func busChannel(prefix, sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return fmt.Sprintf("%sbus:%s", prefix, hex.EncodeToString(sum[:16]))
}
