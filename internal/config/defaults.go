package config

import "time"

// Defaults applied by [Config.ApplyDefaults] to settings left at their zero
// value.
const (
	DefaultListen            = ":8080"
	DefaultMaxBodyBytes      = 4 << 20 // 4 MiB
	DefaultRequestTimeout    = 5 * time.Minute
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultListCacheTTL      = time.Minute
	DefaultSessionStore      = StoreMemory
	DefaultIdleTTL           = 30 * time.Minute
	DefaultMaxSessions       = 100_000
	DefaultUpstreamTimeout   = 30 * time.Second
)

// Session store names accepted in sessions.store.
const (
	StoreMemory = "memory"
	StoreRedis  = "redis"
)

// ApplyDefaults sets every setting left at its zero value to its default.
// [Parse] and [Load] call it; code that builds a Config itself (demo mode,
// tests) should call it before use. It does not default Upstream.Prefix: nil
// already means "use the name".
func (c *Config) ApplyDefaults() {
	s := &c.Server
	setDefault(&s.Listen, DefaultListen)
	setDefault(&s.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&s.RequestTimeout, Duration(DefaultRequestTimeout))
	setDefault(&s.ReadHeaderTimeout, Duration(DefaultReadHeaderTimeout))
	setDefault(&s.ListCacheTTL, Duration(DefaultListCacheTTL))

	ss := &c.Sessions
	setDefault(&ss.Store, DefaultSessionStore)
	setDefault(&ss.IdleTTL, Duration(DefaultIdleTTL))
	setDefault(&ss.MaxSessions, DefaultMaxSessions)

	for i := range c.Upstreams {
		setDefault(&c.Upstreams[i].Timeout, Duration(DefaultUpstreamTimeout))
	}
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
