package session

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisBus is a [Bus] over Redis pub/sub, for replicas sharing a Redis.
//
// Each replica holds one pub/sub connection, opened on the first
// Subscribe, and subscribes it to one channel per session with a
// subscriber here (<prefix>bus:<hash of the session id>), unsubscribing
// when the last goes: 10,000 open streams are 10,000 channels on one
// connection, which Redis serves as cheaply as one. One goroutine reads
// the connection and hands each message to the subscribers' bounded
// channels without waiting; go-redis reconnects a broken connection and
// subscribes it again to every channel, and a message published while it
// was down is lost (at most once, as [Bus] says). A Publish is one
// PUBLISH, on the store's pooled connections.
type RedisBus struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	log     *slog.Logger
	t       subTable

	start  sync.Once
	mu     sync.Mutex // serializes SUBSCRIBE and UNSUBSCRIBE with Close
	ps     *redis.PubSub
	done   chan struct{} // closed when the reader returns
	closed bool
}

var _ Bus = (*RedisBus)(nil)

// NewRedisBus returns a bus on the Redis of store r, whose key prefix it
// shares. It connects on the first Subscribe; Close ends it (closing the
// store does not).
func NewRedisBus(r *Redis, opts BusOptions) *RedisBus {
	return &RedisBus{client: r.client, prefix: r.prefix, timeout: r.callTimeout, log: r.logger, t: subTable{opts: opts.withDefaults()}, done: make(chan struct{})}
}

// Publish implements [Bus].
func (b *RedisBus) Publish(ctx context.Context, sessionID string, msg []byte) error {
	if err := b.t.opts.checkSize(msg); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if err := b.client.Publish(ctx, busChannel(b.prefix, sessionID), msg).Err(); err != nil {
		return unavailable("publish", err)
	}
	return nil
}

// Subscribe implements [Bus]. A SUBSCRIBE that fails (Redis down) is
// made again when go-redis reconnects; meanwhile the channel is open and
// quiet.
func (b *RedisBus) Subscribe(sessionID string, ch chan<- []byte) func() {
	key := busChannel(b.prefix, sessionID)
	s, first := b.t.add(key, ch)
	if first {
		b.command(key, true)
	}
	return sync.OnceFunc(func() {
		if b.t.remove(key, s) {
			b.command(key, false)
		}
	})
}

// command subscribes the connection to channel key, or unsubscribes it.
// The table decided under its lock that key gained its first subscriber
// or lost its last; a subscribe and an unsubscribe of one key racing
// here may land in either order, which only costs a channel subscribed
// with no subscriber (its messages are dropped) until the next change.
func (b *RedisBus) command(key string, subscribe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.start.Do(b.open)
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	var err error
	if subscribe {
		err = b.ps.Subscribe(ctx, key)
	} else {
		err = b.ps.Unsubscribe(ctx, key)
	}
	if err != nil {
		b.log.Debug("bus: redis pub/sub", "subscribe", subscribe, "error", err)
	}
}

// open starts the pub/sub connection and its reader. b.mu is held.
func (b *RedisBus) open() {
	b.ps = b.client.Subscribe(context.Background())
	// The reader never waits on a subscriber, so go-redis's own channel
	// only buffers what arrives while the reader hands out a message.
	msgs := b.ps.Channel(redis.WithChannelSize(1024))
	go func() {
		defer close(b.done)
		for m := range msgs {
			b.t.deliver(m.Channel, []byte(m.Payload))
		}
	}()
}

// Channels returns the number of channels subscribed on this replica.
func (b *RedisBus) Channels() int { return b.t.len() }

// Close ends the pub/sub connection and waits for its reader.
func (b *RedisBus) Close() error {
	b.mu.Lock()
	b.closed = true
	ps := b.ps
	b.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-b.done
	if errors.Is(err, redis.ErrClosed) {
		err = nil
	}
	return err
}
