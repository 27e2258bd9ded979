package session

import (
	"context"
	"sync"
)

// MemoryBus is a [Bus] within one process: for the memory store, whose
// sessions live on one replica.
type MemoryBus struct {
	t subTable
}

var _ Bus = (*MemoryBus)(nil)

// NewMemoryBus returns an in-process bus.
func NewMemoryBus(opts BusOptions) *MemoryBus {
	return &MemoryBus{t: subTable{opts: opts.withDefaults()}}
}

// Publish implements [Bus].
func (b *MemoryBus) Publish(ctx context.Context, sessionID string, msg []byte) error {
	if err := b.t.opts.checkSize(msg); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.t.deliver(sessionID, append([]byte(nil), msg...))
	return nil
}

// Subscribe implements [Bus].
func (b *MemoryBus) Subscribe(sessionID string, ch chan<- []byte) func() {
	s, _ := b.t.add(sessionID, ch)
	return sync.OnceFunc(func() { b.t.remove(sessionID, s) })
}

// Close implements io.Closer; a MemoryBus holds nothing to release.
func (b *MemoryBus) Close() error { return nil }
