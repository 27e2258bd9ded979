package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis store's mailboxes (see Mailbox, and "Mailboxes" in the Redis doc comment):
// a list per key, taken with BLPOP on a connection of their own.

// Post implements [Mailbox.Post]. The ttl is rounded up to whole
// milliseconds.
func (r *Redis) Post(ctx context.Context, key string, msg []byte, ttl time.Duration) error {
	if err := checkPost(key, ttl); err != nil {
		return err
	}
	k := r.mailboxKey(key)
	ctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	defer cancel()
	n, err := redisPost.Run(ctx, r.client, []string{k, k + redisBytesSuffix},
		msg, ceilMillis(ttl).Milliseconds(), r.boxMsgs, r.boxBytes).Int()
	switch {
	case redis.IsOOMError(err):
		return fmt.Errorf("%w: %w", ErrFull, err)
	case err != nil:
		return unavailable("post", err)
	case n == -1:
		return &LimitError{Limit: LimitMailboxMessages, Max: int64(r.boxMsgs)}
	case n == -2:
		return &LimitError{Limit: LimitMailboxBytes, Max: r.boxBytes}
	}
	return nil
}

// Take implements [Mailbox.Take]. The wait is rounded up to whole
// milliseconds.
func (r *Redis) Take(ctx context.Context, key string, wait time.Duration) ([]byte, error) {
	if err := checkTake(ctx, key); err != nil {
		return nil, err
	}
	k := r.mailboxKey(key)
	if wait <= 0 {
		return r.takeNow(ctx, k)
	}
	wait = ceilMillis(wait) // > 0, as BLPOP's 0 would wait forever

	// The BLPOP's context is not ctx: go-redis would not act on ctx's
	// cancellation until the reply came, and its deadline would close the
	// connection under the BLPOP. It only bounds the call, in case Redis
	// stops answering; ctx's end reaches the BLPOP through the wake-up
	// list. See "Mailboxes" in the Redis doc comment.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+r.callTimeout)
	defer cancel()
	wake := k + redisWakeInfix + NewID()
	woken := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(woken)
		r.wake(ctx, wake, wait+r.callTimeout)
	})
	res, err := r.blocking.Do(bctx, "blpop", k, wake, blpopTimeout(wait)).StringSlice()
	if !stop() {
		<-woken
		// The wake-up came as the BLPOP ended by itself: delete it rather
		// than leave it to expire.
		if errors.Is(err, redis.Nil) || err == nil && len(res) == 2 && res[0] == k {
			r.deleteWake(ctx, wake)
		}
	}
	switch {
	case err == nil && len(res) == 2 && res[0] == k:
		r.took(ctx, k, len(res[1]))
		// Even if ctx ended meanwhile: the message is popped, and would be
		// lost if not returned.
		return []byte(res[1]), nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, redis.Nil):
		return nil, ErrNotFound
	case err != nil:
		return nil, unavailable("take", err)
	}
	return nil, fmt.Errorf("session: take: unexpected reply %q from redis", res)
}

// takeNow is Take without a wait.
func (r *Redis) takeNow(ctx context.Context, k string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	defer cancel()
	msg, err := redisTakeNow.Run(ctx, r.client, []string{k, k + redisBytesSuffix}).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, ErrNotFound
	case err != nil:
		return nil, unavailable("take", err)
	}
	return []byte(msg), nil
}

// took takes n bytes that a BLPOP popped off mailbox list k's counter. If
// that fails, the counter counts them until the mailbox expires; see
// "Mailboxes" in the Redis doc comment.
func (r *Redis) took(ctx context.Context, k string, n int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.callTimeout)
	defer cancel()
	if err := redisTook.Run(ctx, r.client, []string{k + redisBytesSuffix}, n).Err(); err != nil {
		r.logger.WarnContext(ctx, "cannot uncount a message taken from a mailbox; it counts until the mailbox expires",
			slog.String("error", err.Error()))
	}
}

// wake ends the BLPOP of a Take whose ctx ended by pushing to its wake-up
// list, which expires after ttl in case the BLPOP is gone. If the push
// fails, the BLPOP ends at its own timeout instead.
func (r *Redis) wake(ctx context.Context, list string, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.callTimeout)
	defer cancel()
	_, err := r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, list, "")
		p.PExpire(ctx, list, ceilMillis(ttl))
		return nil
	})
	if err != nil {
		r.logger.WarnContext(ctx, "cannot wake a cancelled mailbox take; it waits out its timeout",
			slog.String("error", err.Error()))
	}
}

// deleteWake deletes a wake-up list that no BLPOP took.
func (r *Redis) deleteWake(ctx context.Context, list string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.callTimeout)
	defer cancel()
	_ = r.client.Del(ctx, list).Err() // if it fails, the list expires
}

// blpopTimeout formats wait, a whole number of milliseconds, as BLPOP's
// timeout in seconds. Whole seconds are sent as an integer, which Redis
// before 6.0 accepts too.
func blpopTimeout(wait time.Duration) string {
	if wait%time.Second == 0 {
		return strconv.FormatInt(int64(wait/time.Second), 10)
	}
	return strconv.FormatFloat(wait.Seconds(), 'f', 3, 64)
}

// ceilMillis rounds d up to whole milliseconds, the unit of PEXPIRE.
func ceilMillis(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// mailboxKey returns the Redis key of the mailbox under key.
func (r *Redis) mailboxKey(key string) string {
	return r.prefix + redisMailboxInfix + key + redisMailboxSuffix
}
