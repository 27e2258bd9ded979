package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis store's per-principal and per-tenant bounds (see "Per-principal
// and per-tenant bounds" in the Redis doc comment): a session is reserved in the count
// sets of its principal and tenant before its record is written.

// reservation is what [Redis.reserve] added a session to.
type reservation struct {
	keys  [2]string // principal set, tenant set
	added [2]bool
}

// countSets returns the keys of the count sets of p and of its tenant.
func (r *Redis) countSets(p Principal) [2]string {
	th := sha256.Sum256([]byte(p.Tenant))
	// Lengths first, so that no two principals hash the same input.
	ph := sha256.Sum256(fmt.Appendf(nil, "%d:%s%d:%s%s", len(p.Issuer), p.Issuer, len(p.Subject), p.Subject, p.Tenant))
	tenant := r.prefix + redisTenantInfix + hex.EncodeToString(th[:16]) + redisTenantSuffix
	return [2]string{tenant + redisPrinInfix + hex.EncodeToString(ph[:16]), tenant}
}

// reserve counts session id against the bounds of p and its tenant, or
// fails with a *LimitError; see "Per-principal and per-tenant bounds".
func (r *Redis) reserve(ctx context.Context, id string, p Principal, now time.Time) (*reservation, error) {
	res := &reservation{keys: r.countSets(p)}
	nowMs := now.UnixMilli()
	base := []any{id, now.Add(r.ttl).UnixMilli(), nowMs, r.setTTL.Milliseconds(), r.maxPrin, r.maxTenant}
	var gone []string
	var alive []any
	var limit *LimitError
	for range maxPruneRounds {
		args := append(append(append(slices.Clip(base), len(gone)), toAny(gone)...), alive...)
		cctx, cancel := context.WithTimeout(ctx, r.callTimeout)
		reply, err := redisReserve.Run(cctx, r.client, res.keys[:], args...).Slice()
		cancel()
		switch {
		case redis.IsOOMError(err):
			return nil, fmt.Errorf("%w: %w", ErrFull, err)
		case err != nil:
			return nil, unavailable("create", err)
		case len(reply) < 2:
			return nil, fmt.Errorf("session: create: unexpected reply %v from redis", reply)
		}
		which, _ := reply[0].(int64)
		if which == 0 && len(reply) == 3 {
			a0, _ := reply[1].(int64)
			a1, _ := reply[2].(int64)
			res.added = [2]bool{a0 == 1, a1 == 1}
			return res, nil
		}
		limit = &LimitError{Limit: LimitMaxPerPrincipal, Max: int64(r.maxPrin)}
		if which == 2 {
			limit = &LimitError{Limit: LimitMaxPerTenant, Max: int64(r.maxTenant)}
		}
		stale, _ := reply[1].([]any)
		if len(stale) == 0 {
			return nil, limit
		}
		if gone, alive, err = r.checkStale(ctx, stale, nowMs); err != nil {
			return nil, err
		}
	}
	// Still full, with members left unchecked: refuse rather than make the
	// caller wait; the next Create goes on where this one stopped.
	return nil, limit
}

// checkStale asks Redis whether the sessions stale names still live, in one
// pipeline, and returns the ids of those gone and id, score pairs for those
// alive, scored by when they now expire.
func (r *Redis) checkStale(ctx context.Context, stale []any, nowMs int64) (gone []string, alive []any, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	defer cancel()
	ids := make([]string, 0, len(stale))
	for _, v := range stale {
		if id, ok := v.(string); ok {
			ids = append(ids, id)
		}
	}
	cmds, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.PTTL(ctx, r.key(id))
		}
		return nil
	})
	if err != nil {
		return nil, nil, unavailable("create", err)
	}
	for i, c := range cmds {
		d := c.(*redis.DurationCmd).Val()
		switch {
		case d == -2: // go-redis keeps Redis's -2 (no key) as is
			gone = append(gone, ids[i])
		case d < 0: // no expiry: not a key this store wrote, but alive
			alive = append(alive, ids[i], nowMs+r.ttl.Milliseconds())
		default: // past now, or the next round would check it again
			alive = append(alive, ids[i], nowMs+max(d.Milliseconds(), 1))
		}
	}
	return gone, alive, nil
}

// unreserve takes id out of the sets reserve added it to, for a record that
// was not written. If that fails, the sets count it until its score passes
// and a full set's check finds it gone.
func (r *Redis) unreserve(ctx context.Context, id string, res *reservation) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.callTimeout)
	defer cancel()
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range res.keys {
			if res.added[i] {
				p.ZRem(ctx, k, id)
			}
		}
		return nil
	})
	if err != nil {
		r.logger.WarnContext(ctx, "cannot uncount a session that was not created; it counts until it would have expired",
			slog.String("error", err.Error()))
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
