package config

import "time"

// Defaults applied by [Config.ApplyDefaults] to settings left at their zero
// value.
const (
	DefaultListen            = ":8080"
	DefaultMaxBodyBytes      = 4 << 20 // 4 MiB
	DefaultRequestTimeout    = 5 * time.Minute
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadBodyTimeout   = 30 * time.Second
	DefaultListCacheTTL      = time.Minute
	DefaultDrainDelay        = 5 * time.Second
	DefaultShutdownGrace     = 25 * time.Second
	DefaultSessionStore      = StoreMemory
	DefaultIdleTTL           = 30 * time.Minute
	DefaultMaxSessions       = 100_000
	DefaultMaxPerPrincipal   = 100    // at most; see sessionShareDefaults
	DefaultMaxPerTenant      = 10_000 // at most; see sessionShareDefaults
	DefaultMailboxMessages   = 64
	DefaultMailboxBytes      = 8 << 20 // 8 MiB
	DefaultTasksPerPrincipal = 100
	DefaultTasksPerTenant    = 10_000
	DefaultMaxTasks          = 100_000
	DefaultTaskMaxTTL        = time.Hour
	DefaultTaskListPageSize  = 50
	DefaultStreamsPerPrinc   = 32
	DefaultStreamsPerTenant  = 10_000
	DefaultBatchMessages     = 50
	DefaultClientInfoBytes   = 8 << 10  // 8 KiB
	DefaultClientCapsBytes   = 64 << 10 // 64 KiB
	DefaultListPages         = 100
	DefaultParkedCalls       = 16
	DefaultDetachedCalls     = 16   // per principal
	DefaultDetachedPool      = 1024 // per replica
	DefaultEventsPerStream   = 1000
	DefaultEventBytes        = 1 << 20 // 1 MiB, per stream
	DefaultEventTTL          = 2 * time.Minute
	DefaultEventStreams      = 16 // per session
	DefaultEventMaxStreams   = 100_000
	DefaultEventMaxBytes     = 256 << 20 // 256 MiB
	DefaultListBytes         = 16 << 20  // 16 MiB
	DefaultUpstreamTimeout   = 30 * time.Second
	DefaultLeeway            = 30 * time.Second
	DefaultTokenCacheSize    = 10_000
	DefaultRedisAddr         = "127.0.0.1:6379" // the only item of the default sessions.redis.addrs
	DefaultRedisKeyPrefix    = "mcpgw:"
	DefaultRedisTimeout      = 500 * time.Millisecond
	DefaultSampleRatio       = 1.0
	DefaultAuditOutput       = AuditStderr
	DefaultAuditArguments    = AuditArgumentsNone
	DefaultRateInterval      = time.Second
	DefaultQueueTimeout      = time.Second
	DefaultBreakerFailures   = 5
	DefaultBreakerOpenFor    = 30 * time.Second
	DefaultStdioProcesses    = 256
	DefaultUpstreamStreams   = 10_000
	DefaultMaxProcesses      = 64
	// DefaultMaxDocumentBytes bounds an openapi upstream's document.
	DefaultMaxDocumentBytes = 4 << 20
	DefaultStdioIdleTimeout = 10 * time.Minute
	DefaultStopGrace        = 5 * time.Second
	DefaultConsentTTL       = 10 * time.Minute
	DefaultPendingPerPrinc  = 8
	DefaultPending          = 10_000
	DefaultVaultTokens      = 100_000
)

// Values of telemetry.audit.output besides a file path.
const (
	AuditStderr = "stderr"
	AuditStdout = "stdout"
	AuditOff    = "off"
)

// Values of upstreams[].audit_arguments.
const (
	AuditArgumentsNone     = "none"
	AuditArgumentsHash     = "hash"
	AuditArgumentsRedacted = "redacted"
)

// Values of upstreams[].lists.
const (
	ListsShared     = "shared"
	ListsPerSession = "per_session"
)

// Values of upstreams[].instructions.mode.
const (
	InstructionsUpstream = "upstream"
	InstructionsOverride = "override"
	InstructionsOff      = "off"
)

// Values of upstreams[].validation.arguments and .results.
const (
	ValidationOff     = "off"
	ValidationWarn    = "warn" // results only
	ValidationEnforce = "enforce"
)

// Values of tenants[].tool_search.mode.
const (
	SearchReplace = "replace"
	SearchBeside  = "beside"
)

// Bounds of tenants[].tool_search.max_results.
const (
	DefaultSearchResults = 10
	MaxSearchResults     = 50
)

// MaxInstructionsBytes bounds one upstream's instructions as the gateway
// passes them on, and the text that overrides them.
const MaxInstructionsBytes = 4 << 10

// Signature algorithms accepted in auth.issuers[].algorithms: asymmetric
// ones only, since a resource server verifies with the issuer's public keys.
const (
	AlgRS256 = "RS256"
	AlgPS256 = "PS256"
	AlgES256 = "ES256"
	AlgEdDSA = "EdDSA"
)

// DefaultAlgorithms returns the default of auth.issuers[].algorithms: every
// accepted algorithm. The slice is new on every call.
func DefaultAlgorithms() []string {
	return []string{AlgRS256, AlgPS256, AlgES256, AlgEdDSA}
}

// AnonymousTenant is the tenant of every caller when auth.anonymous is set.
const AnonymousTenant = "default"

// Session store names accepted in sessions.store.
const (
	StoreMemory = "memory"
	StoreRedis  = "redis"
)

// ApplyDefaults sets every setting left at its zero value to its default.
// [Parse] and [Load] call it; code that builds a Config itself (demo mode,
// tests) should call it before use. It does not default Upstream.Prefix: nil
// already means "use the name".
//
// An issuer's audiences default to [server.public_url] only when public_url
// is set; [Config.Validate] reports an issuer left without one. The Redis
// settings are defaulted whatever the store, so that they read the same
// wherever they are used. Lists are defaulted when empty, with a new slice
// for each. Telemetry.Tracing.SampleRatio is defaulted when nil: an
// explicit 0 (sample nothing) stays.
func (c *Config) ApplyDefaults() {
	s := &c.Server
	setDefault(&s.Listen, DefaultListen)
	setDefault(&s.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&s.RequestTimeout, Duration(DefaultRequestTimeout))
	setDefault(&s.ReadHeaderTimeout, Duration(DefaultReadHeaderTimeout))
	setDefault(&s.ReadBodyTimeout, Duration(DefaultReadBodyTimeout))
	setDefault(&s.ListCacheTTL, Duration(DefaultListCacheTTL))
	if s.DrainDelay == nil {
		d := Duration(DefaultDrainDelay)
		s.DrainDelay = &d
	}
	setDefault(&s.ShutdownGrace, Duration(DefaultShutdownGrace))

	ss := &c.Sessions
	setDefault(&ss.Store, DefaultSessionStore)
	setDefault(&ss.IdleTTL, Duration(DefaultIdleTTL))
	setDefault(&ss.MaxSessions, DefaultMaxSessions)
	setDefault(&ss.MailboxMessages, DefaultMailboxMessages)
	setDefault(&ss.MailboxBytes, DefaultMailboxBytes)
	setDefault(&ss.Tasks.MaxTasks, DefaultMaxTasks)
	setDefault(&ss.Tasks.MaxTTL, Duration(DefaultTaskMaxTTL))
	setDefault(&ss.Tasks.ListPageSize, DefaultTaskListPageSize)
	ev := &ss.Events
	setDefault(&ev.PerStream, DefaultEventsPerStream)
	setDefault(&ev.BytesPerStream, DefaultEventBytes)
	setDefault(&ev.TTL, Duration(DefaultEventTTL))
	setDefault(&ev.StreamsPerSession, DefaultEventStreams)
	setDefault(&ev.MaxStreams, DefaultEventMaxStreams)
	setDefault(&ev.MaxBytes, DefaultEventMaxBytes)
	sessionShareDefaults(ss)

	redisDefaults(&ss.Redis)
	if c.Budgets.Redis != nil {
		redisDefaults(c.Budgets.Redis)
	}

	vt := &c.Vault
	setDefault(&vt.ConsentTTL, Duration(DefaultConsentTTL))
	setDefault(&vt.PendingPerPrincipal, DefaultPendingPerPrinc)
	setDefault(&vt.Pending, DefaultPending)
	// A tenant's share: a quarter of the pool, so that one tenant
	// cannot hold every pending consent.
	setDefault(&vt.PendingPerTenant, max(1, vt.Pending/4))
	setDefault(&vt.Tokens, DefaultVaultTokens)
	// A tenant's share of the tokens: a tenth of the pool (10,000 of
	// the default 100,000), so that it follows a pool made smaller.
	setDefault(&vt.TokensPerTenant, max(1, vt.Tokens/10))

	a := &c.Auth
	setDefault(&a.Leeway, Duration(DefaultLeeway))
	setDefault(&a.TokenCacheSize, DefaultTokenCacheSize)
	for i := range a.Issuers {
		is := &a.Issuers[i]
		if len(is.Audiences) == 0 && c.Server.PublicURL != "" {
			is.Audiences = []string{c.Server.PublicURL}
		}
		if len(is.Algorithms) == 0 {
			is.Algorithms = DefaultAlgorithms()
		}
	}

	for i := range c.Tenants {
		if ts := c.Tenants[i].ToolSearch; ts != nil {
			setDefault(&ts.Mode, SearchReplace)
			setDefault(&ts.MaxResults, DefaultSearchResults)
		}
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		setDefault(&u.Timeout, Duration(DefaultUpstreamTimeout))
		setDefault(&u.AuditArguments, DefaultAuditArguments)
		// Lists stays unset when absent: the catalog then keys the
		// upstream's lists by the identity it is reached with (see
		// catalog.NewUpstream), which an explicit "shared" does not.
		if p := u.Pin; p != nil {
			setDefault(&p.OnChange, PinWarn)
			setDefault(&p.New, PinAllow)
		}
		if cc := u.Concurrency; cc != nil {
			// Queue is a pointer: an explicit 0 (none wait) stays.
			if cc.Queue == nil {
				q := cc.QueueSize()
				cc.Queue = &q
			}
			setDefault(&cc.QueuePerTenant, cc.TenantQueue())
			setDefault(&cc.QueuePerPrincipal, cc.PrincipalQueue())
			setDefault(&cc.QueueTimeout, Duration(DefaultQueueTimeout))
		}
		if cb := u.CircuitBreaker; cb != nil {
			setDefault(&cb.Failures, DefaultBreakerFailures)
			setDefault(&cb.OpenFor, Duration(DefaultBreakerOpenFor))
			setDefault(&cb.HalfOpenProbes, 1)
		}
		if o := u.OpenAPI; o != nil {
			setDefault(&o.MaxDocumentBytes, DefaultMaxDocumentBytes)
		}
		// Transport stays "" when not given: IsStdio and IsOpenAPI tell.
		if u.IsStdio() {
			if u.Stdio == nil {
				u.Stdio = &UpstreamStdio{}
			}
			setDefault(&u.Stdio.Isolation, IsolationTenant)
			setDefault(&u.Stdio.MaxProcesses, DefaultMaxProcesses)
			setDefault(&u.Stdio.IdleTimeout, Duration(DefaultStdioIdleTimeout))
			setDefault(&u.Stdio.StopGrace, Duration(DefaultStopGrace))
		}
	}

	budgetDefaults(c.Budgets.RateLimits, c.Budgets.Quotas)
	for i := range c.Tenants {
		budgetDefaults(c.Tenants[i].Budgets.RateLimits, c.Tenants[i].Budgets.Quotas)
	}

	l := &c.Limits
	setDefault(&l.StreamsPerPrincipal, DefaultStreamsPerPrinc)
	setDefault(&l.StreamsPerTenant, DefaultStreamsPerTenant)
	setDefault(&l.BatchMessages, DefaultBatchMessages)
	setDefault(&l.ClientInfoBytes, DefaultClientInfoBytes)
	setDefault(&l.ClientCapabilitiesBytes, DefaultClientCapsBytes)
	setDefault(&l.ParkedCallsPerPrincipal, DefaultParkedCalls)
	setDefault(&l.DetachedCallsPerPrincipal, DefaultDetachedCalls)
	setDefault(&l.ListPages, DefaultListPages)
	setDefault(&l.ListBytes, DefaultListBytes)
	setDefault(&l.StdioProcesses, DefaultStdioProcesses)
	setDefault(&l.UpstreamStreams, DefaultUpstreamStreams)
	// The shares of the replica's pools, derived from the pools: no one
	// principal or tenant takes all of one.
	setDefault(&l.DetachedCalls, DefaultDetachedPool)
	setDefault(&l.DetachedCallsPerTenant, max(1, l.DetachedCalls/4))
	setDefault(&l.UpstreamStreamsPerPrincipal, max(1, l.UpstreamStreams/16))
	setDefault(&l.UpstreamStreamsPerTenant, max(1, l.UpstreamStreams/2))

	t := &c.Telemetry
	if t.Tracing.SampleRatio == nil {
		r := DefaultSampleRatio
		t.Tracing.SampleRatio = &r
	}
	setDefault(&t.Audit.Output, DefaultAuditOutput)
}

// QueueSize returns the most requests that may wait for a slot: Queue, or
// its default, MaxInFlight, when Queue is nil. 0 means none wait.
func (c *Concurrency) QueueSize() int {
	if c.Queue == nil {
		return c.MaxInFlight
	}
	return *c.Queue
}

// TenantQueue returns the most requests of one tenant that may wait:
// QueuePerTenant, or its default, half the queue rounded up, when it is
// 0. Half lets two tenants share a full queue evenly, while one alone
// still finds room to wait; the queue's eviction (the heaviest tenant
// loses a waiter first) evens out more tenants. It is never more than
// the queue.
func (c *Concurrency) TenantQueue() int {
	q := c.QueueSize()
	if c.QueuePerTenant > 0 {
		return min(c.QueuePerTenant, q)
	}
	return (q + 1) / 2
}

// PrincipalQueue returns the most requests of one principal that may
// wait: QueuePerPrincipal, or its default, half the tenant's share rounded
// up, when it is 0. It is never more than the tenant's share: a principal
// waits among its tenant's waiters.
func (c *Concurrency) PrincipalQueue() int {
	t := c.TenantQueue()
	if c.QueuePerPrincipal > 0 {
		return min(c.QueuePerPrincipal, t)
	}
	return (t + 1) / 2
}

func redisDefaults(r *Redis) {
	if len(r.Addrs) == 0 {
		r.Addrs = []string{DefaultRedisAddr}
	}
	setDefault(&r.KeyPrefix, DefaultRedisKeyPrefix)
	setDefault(&r.Timeout, Duration(DefaultRedisTimeout))
}

func budgetDefaults(rls []RateLimit, qs []Quota) {
	for i := range rls {
		r := &rls[i]
		setDefault(&r.Interval, Duration(DefaultRateInterval))
		setDefault(&r.Burst, r.Requests)
		setDefault(&r.OnStoreError, FailOpen)
	}
	for i := range qs {
		q := &qs[i]
		setDefault(&q.Period, PeriodDay)
		setDefault(&q.OnStoreError, FailClosed)
	}
}

// sessionShareDefaults derives the shares of the session store's pools
// that one principal and one tenant may hold, when not set, from the
// pools (max_sessions, tasks.max_tasks, events.max_streams,
// events.max_bytes), which must be defaulted already: a tenth for a
// principal and a half for a tenant (at least 1), so that at least ten
// principals and two tenants fill a pool before a full one evicts the
// heaviest holder's entries. A share larger than its pool would be no
// share at all. The session and task caps keep their former values (100
// and 10000) as ceilings, which the default pools of 100000 give anyway;
// Redis, which has neither max_sessions nor max_tasks, gets the same
// numbers. The keys are all positive: 0 is "not set".
func sessionShareDefaults(ss *Sessions) {
	setDefault(&ss.MaxPerPrincipal, min(DefaultMaxPerPrincipal, principalShare(ss.MaxSessions)))
	setDefault(&ss.MaxPerTenant, min(DefaultMaxPerTenant, tenantShare(ss.MaxSessions)))
	tk := &ss.Tasks
	setDefault(&tk.MaxPerPrincipal, min(DefaultTasksPerPrincipal, principalShare(tk.MaxTasks)))
	setDefault(&tk.MaxPerTenant, min(DefaultTasksPerTenant, tenantShare(tk.MaxTasks)))
	ev := &ss.Events
	setDefault(&ev.MaxStreamsPerPrincipal, principalShare(ev.MaxStreams))
	setDefault(&ev.MaxStreamsPerTenant, tenantShare(ev.MaxStreams))
	setDefault(&ev.MaxBytesPerPrincipal, principalShare(ev.MaxBytes))
	setDefault(&ev.MaxBytesPerTenant, tenantShare(ev.MaxBytes))
}

// principalShare and tenantShare are the default shares of a pool of n.
func principalShare[N int | int64](n N) N { return max(n/10, 1) }
func tenantShare[N int | int64](n N) N    { return max(n/2, 1) }

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
