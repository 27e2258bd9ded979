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
//	<prefix>vault:{vault}:pall             zset: every pending id by expiry (ms)
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

var putPending = redis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[4])
while redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) do
  local old = redis.call('ZPOPMIN', KEYS[2])
  if #old == 0 then break end
  redis.call('DEL', ARGV[7] .. old[1])
  redis.call('ZREM', KEYS[3], old[1])
end
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[6]) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[8])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[8])
return 1`)

func (r *Redis) PutPending(ctx context.Context, id, principal string, rec []byte, expires time.Time) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	now := r.now()
	ttl := expires.Sub(now).Milliseconds()
	if ttl <= 0 {
		return ErrNotFound
	}
	val := append([]byte(principal+"|"), rec...)
	n, err := putPending.Run(ctx, r.c, []string{r.base + "p:" + id, r.base + "pp:" + principal, r.base + "pall"},
		id, val, strconv.FormatInt(expires.UnixMilli(), 10), strconv.FormatInt(now.UnixMilli(), 10),
		r.lim.Load().PendingPerPrincipal, r.lim.Load().Pending, r.base+"p:", ttl).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrFull
	}
	return nil
}

var takePending = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
redis.call('DEL', KEYS[1])
local i = string.find(v, '|', 1, true)
if not i then return false end
redis.call('ZREM', ARGV[2] .. string.sub(v, 1, i - 1), ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return string.sub(v, i + 1)`)

func (r *Redis) TakePending(ctx context.Context, id string) ([]byte, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	s, err := takePending.Run(ctx, r.c, []string{r.base + "p:" + id, r.base + "pall"}, id, r.base+"pp:").Text()
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
