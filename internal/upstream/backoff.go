package upstream

import (
	"context"
	"time"
)

// A Backoff spaces the attempts of a loop that keeps an upstream stream
// open (a watch, a client session's relay, a 2026-07-28 subscription):
// from a second, doubling up to a minute, and from a second again after
// an attempt that lasted longer than that (it worked for a while). Its
// zero value is ready to use.
type Backoff struct{ next time.Duration }

const (
	minBackoff = time.Second
	maxBackoff = time.Minute
)

// Wait waits before the next attempt, the last having begun at start. It
// reports false, at once, when ctx ends.
func (b *Backoff) Wait(ctx context.Context, start time.Time) bool {
	if b.next == 0 || time.Since(start) > maxBackoff {
		b.next = minBackoff
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(b.next):
	}
	b.next = min(2*b.next, maxBackoff)
	return true
}
