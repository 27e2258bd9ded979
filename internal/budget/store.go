package budget

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// A Limit is a GCRA rate: Rate requests per Period in the long run, and up
// to Burst at once.
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

// A Store keeps the state of rate limits and quotas: [Memory] for one
// replica, [Redis] for many.
type Store interface {
	// Allow takes one request from the bucket at key; when it may not,
	// retryAfter is when it may.
	Allow(ctx context.Context, key string, l Limit) (ok bool, retryAfter time.Duration, err error)
	// Count adds one to the counter at key, which ends at end, unless it
	// holds max already. used is the count after.
	Count(ctx context.Context, key string, max int64, end time.Time) (used int64, ok bool, err error)
	// Uncount takes back one count of a call that Count counted and
	// another budget refused.
	Uncount(ctx context.Context, key string) error
	// remote reports whether each call is a round trip (worth running
	// several at once).
	remote() bool
}

// ErrFull is a memory store's answer when its table is full of live
// entries: the budget fails as its on_store_error says.
var ErrFull = errors.New("budget: memory store full")

// DefaultMemoryKeys bounds a [Memory] store's buckets and counters, each.
const DefaultMemoryKeys = 100_000

// Memory is an in-process Store. Its buckets and counters are bounded: a
// full table first drops the buckets that are full again (as good as
// new) and the counters of past periods, then, for buckets, the oldest
// half (which only makes those limits lenient for a moment).
type Memory struct {
	mu       sync.Mutex
	buckets  map[string]*rate.Limiter
	counters map[string]*counter
	max      int
	now      func() time.Time
}

type counter struct {
	n   int64
	end time.Time
}

// NewMemory returns a memory store of at most max buckets and max
// counters (DefaultMemoryKeys when max <= 0).
func NewMemory(max int) *Memory {
	if max <= 0 {
		max = DefaultMemoryKeys
	}
	return &Memory{buckets: map[string]*rate.Limiter{}, counters: map[string]*counter{}, max: max, now: time.Now}
}

func (m *Memory) remote() bool { return false }

// Allow implements Store.
func (m *Memory) Allow(_ context.Context, key string, l Limit) (bool, time.Duration, error) {
	now := m.now()
	every := rate.Every(l.Period / time.Duration(l.Rate))
	m.mu.Lock()
	defer m.mu.Unlock()
	lim := m.buckets[key]
	if lim == nil {
		if len(m.buckets) >= m.max {
			m.sweepBuckets(now)
		}
		lim = rate.NewLimiter(every, l.Burst)
		m.buckets[key] = lim
	} else if lim.Limit() != every || lim.Burst() != l.Burst {
		// The rule changed on reload: its bucket keeps its level.
		lim.SetLimitAt(now, every)
		lim.SetBurstAt(now, l.Burst)
	}
	if lim.AllowN(now, 1) {
		return true, 0, nil
	}
	// Refused: when would it be allowed?
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return false, l.Period, nil
	}
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return false, d, nil
}

func (m *Memory) sweepBuckets(now time.Time) {
	for k, lim := range m.buckets {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(m.buckets, k)
		}
	}
	for k := range m.buckets {
		if len(m.buckets) < m.max/2 {
			break
		}
		delete(m.buckets, k) // map order: an arbitrary half
	}
}

// Count implements Store.
func (m *Memory) Count(_ context.Context, key string, max int64, end time.Time) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.counters[key]
	if c == nil || !c.end.Equal(end) {
		if c == nil && len(m.counters) >= m.max {
			now := m.now()
			for k, c := range m.counters {
				if !c.end.After(now) {
					delete(m.counters, k)
				}
			}
			if len(m.counters) >= m.max {
				return 0, false, ErrFull
			}
		}
		c = &counter{end: end}
		m.counters[key] = c
	}
	if c.n >= max {
		return c.n, false, nil
	}
	c.n++
	return c.n, true, nil
}

// Uncount implements Store.
func (m *Memory) Uncount(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.counters[key]; c != nil && c.n > 0 {
		c.n--
	}
	return nil
}

// Redis is a Store on Redis, shared by every replica that uses the same
// Redis and key prefix. Rate limits are go-redis/redis_rate's GCRA: one
// script call per limit. A quota is an INCR and an EXPIREAT in one
// transaction, and a DECR when the call is refused.
type Redis struct {
	rdb     redis.UniversalClient
	lim     *redis_rate.Limiter
	prefix  string
	timeout time.Duration
}

// NewRedis returns a Store on rdb, its keys under prefix, each call
// bounded by timeout.
func NewRedis(rdb redis.UniversalClient, prefix string, timeout time.Duration) *Redis {
	return &Redis{rdb: rdb, lim: redis_rate.NewLimiter(rdb), prefix: prefix, timeout: timeout}
}

func (r *Redis) remote() bool { return true }

// Allow implements Store.
func (r *Redis) Allow(ctx context.Context, key string, l Limit) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	res, err := r.lim.Allow(ctx, r.prefix+"rl:"+key, redis_rate.Limit{Rate: l.Rate, Burst: l.Burst, Period: l.Period})
	if err != nil {
		return false, 0, err
	}
	if res.Allowed > 0 {
		return true, 0, nil
	}
	return false, res.RetryAfter, nil
}

// Count implements Store.
func (r *Redis) Count(ctx context.Context, key string, max int64, end time.Time) (int64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	k := r.prefix + "quota:" + key
	pipe := r.rdb.TxPipeline()
	incr := pipe.Incr(ctx, k)
	// An hour past its period, for clocks that disagree a little.
	pipe.ExpireAt(ctx, k, end.Add(time.Hour))
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, false, err
	}
	n := incr.Val()
	if n <= max {
		return n, true, nil
	}
	// Refused: the call does not count. Best effort: a failure here only
	// makes the quota stricter for the rest of the period.
	_ = r.rdb.Decr(ctx, k).Err()
	return max, false, nil
}

// Uncount implements Store.
func (r *Redis) Uncount(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.rdb.Decr(ctx, r.prefix+"quota:"+key).Err()
}
