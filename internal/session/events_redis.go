package session

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisEvents is an [EventLog] in the Redis of a [Redis] store, so that a
// stream logged on one replica is resumed on any other.
//
// # Layout
//
// A stream's log is a Redis Stream at <prefix>session:{<sid>}:ev:<stream>,
// one entry per event (field d: the message; f: "1" on the final event),
// and beside it a hash at the same key plus ":m" holding the bytes of the
// entries (n) and the id of the last entry dropped to keep the bounds (t).
// A session's streams are listed, oldest first, at
// <prefix>session:{<sid>}:evs. The braces put all of a session's keys in
// its record's Cluster slot, so each operation is one script. A cursor is
// the entry's Redis id.
//
// # Bounds
//
// Append is one script: it drops the oldest entries while the log holds
// EventsPerStream (so that XADD's MAXLEN cap, passed as well, never trims
// entries whose bytes the hash still counts), adds the entry, then drops
// the oldest while the bytes counted pass BytesPerStream (an entry larger
// than that drops itself too), and sets the expiry of the log, its hash
// and the session's list to TTL. An Append to a log that expired or was
// dropped adds nothing. Open drops the session's oldest logs beyond
// StreamsPerSession. A session's logs are bounded, sessions are bounded
// per principal (sessions.max_per_principal), and all of it by Redis's
// maxmemory: an Open or Append that Redis refuses for lack of memory
// fails with ErrFull. So one principal's logs hold at most
// max_per_principal × StreamsPerSession × BytesPerStream. There are no
// shares of a pool here as in [MemoryEvents]: Redis has no pool but its
// maxmemory, and counting a principal's or a tenant's bytes would take,
// with every event, a write to a key outside the session's Cluster slot.
//
// # Reads
//
// Read is one script that tells an unknown cursor (no log, or an id the
// log never held) from one whose successors were dropped (an id at or
// before the last dropped one), and returns the entries after the
// cursor. With nothing yet to return and a wait, it then blocks in XREAD
// on a pool of blocking connections of its own, made like the store's
// pool for mailbox Takes (see "Mailboxes" in the Redis doc comment), so
// that streams that follow a call never starve those Takes; it returns as
// soon as an entry is added. Call [RedisEvents.Close] to close that pool.
type RedisEvents struct {
	r        *Redis
	lim      EventLimits
	blocking redis.UniversalClient
}

var _ EventLog = (*RedisEvents)(nil)

// NewRedisEvents returns the event log kept in r's Redis, with limits lim
// (MaxStreams and MaxBytes do not apply: Redis's maxmemory does).
func NewRedisEvents(r *Redis, lim EventLimits) *RedisEvents {
	return &RedisEvents{r: r, lim: lim.withDefaults(), blocking: cloneClient(r.blocking)}
}

// Close closes the log's own connections (not the store's).
func (e *RedisEvents) Close() error {
	if e.blocking == e.r.blocking {
		return nil
	}
	return e.blocking.Close()
}

// cloneClient returns a new client with c's options, or c itself for a
// kind of client it does not know.
func cloneClient(c redis.UniversalClient) redis.UniversalClient {
	switch c := c.(type) {
	case *redis.Client:
		o := *c.Options()
		return redis.NewClient(&o)
	case *redis.ClusterClient:
		o := *c.Options()
		return redis.NewClusterClient(&o)
	}
	return c
}

var (
	// redisEventsOpen starts a log. KEYS: the session's list, the log, its
	// hash. ARGV: stream, ttl ms, streams per session, maxlen, the log key
	// of the session's streams without the stream (to drop the oldest),
	// owner ("" for none), lease end (Unix ms).
	redisEventsOpen = redis.NewScript(`
redis.call('DEL', KEYS[2], KEYS[3])
local id = redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[4], '*', 'd', '')
redis.call('HSET', KEYS[3], 'n', 0)
if ARGV[6] ~= '' then
	redis.call('HSET', KEYS[3], 'o', ARGV[6], 'a', ARGV[7])
end
redis.call('LREM', KEYS[1], 0, ARGV[1])
redis.call('RPUSH', KEYS[1], ARGV[1])
while redis.call('LLEN', KEYS[1]) > tonumber(ARGV[3]) do
	local old = redis.call('LPOP', KEYS[1])
	redis.call('DEL', ARGV[5] .. old, ARGV[5] .. old .. ':m')
end
for i = 1, 3 do
	redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return id
`)

	// redisEventsAppend adds an event. KEYS: the log, its hash, the
	// session's list. ARGV: data, final ("1" or "0"), maxlen, max bytes,
	// ttl ms, lease end (Unix ms). Returns the entry's id, or nil if the
	// log does not exist.
	redisEventsAppend = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
	return false
end
if redis.call('HEXISTS', KEYS[2], 'o') == 1 then
	redis.call('HSET', KEYS[2], 'a', ARGV[6])
end
local function drop()
	local e = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
	if #e == 0 then
		return false
	end
	local f, n = e[1][2], 0
	for i = 1, #f, 2 do
		if f[i] == 'd' then
			n = #f[i + 1]
		end
	end
	redis.call('XDEL', KEYS[1], e[1][1])
	if n > 0 then
		redis.call('HINCRBY', KEYS[2], 'n', -n) -- Redis refuses "-0"
	end
	redis.call('HSET', KEYS[2], 't', e[1][1])
	return true
end
while redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[3]) do
	if not drop() then
		break
	end
end
local id
if ARGV[2] == '1' then
	id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[3], '*', 'd', ARGV[1], 'f', '1')
else
	id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[3], '*', 'd', ARGV[1])
end
local used = redis.call('HINCRBY', KEYS[2], 'n', #ARGV[1])
while used > tonumber(ARGV[4]) do
	if not drop() then
		break
	end
	used = tonumber(redis.call('HGET', KEYS[2], 'n'))
end
for i = 1, 3 do
	redis.call('PEXPIRE', KEYS[i], ARGV[5])
end
return id
`)

	// redisEventsTouch keeps a log: it renews a call's lease and the
	// log's expiry. KEYS: the log, its hash, the session's list. ARGV:
	// lease end (Unix ms), ttl ms.
	redisEventsTouch = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
	return 0
end
if redis.call('HEXISTS', KEYS[2], 'o') == 1 then
	redis.call('HSET', KEYS[2], 'a', ARGV[1])
end
for i = 1, 3 do
	redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
`)

	// redisEventsEnd drops a session's logs. KEYS: the session's list.
	// ARGV: the log key of the session's streams without the stream.
	redisEventsEnd = redis.NewScript(`
for _, s in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
	redis.call('DEL', ARGV[1] .. s, ARGV[1] .. s .. ':m')
end
redis.call('DEL', KEYS[1])
return 1
`)

	// redisEventsRead reads after a cursor. KEYS: the log, its hash.
	// ARGV: cursor, count, now (Unix ms). Returns {0} for an unknown
	// cursor, {1} when entries after it were dropped, {3, owner} when
	// there is nothing after it and the call's writer is lost, {2,
	// entries} otherwise.
	redisEventsRead = redis.NewScript(`
local function before(a, b)
	local am, as = string.match(a, '^(%d+)-(%d+)$')
	local bm, bs = string.match(b, '^(%d+)-(%d+)$')
	am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
	return am < bm or (am == bm and as <= bs)
end
if redis.call('EXISTS', KEYS[1]) == 0 then
	return {0}
end
if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 0 then
	local t = redis.call('HGET', KEYS[2], 't')
	if not t then
		return {0}
	end
	if t ~= ARGV[1] then
		if before(ARGV[1], t) then
			return {1}
		end
		return {0}
	end
end
local r = redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', tonumber(ARGV[2]) + 1)
if #r > 0 and r[1][1] == ARGV[1] then
	table.remove(r, 1)
end
if #r == 0 then
	local lease = redis.call('HMGET', KEYS[2], 'o', 'a')
	if lease[1] and tonumber(lease[2]) < tonumber(ARGV[3]) then
		local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
		local final = false
		if #last > 0 then
			local f = last[1][2]
			for i = 1, #f, 2 do
				if f[i] == 'f' then
					final = true
				end
			end
		end
		if not final then
			return {3, lease[1]}
		end
	end
end
return {2, r}
`)
)

// redisStreamID matches a Redis stream entry id.
var redisStreamID = regexp.MustCompile(`^[0-9]{1,20}-[0-9]{1,20}$`)

func (e *RedisEvents) logKey(sid, stream string) string {
	return e.r.key(sid) + ":ev:" + stream
}

// Open implements [EventLog.Open]. who is not used: a Redis log is
// bounded per session, and all of them by Redis's maxmemory (see
// "Bounds").
func (e *RedisEvents) Open(ctx context.Context, who Principal, sid, stream string, owner []byte) (string, error) {
	if err := checkEventStream(sid, stream); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, e.r.callTimeout)
	defer cancel()
	k := e.logKey(sid, stream)
	id, err := redisEventsOpen.Run(ctx, e.r.client, []string{e.r.key(sid) + ":evs", k, k + ":m"},
		stream, e.lim.TTL.Milliseconds(), e.lim.StreamsPerSession, e.lim.EventsPerStream, e.r.key(sid)+":ev:",
		owner, e.leaseEnd()).Text()
	switch {
	case redis.IsOOMError(err):
		return "", fmt.Errorf("%w: %w", ErrFull, err)
	case err != nil:
		return "", unavailable("open event log", err)
	}
	return id, nil
}

// Append implements [EventLog.Append].
func (e *RedisEvents) Append(ctx context.Context, sid, stream string, data []byte, final bool) (string, error) {
	if err := checkEventStream(sid, stream); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, e.r.callTimeout)
	defer cancel()
	k := e.logKey(sid, stream)
	f := "0"
	if final {
		f = "1"
	}
	id, err := redisEventsAppend.Run(ctx, e.r.client, []string{k, k + ":m", e.r.key(sid) + ":evs"},
		data, f, e.lim.EventsPerStream, e.lim.BytesPerStream, e.lim.TTL.Milliseconds(), e.leaseEnd()).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return "", ErrNotFound
	case redis.IsOOMError(err):
		return "", fmt.Errorf("%w: %w", ErrFull, err)
	case err != nil:
		return "", unavailable("append event", err)
	}
	return id, nil
}

// End implements [EventLog.End].
func (e *RedisEvents) End(ctx context.Context, sid string) error {
	if err := checkEventStream(sid, "x"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.r.callTimeout)
	defer cancel()
	if err := redisEventsEnd.Run(ctx, e.r.client, []string{e.r.key(sid) + ":evs"}, e.r.key(sid)+":ev:").Err(); err != nil {
		return unavailable("end event logs", err)
	}
	return nil
}

// Touch implements [EventLog.Touch].
func (e *RedisEvents) Touch(ctx context.Context, sid, stream string) error {
	if err := checkEventStream(sid, stream); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.r.callTimeout)
	defer cancel()
	k := e.logKey(sid, stream)
	if err := redisEventsTouch.Run(ctx, e.r.client, []string{k, k + ":m", e.r.key(sid) + ":evs"}, e.leaseEnd(), e.lim.TTL.Milliseconds()).Err(); err != nil {
		return unavailable("touch event log", err)
	}
	return nil
}

// leaseEnd is when a lease renewed now ends, in Unix ms.
func (e *RedisEvents) leaseEnd() int64 { return time.Now().Add(e.lim.Lease).UnixMilli() }

// Read implements [EventLog.Read]. A wait is rounded up to whole
// milliseconds.
func (e *RedisEvents) Read(ctx context.Context, sid, stream, after string, wait time.Duration) ([]Event, error) {
	if checkEventStream(sid, stream) != nil || !redisStreamID.MatchString(after) {
		return nil, ErrNotFound
	}
	k := e.logKey(sid, stream)
	evs, err := e.readNow(ctx, k, after)
	if err != nil || len(evs) > 0 || wait <= 0 {
		return evs, err
	}
	wait = ceilMillis(wait)
	bctx, cancel := context.WithTimeout(ctx, wait+e.r.callTimeout)
	defer cancel()
	res, err := e.blocking.XRead(bctx, &redis.XReadArgs{Streams: []string{k, after}, Count: maxEventsPerRead, Block: wait}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, unavailable("read events", err)
	}
	for _, s := range res {
		for _, m := range s.Messages {
			evs = append(evs, redisEvent(m.ID, m.Values))
		}
	}
	return evs, nil
}

// readNow is Read without a wait.
func (e *RedisEvents) readNow(ctx context.Context, k, after string) ([]Event, error) {
	ctx, cancel := context.WithTimeout(ctx, e.r.callTimeout)
	defer cancel()
	res, err := redisEventsRead.Run(ctx, e.r.client, []string{k, k + ":m"}, after, maxEventsPerRead, time.Now().UnixMilli()).Slice()
	if err != nil {
		return nil, unavailable("read events", err)
	}
	code, _ := res[0].(int64)
	switch code {
	case 0:
		return nil, ErrNotFound
	case 1:
		return nil, ErrEventsGone
	case 3:
		owner, _ := res[1].(string)
		return []Event{{Final: true, Lost: true, Data: []byte(owner)}}, nil
	}
	entries, _ := res[1].([]any)
	evs := make([]Event, 0, len(entries))
	for _, en := range entries {
		pair, _ := en.([]any)
		if len(pair) != 2 {
			return nil, fmt.Errorf("session: read events: unexpected entry %v from redis", en)
		}
		id, _ := pair[0].(string)
		fields, _ := pair[1].([]any)
		values := make(map[string]any, len(fields)/2)
		for i := 0; i+1 < len(fields); i += 2 {
			if f, ok := fields[i].(string); ok {
				values[f] = fields[i+1]
			}
		}
		evs = append(evs, redisEvent(id, values))
	}
	return evs, nil
}

// redisEvent makes an Event of a stream entry's id and fields.
func redisEvent(id string, values map[string]any) Event {
	d, _ := values["d"].(string)
	f, _ := values["f"].(string)
	return Event{Cursor: id, Data: []byte(d), Final: f == "1"}
}
