package vault

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a [Store] in Redis, shared by every replica: the session
// store's client and key prefix (session.Redis.Client, KeyPrefix).
//
// Keys, all under the Cluster hash tag {vault}, so that one script can
// touch several:
//
//	<prefix>vault:{vault}:tok:<key hash>   a token's record
//	<prefix>vault:{vault}:tenant:<hash>    set: the tenant's token hashes
//	<prefix>vault:{vault}:all              set: every token hash
//	<prefix>vault:{vault}:p:<id>           a pending consent: "<principal hash>|<sealed>", PX its life
//	<prefix>vault:{vault}:pp:<principal>   zset: the principal's pending ids by expiry (ms)
//	<prefix>vault:{vault}:pt:<tenant hash> zset: the tenant's pending ids by expiry (ms)
//	<prefix>vault:{vault}:pall             zset: every pending id by expiry (ms)
//	<prefix>vault:{vault}:pmeta            hash: pending id → "<principal hash>|<tenant hash>"
//	<prefix>vault:{vault}:ptc              zset: tenant hash → how many it has pending
//
// The pending consents' lists are kept by the scripts: what expires is
// dropped from every one by the next PutPending (a bounded number at a
// time), and the oldest is what goes first anyway.
type Redis struct {
	c       redis.UniversalClient
	base    string // <prefix>vault:{vault}:
	timeout time.Duration
	lim     atomic.Pointer[Limits]
	now     func() time.Time
}

// NewRedis returns a store on client c, its keys under prefix, each call
// bounded by timeout, bounded by lim.
func NewRedis(c redis.UniversalClient, prefix string, timeout time.Duration, lim Limits) *Redis {
	if timeout <= 0 {
		timeout = time.Second
	}
	r := &Redis{c: c, base: prefix + "vault:{vault}:", timeout: timeout, now: time.Now}
	r.SetLimits(lim)
	return r
}

// SetLimits replaces the bounds: what is over a new bound stays until it
// goes.
func (r *Redis) SetLimits(lim Limits) { r.lim.Store(&lim) }

func (r *Redis) tok(k Key) string          { return r.base + "tok:" + k.id() }
func (r *Redis) tenantSet(t string) string { return r.base + "tenant:" + hashOf(t) }

func (r *Redis) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.timeout)
}

var putToken = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[3]) or redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[4]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
return 1`)

func (r *Redis) GetToken(ctx context.Context, k Key) ([]byte, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	b, err := r.c.Get(ctx, r.tok(k)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return b, err
}

func (r *Redis) PutToken(ctx context.Context, k Key, rec []byte) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	n, err := putToken.Run(ctx, r.c, []string{r.tok(k), r.tenantSet(k.Tenant), r.base + "all"},
		k.id(), rec, r.lim.Load().TokensPerTenant, r.lim.Load().Tokens).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrFull
	}
	return nil
}

var deleteToken = redis.NewScript(`
local n = redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
return n`)

func (r *Redis) DeleteToken(ctx context.Context, k Key) (bool, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	n, err := deleteToken.Run(ctx, r.c, []string{r.tok(k), r.tenantSet(k.Tenant), r.base + "all"}, k.id()).Int()
	return n > 0, err
}

// Tokens returns the records of f's tenant (of every tenant without one);
// the Vault filters the rest.
func (r *Redis) Tokens(ctx context.Context, f Filter) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*r.timeout)
	defer cancel()
	set := r.base + "all"
	if f.Tenant != "" {
		set = r.tenantSet(f.Tenant)
	}
	ids, err := r.c.SMembers(ctx, set).Result()
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for len(ids) > 0 {
		n := min(len(ids), 500)
		keys := make([]string, n)
		for i, id := range ids[:n] {
			keys[i] = r.base + "tok:" + id
		}
		ids = ids[n:]
		vals, err := r.c.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			if s, ok := v.(string); ok {
				out = append(out, []byte(s))
			}
		}
	}
	return out, nil
}

// dropPending is the scripts' function that removes pending consent id
// from every key that lists it; base is ARGV[1].
const dropPending = `
local base = ARGV[1]
local function drop(id)
  redis.call('DEL', base .. 'p:' .. id)
  redis.call('ZREM', base .. 'pall', id)
  local m = redis.call('HGET', base .. 'pmeta', id)
  if not m then return end
  redis.call('HDEL', base .. 'pmeta', id)
  local i = string.find(m, '|', 1, true)
  local t = string.sub(m, i + 1)
  redis.call('ZREM', base .. 'pp:' .. string.sub(m, 1, i - 1), id)
  redis.call('ZREM', base .. 'pt:' .. t, id)
  if tonumber(redis.call('ZINCRBY', base .. 'ptc', -1, t)) <= 0 then
    redis.call('ZREM', base .. 'ptc', t)
  end
end
`

// putPending: KEYS the consent, the principal's, the tenant's and every
// pending id; ARGV base, id, value, expiry and now (ms), the bounds per
// principal, per tenant (0: none) and in all, the life (ms), principal
// and tenant hashes.
var putPending = redis.NewScript(dropPending + `
if tonumber(ARGV[8]) <= 0 then return 0 end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[5], 'LIMIT', 0, 100)) do drop(id) end
-- oldest removes the oldest of zset key (gone already from the others
-- when its consent was made before they were kept).
local function oldest(key)
  local old = redis.call('ZRANGE', key, 0, 0)
  if #old == 0 then return false end
  drop(old[1])
  redis.call('ZREM', key, old[1])
  return true
end
while redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) and oldest(KEYS[2]) do end
local share = tonumber(ARGV[7])
while share > 0 and redis.call('ZCARD', KEYS[3]) >= share and oldest(KEYS[3]) do end
-- heaviest returns the tenant holding the most; of those as heavy (the
-- first 16), the one whose oldest is older.
local function heaviest()
  local top = redis.call('ZREVRANGE', base .. 'ptc', 0, 0, 'WITHSCORES')
  if #top == 0 then return nil end
  local best, at = top[1], nil
  for _, t in ipairs(redis.call('ZREVRANGEBYSCORE', base .. 'ptc', top[2], top[2], 'LIMIT', 0, 16)) do
    local o = redis.call('ZRANGE', base .. 'pt:' .. t, 0, 0, 'WITHSCORES')
    if #o > 0 and (at == nil or tonumber(o[2]) < at) then best, at = t, tonumber(o[2]) end
  end
  return best
end
while redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[8]) do
  local heavy = heaviest()
  if not heavy then
    if not oldest(KEYS[4]) then return 0 end
  elseif not oldest(base .. 'pt:' .. heavy) then
    redis.call('ZREM', base .. 'ptc', heavy)
  end
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[9])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[2])
redis.call('HSET', base .. 'pmeta', ARGV[2], ARGV[10] .. '|' .. ARGV[11])
redis.call('ZINCRBY', base .. 'ptc', 1, ARGV[11])
redis.call('PEXPIRE', KEYS[2], ARGV[9])
redis.call('PEXPIRE', KEYS[3], ARGV[9])
return 1`)

func (r *Redis) PutPending(ctx context.Context, id, principal, tenant string, rec []byte, expires time.Time) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	now := r.now()
	ttl := expires.Sub(now).Milliseconds()
	if ttl <= 0 {
		return ErrNotFound
	}
	th := hashOf(tenant)
	val := append([]byte(principal+"|"), rec...)
	lim := r.lim.Load()
	n, err := putPending.Run(ctx, r.c, []string{r.base + "p:" + id, r.base + "pp:" + principal, r.base + "pt:" + th, r.base + "pall"},
		r.base, id, val, strconv.FormatInt(expires.UnixMilli(), 10), strconv.FormatInt(now.UnixMilli(), 10),
		lim.PendingPerPrincipal, lim.PendingPerTenant, lim.Pending, ttl, principal, th).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrFull
	}
	return nil
}

var takePending = redis.NewScript(dropPending + `
local v = redis.call('GET', KEYS[1])
if not v then return false end
drop(ARGV[2])
local i = string.find(v, '|', 1, true)
if not i then return false end
redis.call('ZREM', base .. 'pp:' .. string.sub(v, 1, i - 1), ARGV[2])
return string.sub(v, i + 1)`)

func (r *Redis) TakePending(ctx context.Context, id string) ([]byte, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	s, err := takePending.Run(ctx, r.c, []string{r.base + "p:" + id}, r.base, id).Text()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}

func (r *Redis) GetPending(ctx context.Context, id string) ([]byte, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	b, err := r.c.Get(ctx, r.base+"p:"+id).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	for i, c := range b {
		if c == '|' {
			return b[i+1:], nil
		}
	}
	return nil, ErrNotFound
}

// validID reports whether id can be one of NewID's: what a client sends
// is checked before it names a key.
func validID(id string) bool {
	if len(id) != 22 {
		return false
	}
	for _, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
