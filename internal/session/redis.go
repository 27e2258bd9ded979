package session

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/gateway/internal/config"
)

// Defaults [NewRedis] uses for zero fields of [config.Redis]; they match the
// config package's defaults, so a hand-built config behaves like a decoded one.
const (
	defaultRedisAddr      = "127.0.0.1:6379"
	defaultRedisKeyPrefix = "mcpgw:"
	defaultRedisTimeout   = 500 * time.Millisecond
)

// maxRedisPoolTimeout caps how long a call waits for a pooled connection when
// all are busy. Waiting longer than this means Redis (or this replica) is
// overloaded, and failing fast with ErrUnavailable is better than queueing.
const maxRedisPoolTimeout = 100 * time.Millisecond

// The key of a session and the fields of its hash; see [Redis].
const (
	redisKeyInfix   = "session:{"
	redisKeySuffix  = "}"
	redisFieldMeta  = "meta"
	redisFieldUp    = "up:"
	redisFieldUpSID = "sid:"
	// The fields naming the count sets a record is in, if any; see
	// "Per-principal and per-tenant bounds".
	redisFieldPrinSet   = "principal_set"
	redisFieldTenantSet = "tenant_set"
)

// The keys of the count sets; see "Per-principal and per-tenant bounds".
const (
	redisTenantInfix  = "tenant:{"
	redisTenantSuffix = "}"
	redisPrinInfix    = ":principal:"
)

// minRedisSetTTL is the least a count set lives after the last Create that
// touched it; see "Per-principal and per-tenant bounds".
const minRedisSetTTL = 24 * time.Hour

// pruneBatch is how many members of a full count set one round of Create
// checks for liveness, and maxPruneRounds how many rounds it takes at most
// before it refuses: 32 × 512 members covers any plausible bound.
const (
	pruneBatch     = 512
	maxPruneRounds = 32
)

// The keys of a mailbox and of a waiting Take's wake-up list; see
// "Mailboxes" in the Redis doc comment.
const (
	redisMailboxInfix  = "mbox:{"
	redisMailboxSuffix = "}"
	redisWakeInfix     = ":wake:"
	redisBytesSuffix   = ":bytes"
)

// RedisOptions configures a [Redis] store. The zero value is usable.
type RedisOptions struct {
	// IdleTTL is how long a record lives after it was created or last
	// returned by Get. If zero or negative, DefaultIdleTTL is used. It is
	// rounded up to whole milliseconds.
	IdleTTL time.Duration
	// Logger receives reports of records the store cannot decode. If nil,
	// the store does not log.
	Logger *slog.Logger
	// MaxPerPrincipal and MaxPerTenant bound the live records of one
	// Principal and of one Principal.Tenant, across every replica sharing
	// the Redis: Create fails with a *[LimitError] beyond them. Zero or
	// negative means no bound (and no count is kept).
	MaxPerPrincipal int
	MaxPerTenant    int
	// MailboxMessages and MailboxBytes bound what one mailbox holds: Post
	// fails with a *[LimitError] beyond them. If zero or negative,
	// DefaultMailboxMessages and DefaultMailboxBytes are used.
	MailboxMessages int
	MailboxBytes    int64
}

// Redis is a [Store] that keeps records in Redis, so that every replica of
// the gateway sees every session. One config serves a single server,
// Sentinel (MasterName set) and Cluster (several Addrs).
//
// # Layout
//
// Each session is one Redis hash at key <prefix>session:{<id>}:
//
//	meta        JSON of the Record without Upstreams
//	up:<name>   JSON of the Upstream entry for upstream <name>
//	sid:<name>  that entry's SessionID, as a plain string
//
// The braces are a Cluster hash tag: any key added for a session later (a
// lock, an event log) can be named <prefix>session:{<id>}:<what> and live in
// the same slot, so one script or transaction can touch them together. The
// key's expiry is the session's idle expiry: Create sets it to IdleTTL, Get
// resets it, and nothing else touches it (writing a hash field keeps the
// key's TTL).
//
// A hash rather than one JSON string per session, because it keeps JSON out
// of Lua. SetUpstream must be a compare-and-swap, so it runs as a script;
// with one JSON string the script would have to decode the record with cjson
// and re-encode it, and cjson does not round-trip arbitrary JSON (it turns {}
// into [], 12345678901234567890 into 1.2345678901235e+19). With a hash, the
// script compares one plain string field (sid:<name>) and writes two fields;
// the record's JSON is written and read only by encoding/json. sid:<name>
// duplicates up:<name>'s session_id; only the scripts write either, always
// together.
//
// The JSON in ClientInfo, ClientCapabilities and Upstream.Capabilities is
// stored verbatim except for insignificant whitespace, which is dropped:
// member order, number formatting, empty objects and arrays, escapes and
// non-ASCII text all come back byte for byte.
//
// # Round trips
//
// Every call is one round trip: Create and SetUpstream are one EVALSHA each
// (two round trips only the first time a Redis server sees the script, which
// then falls back to EVAL), Get is one MULTI/EXEC of PEXPIRE and HGETALL,
// Delete is one EVALSHA (DEL, returning the count sets named in the hash).
// With a per-principal or per-tenant bound, Create takes one more EVALSHA
// first (more when a set is full, see below), and Delete one ZREM
// pipeline after; Get and SetUpstream are unchanged.
//
// # LastSeen
//
// Get returns the time of the Get as LastSeen (the Get is what makes the
// session seen) but does not write it back: that would cost a write per
// request. The last_seen stored in meta is the time of the last write of
// meta, that is of Create; the key's remaining TTL is the authoritative
// idle expiry (last seen ≈ now - (IdleTTL - PTTL)).
//
// # Failures
//
// Every failure to talk to Redis is returned wrapped in [ErrUnavailable]
// (and also wraps the underlying error). No call takes longer than the
// config's Timeout plus a short wait for a pooled connection: commands are
// not retried, since retrying a Create or SetUpstream whose reply was lost
// would report ErrExists or ErrConflict for the caller's own write. A
// Create that Redis rejects for lack of memory (maxmemory with noeviction)
// fails with [ErrFull].
//
// Records expire in Redis; the store has no sweeper and no OnExpire hook.
// It uses no command newer than Redis 4.0, except that [Redis.Take] with a
// wait that is not a whole number of seconds needs Redis 6.0 (a fractional
// BLPOP timeout); it is tested with Redis 7.0.
//
// # Per-principal and per-tenant bounds
//
// With MaxPerTenant or MaxPerPrincipal set, each tenant has a sorted set at
// <prefix>tenant:{<t>} and each principal one at
// <prefix>tenant:{<t>}:principal:<p>, where <t> and <p> are the first 128
// bits of the SHA-256 of the tenant and of the principal, in hex (fixed
// length, and no brace a tenant name could bring in). Members are session
// ids, scored by when the session would expire if never used again (Unix
// ms). Both sets of a tenant share the hash tag {<t>}, so one script
// checks and updates both atomically, in Cluster too; a session key is in
// a slot of its own, so no script reads one beside a set.
//
// Create first runs a script on the sets: it counts the sets' members and,
// below both bounds, adds the id to them (setting the sets' expiry) before
// the record is written; a record that then cannot be written (ErrExists,
// a failure) is taken out again. A session is not told to the sets when it
// expires inside Redis, and a Get resets its expiry without touching the
// sets (that would cost the per-call path a write), so a member's score is
// only a lower bound of its expiry. When a set is full, the script returns
// the members whose score has passed; Create asks Redis for those
// sessions' PTTL (one pipeline) and runs the script again, telling it
// which are gone (it removes them, unless a Create re-added them since)
// and when the live ones now expire (it rescores them), up to
// maxPruneRounds times. So expired sessions never count against a bound,
// and a member is checked at most once per idle TTL of its session. A
// new member is scored a full idle TTL ahead, so another replica's pruning
// never takes it for gone before its record is written (replica clocks
// must agree to well within the idle TTL). Delete removes the id from the
// sets its hash names (fields principal_set and tenant_set).
//
// A set expires max(24h, IdleTTL) after the last Create that added to it,
// so the sets of principals that stopped coming do not stay for ever. A
// principal that keeps sessions alive by using them, and creates none for
// that long, has them counted no longer: the bound is exact against any
// caller who creates sessions faster than once a day. Changing the bounds
// from zero to non-zero leaves the sessions created before uncounted until
// they expire.
//
// # Mailboxes
//
// Redis is also a [Mailbox]. The mailbox under key is a list at
// <prefix>mbox:{<key>}, and the bytes of its messages a counter at
// <prefix>mbox:{<key>}:bytes, in the same slot. Post is one script that
// checks LLEN against MailboxMessages and the counter plus the message
// against MailboxBytes, then RPUSHes, adds to the counter and sets both
// keys' expiry; it refuses with a *[LimitError] and changes nothing when
// the message would not fit. Take is one BLPOP (a script of LPOP and the
// counter's decrement for a zero wait); a Take whose BLPOP popped a
// message decrements the counter in a second round trip, since a blocking
// pop cannot run inside a script. Between the pop and that decrement the
// counter counts the message still, so it never counts fewer bytes than
// the list holds; should the decrement be lost (Redis failing just then),
// it counts more until the mailbox expires, which only refuses Posts
// early. (A counter is exact where summing the messages in Lua on each
// Post would copy up to MailboxBytes each time.) The number of mailboxes
// is bounded by Redis's maxmemory (Post fails with ErrFull when Redis is
// out of memory) and by the gateway, which posts only for requests it
// sent. Mailbox keys cannot collide with session keys: they start with
// "mbox:" where those start with "session:".
//
// A Take's BLPOP parks a connection for up to its wait, so Takes use a pool
// of connections of their own, of go-redis's default size (10 per
// GOMAXPROCS): waiting Takes never starve session calls, and a Take that
// finds every connection of that pool busy fails with ErrUnavailable after
// the pool wait. Those connections have no read timeout: the BLPOP's own
// timeout (the wait, rounded up to a millisecond) ends it, and a deadline of
// the wait plus the config's Timeout bounds it in case Redis stops
// answering. (go-redis would otherwise apply the config's Timeout as the
// read timeout of a BLPOP sent as a plain command; its BLPop method does
// not, but rounds the wait to whole seconds.)
//
// go-redis does not interrupt a command in flight when its context is
// cancelled, and a connection closed under a BLPOP could lose a message
// Redis popped just before. So a Take blocks on two lists, the mailbox and
// a wake-up list of its own at <prefix>mbox:{<key>}:wake:<random id>, and
// ctx cancellation pushes to the wake-up list, which ends the BLPOP at once;
// Redis pops from the mailbox first, so no message is lost. The braces keep
// both lists in one Cluster slot. If the BLPOP ends by itself as ctx ends,
// the Take deletes the wake-up list it no longer needs (and should that
// fail, the list expires when the BLPOP would have timed out). A Take costs
// two more round trips only when its ctx ends during the wait.
type Redis struct {
	client redis.UniversalClient
	// blocking runs the BLPOPs of Takes; see "Mailboxes".
	blocking    redis.UniversalClient
	prefix      string
	ttl         time.Duration
	setTTL      time.Duration
	callTimeout time.Duration
	logger      *slog.Logger

	maxPrin, maxTenant int
	boxMsgs            int
	boxBytes           int64

	closeOnce sync.Once
	closeErr  error
}

var (
	_ Store   = (*Redis)(nil)
	_ Mailbox = (*Redis)(nil)
)

// Scripts. KEYS[1] is always the session's key. A script only ever returns
// values from Redis as they are; it never decodes or encodes JSON.
var (
	// redisCreate writes the record's fields and its expiry unless the key
	// exists. ARGV: idle TTL in ms, then field, value pairs. Returns 1 if it
	// created the record, 0 if the key exists.
	redisCreate = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
	return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`)

	// redisReserve counts a new session against the count sets of its
	// principal (KEYS[1]) and tenant (KEYS[2]); see "Per-principal and
	// per-tenant bounds". ARGV: id, score, now (both Unix ms), set TTL in
	// ms, principal bound, tenant bound (0: that set is not kept), the
	// number of ids found gone, those ids, then id, score pairs of live
	// sessions to rescore. A member found gone is removed only if its score
	// has passed: a Create may have re-added it since. Returns {0, added to
	// principal set, added to tenant set} (1 or 0 each: an id already a
	// member is not counted twice) or, over a bound, {1 (principal) or 2
	// (tenant), members of that set whose score has passed}.
	redisReserve = redis.NewScript(`
local now = tonumber(ARGV[3])
local caps = {tonumber(ARGV[5]), tonumber(ARGV[6])}
local i = 8
for j = 1, tonumber(ARGV[7]) do
	for k = 1, 2 do
		local s = redis.call('ZSCORE', KEYS[k], ARGV[i])
		if s and tonumber(s) <= now then
			redis.call('ZREM', KEYS[k], ARGV[i])
		end
	end
	i = i + 1
end
while i < #ARGV do
	for k = 1, 2 do
		local s = redis.call('ZSCORE', KEYS[k], ARGV[i])
		if s and tonumber(s) <= now then
			redis.call('ZADD', KEYS[k], ARGV[i + 1], ARGV[i])
		end
	end
	i = i + 2
end
local member = {false, false}
for k = 1, 2 do
	if caps[k] > 0 then
		member[k] = redis.call('ZSCORE', KEYS[k], ARGV[1])
		if not member[k] and redis.call('ZCARD', KEYS[k]) >= caps[k] then
			return {k, redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', now, 'LIMIT', 0, ` + strconv.Itoa(pruneBatch) + `)}
		end
	end
end
local added = {0, 0}
for k = 1, 2 do
	if caps[k] > 0 then
		added[k] = redis.call('ZADD', KEYS[k], ARGV[2], ARGV[1])
		redis.call('PEXPIRE', KEYS[k], ARGV[4])
	end
end
return {0, added[1], added[2]}
`)

	// redisDelete deletes a session and returns the count sets its hash
	// names ({principal set or false, tenant set or false}).
	redisDelete = redis.NewScript(`
local sets = redis.call('HMGET', KEYS[1], '` + redisFieldPrinSet + `', '` + redisFieldTenantSet + `')
redis.call('DEL', KEYS[1])
return sets
`)

	// redisPost appends ARGV[1] to the mailbox list KEYS[1] and counts its
	// bytes in KEYS[2], unless that would take the list past ARGV[3]
	// messages (returns -1) or ARGV[4] bytes (returns -2); then sets both
	// keys' expiry to ARGV[2] ms and returns 1.
	redisPost = redis.NewScript(`
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[3]) then
	return -1
end
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
if used + #ARGV[1] > tonumber(ARGV[4]) then
	return -2
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('INCRBY', KEYS[2], #ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
`)

	// redisTakeNow pops the oldest message of the mailbox list KEYS[1] and
	// takes its bytes off the counter KEYS[2]; nil if there is none.
	redisTakeNow = redis.NewScript(`
local m = redis.call('LPOP', KEYS[1])
if not m then
	return false
end
if redis.call('DECRBY', KEYS[2], #m) <= 0 then
	redis.call('DEL', KEYS[2])
end
return m
`)

	// redisTook takes ARGV[1] bytes, popped by a BLPOP, off the mailbox
	// counter KEYS[1]. A counter at zero or below is deleted: it counts no
	// message (below zero only if it expired meanwhile).
	redisTook = redis.NewScript(`
if redis.call('DECRBY', KEYS[1], ARGV[1]) <= 0 then
	redis.call('DEL', KEYS[1])
end
return 1
`)

	// redisSetUpstream is the compare-and-swap of one upstream entry. ARGV:
	// up:<name> field, sid:<name> field, prev, new session id, new entry.
	// Returns nil if the key does not exist, {1} if it wrote the entry, and
	// {0, current entry or ""} if the stored session id is not prev.
	redisSetUpstream = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
	return false
end
local cur = redis.call('HGET', KEYS[1], ARGV[2]) or ''
if cur ~= ARGV[3] then
	return {0, redis.call('HGET', KEYS[1], ARGV[1]) or ''}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[5], ARGV[2], ARGV[4])
return {1}
`)
)

// NewRedis returns a Redis store for cfg. It does not connect: connections
// are made on first use, so a gateway starts while Redis is down and
// [Redis.Ping] reports when it is up. Zero fields of cfg take the config
// defaults (127.0.0.1:6379, key prefix "mcpgw:", timeout 500ms).
func NewRedis(cfg config.Redis, opts RedisOptions) (*Redis, error) {
	uo, prefix, timeout, err := redisOptions(cfg)
	if err != nil {
		return nil, err
	}
	ttl := opts.IdleTTL
	if ttl <= 0 {
		ttl = DefaultIdleTTL
	}
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond) // PEXPIRE's unit
	poolTimeout := uo.PoolTimeout
	// See "Mailboxes" in the Redis doc comment. -1 means no read timeout;
	// with ContextTimeoutEnabled, each Take's context deadline applies.
	blocking := *uo
	blocking.ReadTimeout = -1
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Redis{
		client:      redis.NewUniversalClient(uo),
		blocking:    redis.NewUniversalClient(&blocking),
		prefix:      prefix,
		ttl:         ttl,
		setTTL:      max(ttl, minRedisSetTTL),
		callTimeout: timeout + poolTimeout,
		logger:      logger,
		maxPrin:     max(opts.MaxPerPrincipal, 0),
		maxTenant:   max(opts.MaxPerTenant, 0),
		boxMsgs:     opts.MailboxMessages,
		boxBytes:    opts.MailboxBytes,
	}
	if r.boxMsgs <= 0 {
		r.boxMsgs = DefaultMailboxMessages
	}
	if r.boxBytes <= 0 {
		r.boxBytes = DefaultMailboxBytes
	}
	return r, nil
}

// A RedisClient is a client of a Redis that the gateway keeps other state
// in than sessions (budgets), made from the same settings as the store's.
type RedisClient struct {
	Client redis.UniversalClient
	// Prefix prefixes every key.
	Prefix string
	// CallTimeout bounds one call.
	CallTimeout time.Duration
}

// NewRedisClient returns a client for cfg, with the store's defaults and
// failure behaviour (see [NewRedis]). It does not connect.
func NewRedisClient(cfg config.Redis) (*RedisClient, error) {
	uo, prefix, timeout, err := redisOptions(cfg)
	if err != nil {
		return nil, err
	}
	return &RedisClient{Client: redis.NewUniversalClient(uo), Prefix: prefix, CallTimeout: timeout + uo.PoolTimeout}, nil
}

// redisOptions returns the client options of cfg, its key prefix and its
// timeout. Zero fields of cfg take the config defaults.
func redisOptions(cfg config.Redis) (*redis.UniversalOptions, string, time.Duration, error) {
	addrs := cfg.Addrs
	if len(addrs) == 0 {
		addrs = []string{defaultRedisAddr}
	}
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = defaultRedisKeyPrefix
	}
	// A brace in the prefix would become the key's Cluster hash tag, putting
	// every session in one slot.
	if strings.ContainsAny(prefix, "{}") {
		return nil, "", 0, fmt.Errorf("session: redis key prefix %q: must not contain '{' or '}'", prefix)
	}
	timeout := cfg.Timeout.D()
	switch {
	case timeout < 0:
		return nil, "", 0, fmt.Errorf("session: redis timeout %v: must not be negative", timeout)
	case timeout == 0:
		timeout = defaultRedisTimeout
	}
	poolTimeout := min(timeout, maxRedisPoolTimeout)
	uo := &redis.UniversalOptions{
		Addrs:      addrs,
		MasterName: cfg.MasterName,
		Username:   cfg.Username,
		Password:   cfg.Password,
		DB:         cfg.DB,
		// See "Failures" in the Redis doc comment.
		MaxRetries:    -1,
		DialerRetries: 1,
		DialTimeout:   timeout,
		ReadTimeout:   timeout,
		WriteTimeout:  timeout,
		PoolTimeout:   poolTimeout,
		// Let each call's deadline (callTimeout) bound dial, pool wait and
		// I/O together.
		ContextTimeoutEnabled: true,
	}
	if cfg.TLS {
		// ServerName is left empty: crypto/tls takes it from the address
		// dialed, which for Sentinel and Cluster is the node's, not a seed's.
		uo.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return uo, prefix, timeout, nil
}

// Close closes the connections to Redis. Calls after Close fail with
// ErrUnavailable. Close may be called more than once; later calls return
// what the first returned.
func (r *Redis) Close() error {
	r.closeOnce.Do(func() { r.closeErr = errors.Join(r.client.Close(), r.blocking.Close()) })
	return r.closeErr
}

// Client returns the Redis client, for other state the gateway keeps in
// the same Redis (budgets), its keys under [Redis.KeyPrefix], each call
// bounded by [Redis.CallTimeout].
func (r *Redis) Client() redis.UniversalClient { return r.client }

// KeyPrefix returns the prefix of every key the gateway writes.
func (r *Redis) KeyPrefix() string { return r.prefix }

// CallTimeout returns the bound of one call to Redis.
func (r *Redis) CallTimeout() time.Duration { return r.callTimeout }

// Ping reports whether Redis answers, for readiness checks. Its error wraps
// ErrUnavailable.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// Create implements [Store.Create].
func (r *Redis) Create(ctx context.Context, rec *Record) error {
	if rec == nil || rec.ID == "" {
		return errors.New("session: record has no id")
	}
	now := time.Now()
	meta := *rec
	meta.Upstreams = nil
	if meta.Created.IsZero() {
		meta.Created = now
	}
	meta.LastSeen = now
	metaJSON, err := marshalCompact(&meta)
	if err != nil {
		return fmt.Errorf("session: encoding record: %w", err)
	}
	args := make([]any, 0, 7+4*len(rec.Upstreams))
	args = append(args, r.ttl.Milliseconds(), redisFieldMeta, metaJSON)
	for name, u := range rec.Upstreams {
		up, err := marshalCompact(&u)
		if err != nil {
			return fmt.Errorf("session: encoding upstream %q: %w", name, err)
		}
		args = append(args, redisFieldUp+name, up, redisFieldUpSID+name, u.SessionID)
	}

	var res *reservation
	if r.maxPrin > 0 || r.maxTenant > 0 {
		res, err = r.reserve(ctx, rec.ID, rec.Principal, now)
		if err != nil {
			return err
		}
		if r.maxPrin > 0 {
			args = append(args, redisFieldPrinSet, res.keys[0])
		}
		if r.maxTenant > 0 {
			args = append(args, redisFieldTenantSet, res.keys[1])
		}
	}

	cctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	defer cancel()
	created, err := redisCreate.Run(cctx, r.client, []string{r.key(rec.ID)}, args...).Int()
	switch {
	case redis.IsOOMError(err):
		err = fmt.Errorf("%w: %w", ErrFull, err)
	case err != nil:
		err = unavailable("create", err)
	case created == 0:
		err = ErrExists
	}
	if err != nil && res != nil {
		r.unreserve(ctx, rec.ID, res)
	}
	return err
}

// Get implements [Store.Get]. The returned LastSeen is the time of the call.
func (r *Redis) Get(ctx context.Context, id string) (*Record, error) {
	key := r.key(id)
	ctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	defer cancel()
	var fields *redis.MapStringStringCmd
	// PEXPIRE first: if the key is gone, it is a no-op and HGETALL finds
	// nothing. MULTI/EXEC makes the pair atomic, still in one round trip.
	_, err := r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.PExpire(ctx, key, r.ttl)
		fields = p.HGetAll(ctx, key)
		return nil
	})
	if err != nil {
		return nil, unavailable("get", err)
	}
	m := fields.Val()
	if len(m) == 0 {
		return nil, ErrNotFound
	}
	rec, err := decodeRecord(m)
	if err != nil {
		r.logger.ErrorContext(ctx, "undecodable session record in redis",
			slog.String("session_id", id), slog.String("error", err.Error()))
		return nil, fmt.Errorf("session: decoding record from redis: %w", err)
	}
	rec.LastSeen = time.Now()
	return rec, nil
}

// SetUpstream implements [Store.SetUpstream].
func (r *Redis) SetUpstream(ctx context.Context, id, name, prev string, u Upstream) (Upstream, error) {
	entry, err := marshalCompact(&u)
	if err != nil {
		return Upstream{}, fmt.Errorf("session: encoding upstream %q: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	defer cancel()
	res, err := redisSetUpstream.Run(ctx, r.client, []string{r.key(id)},
		redisFieldUp+name, redisFieldUpSID+name, prev, u.SessionID, entry).Slice()
	switch {
	case errors.Is(err, redis.Nil):
		return Upstream{}, ErrNotFound
	case err != nil:
		return Upstream{}, unavailable("set upstream", err)
	}
	if len(res) == 0 {
		return Upstream{}, fmt.Errorf("session: set upstream: unexpected reply %v from redis", res)
	}
	if won, _ := res[0].(int64); won == 1 {
		return cloneUpstream(u), nil
	}
	var cur Upstream
	if len(res) > 1 {
		s, _ := res[1].(string)
		if s != "" {
			if err := json.Unmarshal([]byte(s), &cur); err != nil {
				r.logger.ErrorContext(ctx, "undecodable upstream entry in redis",
					slog.String("session_id", id), slog.String("upstream", name), slog.String("error", err.Error()))
				return Upstream{}, fmt.Errorf("session: decoding upstream %q from redis: %w", name, err)
			}
		}
	}
	return cur, ErrConflict
}

// Delete implements [Store.Delete].
func (r *Redis) Delete(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	defer cancel()
	sets, err := redisDelete.Run(ctx, r.client, []string{r.key(id)}).Slice()
	if err != nil {
		return unavailable("delete", err)
	}
	var keys []string
	for _, v := range sets {
		if k, ok := v.(string); ok && k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	// Both sets share a slot, so this is one round trip in Cluster too.
	_, err = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.ZRem(ctx, k, id)
		}
		return nil
	})
	if err != nil {
		// The record is gone; the sets count it until a full set's check
		// finds it so.
		r.logger.WarnContext(ctx, "cannot uncount a deleted session; it counts until it would have expired",
			slog.String("error", err.Error()))
	}
	return nil
}

// key returns the Redis key of session id.
func (r *Redis) key(id string) string {
	return r.prefix + redisKeyInfix + id + redisKeySuffix
}

// decodeRecord rebuilds a record from its hash fields.
func decodeRecord(fields map[string]string) (*Record, error) {
	meta, ok := fields[redisFieldMeta]
	if !ok {
		return nil, fmt.Errorf("no %q field", redisFieldMeta)
	}
	var rec Record
	if err := json.Unmarshal([]byte(meta), &rec); err != nil {
		return nil, fmt.Errorf("field %q: %w", redisFieldMeta, err)
	}
	rec.Upstreams = nil
	for f, v := range fields {
		name, ok := strings.CutPrefix(f, redisFieldUp)
		if !ok {
			continue
		}
		var u Upstream
		if err := json.Unmarshal([]byte(v), &u); err != nil {
			return nil, fmt.Errorf("field %q: %w", f, err)
		}
		if rec.Upstreams == nil {
			rec.Upstreams = make(map[string]Upstream)
		}
		rec.Upstreams[name] = u
	}
	return &rec, nil
}

// marshalCompact is json.Marshal without HTML escaping, so that the raw JSON
// in a record (client info, capabilities) is stored as it came, except for
// whitespace: json.Marshal would turn "<", ">", "&", U+2028 and U+2029 in
// its strings into \u escapes.
func marshalCompact(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// unavailable wraps a Redis failure in ErrUnavailable, keeping err in the
// chain too (for context.Canceled and the like).
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: redis %s: %w", ErrUnavailable, op, err)
}
