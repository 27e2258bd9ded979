package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisTasks is a [TaskStore] in the Redis of a [Redis] session store, so
// that every replica routes every task.
//
// # Layout
//
// A task is a JSON string at <prefix>task:{<id>}, and the id of the task
// an upstream knows by its own id a string at <prefix>task-up:{<k>} (k:
// see upstreamTaskKey); both expire when the task does. Each principal has
// a sorted set of its task ids at <prefix>tasks:{<t>}:principal:<p> and
// each tenant one at <prefix>tasks:{<t>} (t, p: the first 128 bits of the
// SHA-256 of the tenant and of the principal, as for sessions), scored by
// the task's expiry in Unix ms. A task's expiry never moves, so a score is
// exact: CreateTask's script drops the members whose score passed, counts
// the rest against the bounds and adds the new id, atomically (both sets
// share the hash tag {<t>}, one Cluster slot). The sets expire with their
// last task. ListTasks reads the principal's set (at most its bound of
// ids), then the page's records in one pipeline.
type RedisTasks struct{ r *Redis }

var _ TaskStore = (*RedisTasks)(nil)

// TaskStore returns the task store that lives beside r's sessions.
func (r *Redis) TaskStore() TaskStore { return &RedisTasks{r: r} }

const (
	redisTaskInfix   = "task:{"
	redisTaskUpInfix = "task-up:{"
	redisTasksInfix  = "tasks:{"
)

// redisTaskReserve counts a new task against the sets of its principal
// (KEYS[1]) and tenant (KEYS[2]). ARGV: id, expiry (Unix ms), now (Unix
// ms), principal bound, tenant bound (0: none). Returns 0, or 1
// (principal) or 2 (tenant) over that bound.
var redisTaskReserve = redis.NewScript(`
local caps = {tonumber(ARGV[4]), tonumber(ARGV[5])}
for k = 1, 2 do
	redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', ARGV[3])
	if caps[k] > 0 and redis.call('ZCARD', KEYS[k]) >= caps[k] then
		return k
	end
end
for k = 1, 2 do
	redis.call('ZADD', KEYS[k], ARGV[2], ARGV[1])
	local top = redis.call('ZRANGE', KEYS[k], -1, -1, 'WITHSCORES')
	redis.call('PEXPIREAT', KEYS[k], tonumber(top[2]) + 1000)
end
return 0
`)

// redisTaskUpdate replaces the task at KEYS[1] with ARGV[1], keeping its
// expiry. Returns 0 when there is none.
var redisTaskUpdate = redis.NewScript(`
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then
	return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
return 1
`)

func (s *RedisTasks) key(id string) string { return s.r.prefix + redisTaskInfix + id + "}" }

func (s *RedisTasks) upKey(upstream, sessionID, upstreamTaskID string) string {
	return s.r.prefix + redisTaskUpInfix + upstreamTaskKey(upstream, sessionID, upstreamTaskID) + "}"
}

// sets returns the keys of the task sets of p and of its tenant: named as
// the session count sets are (see countSets), under "tasks:".
func (s *RedisTasks) sets(p Principal) []string {
	th := sha256.Sum256([]byte(p.Tenant))
	ph := sha256.Sum256(fmt.Appendf(nil, "%d:%s%d:%s%s", len(p.Issuer), p.Issuer, len(p.Subject), p.Subject, p.Tenant))
	tenant := s.r.prefix + redisTasksInfix + hex.EncodeToString(th[:16]) + "}"
	return []string{tenant + redisPrinInfix + hex.EncodeToString(ph[:16]), tenant}
}

// CreateTask implements [TaskStore.CreateTask]. lim.MaxTasks does not
// apply: Redis's maxmemory bounds the store (ErrFull).
func (s *RedisTasks) CreateTask(ctx context.Context, t *Task, lim TaskLimits) error {
	now := time.Now()
	if err := checkTask(t, now); err != nil {
		return err
	}
	c := *t
	c.Expires = c.Expires.Truncate(time.Millisecond)
	body, err := marshalCompact(&c)
	if err != nil {
		return fmt.Errorf("session: encoding task: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.r.callTimeout)
	defer cancel()
	sets := s.sets(c.Principal)
	over, err := redisTaskReserve.Run(ctx, s.r.client, sets, c.ID, c.Expires.UnixMilli(), now.UnixMilli(),
		max(lim.MaxPerPrincipal, 0), max(lim.MaxPerTenant, 0)).Int()
	switch {
	case redis.IsOOMError(err):
		return fmt.Errorf("%w: %w", ErrFull, err)
	case err != nil:
		return unavailable("create task", err)
	case over == 1:
		return &LimitError{Limit: LimitTasksPerPrincipal, Max: int64(lim.MaxPerPrincipal)}
	case over == 2:
		return &LimitError{Limit: LimitTasksPerTenant, Max: int64(lim.MaxPerTenant)}
	}
	ttl := time.Until(c.Expires)
	var set *redis.BoolCmd
	_, err = s.r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		set = p.SetNX(ctx, s.key(c.ID), body, ttl)
		p.Set(ctx, s.upKey(c.Upstream, c.Session.SessionID, c.UpstreamTaskID), c.ID, ttl)
		return nil
	})
	switch {
	case redis.IsOOMError(err):
		err = fmt.Errorf("%w: %w", ErrFull, err)
	case err != nil:
		err = unavailable("create task", err)
	case !set.Val():
		err = ErrExists
	}
	if err != nil {
		s.r.client.ZRem(context.WithoutCancel(ctx), sets[0], c.ID)
		s.r.client.ZRem(context.WithoutCancel(ctx), sets[1], c.ID)
	}
	return err
}

// GetTask implements [TaskStore.GetTask].
func (s *RedisTasks) GetTask(ctx context.Context, id string) (*Task, error) {
	ctx, cancel := context.WithTimeout(ctx, s.r.callTimeout)
	defer cancel()
	b, err := s.r.client.Get(ctx, s.key(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, unavailable("get task", err)
	}
	return decodeTask(b)
}

func decodeTask(b []byte) (*Task, error) {
	var t Task
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("session: decoding task from redis: %w", err)
	}
	if !t.Expires.After(time.Now()) {
		return nil, ErrNotFound
	}
	return &t, nil
}

// FindTask implements [TaskStore.FindTask].
func (s *RedisTasks) FindTask(ctx context.Context, upstream, sessionID, upstreamTaskID string) (*Task, error) {
	cctx, cancel := context.WithTimeout(ctx, s.r.callTimeout)
	id, err := s.r.client.Get(cctx, s.upKey(upstream, sessionID, upstreamTaskID)).Result()
	cancel()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, unavailable("find task", err)
	}
	return s.GetTask(ctx, id)
}

// ListTasks implements [TaskStore.ListTasks].
func (s *RedisTasks) ListTasks(ctx context.Context, p Principal, c TaskCursor, n int) ([]*Task, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.r.callTimeout)
	defer cancel()
	// Redis orders by score, then by member: the order of TaskCursor.
	members, err := s.r.client.ZRangeByScoreWithScores(ctx, s.sets(p)[0], &redis.ZRangeBy{
		Min: strconv.FormatInt(max(c.Expires, time.Now().UnixMilli()+1), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, false, unavailable("list tasks", err)
	}
	var ids []string
	more := false
	for _, z := range members {
		id, _ := z.Member.(string)
		if c.before(int64(z.Score), id) {
			continue
		}
		if len(ids) == n {
			more = true
			break
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, more, nil
	}
	cmds := make([]*redis.StringCmd, len(ids))
	_, err = s.r.client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = pl.Get(ctx, s.key(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, unavailable("list tasks", err)
	}
	out := make([]*Task, 0, len(ids))
	for _, cmd := range cmds {
		b, err := cmd.Bytes()
		if err != nil {
			continue // expired between the two reads
		}
		if t, err := decodeTask(b); err == nil && t.Principal == p {
			out = append(out, t)
		}
	}
	return out, more, nil
}

// UpdateTask implements [TaskStore.UpdateTask].
func (s *RedisTasks) UpdateTask(ctx context.Context, t *Task) error {
	cur, err := s.GetTask(ctx, t.ID)
	if err != nil {
		return err
	}
	cur.Input = t.Input // all a task record may change
	body, err := marshalCompact(cur)
	if err != nil {
		return fmt.Errorf("session: encoding task: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.r.callTimeout)
	defer cancel()
	n, err := redisTaskUpdate.Run(ctx, s.r.client, []string{s.key(t.ID)}, body).Int()
	switch {
	case redis.IsOOMError(err):
		return fmt.Errorf("%w: %w", ErrFull, err)
	case err != nil:
		return unavailable("update task", err)
	case n == 0:
		return ErrNotFound
	}
	return nil
}

// DeleteTask implements [TaskStore.DeleteTask].
func (s *RedisTasks) DeleteTask(ctx context.Context, id string) error {
	t, err := s.GetTask(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.r.callTimeout)
	defer cancel()
	sets := s.sets(t.Principal)
	_, err = s.r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.key(id))
		p.Del(ctx, s.upKey(t.Upstream, t.Session.SessionID, t.UpstreamTaskID))
		p.ZRem(ctx, sets[0], id)
		p.ZRem(ctx, sets[1], id)
		return nil
	})
	if err != nil {
		return unavailable("delete task", err)
	}
	return nil
}
