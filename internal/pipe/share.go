package pipe

import (
	"sync"
	"time"
)

// Shares of a pool of Conns
//
// The Conns of a Handler (Options.MaxConns) and of all the Handlers of a
// Limit are pools that every principal and tenant draw from. So that one
// of them cannot take a whole pool with idle Conns (isolation: session, one
// Conn per session), each holds at most a share of it: Options.
// PrincipalConns and TenantConns of a Handler, Limit.SetShares of a Limit.
// A newcomer beyond its share, or finding the pool full, makes room by
// stopping an idle Conn (no request in flight, no GET stream): its own
// oldest when it is at its share, else the oldest of the heaviest holder
// (the principal, then the tenant, holding the most Conns). Only when no
// such Conn is idle is it refused, with the bound named. The sessions of
// a stopped Conn open again, on a new Conn, with their next request, as
// after an idle timeout.

// pool counts the Conns of a Handler or a Limit by principal and tenant.
// Its owner's mutex guards it.
type pool struct {
	n           int
	byPrincipal map[string]int
	byTenant    map[string]int
	conns       map[*uconn]struct{}
}

func newPool() pool {
	return pool{byPrincipal: map[string]int{}, byTenant: map[string]int{}, conns: map[*uconn]struct{}{}}
}

// admit counts c in the pool, or returns the bound it would exceed and a
// Conn to stop to make room (nil if none is idle): n bounds the pool,
// principalMax and tenantMax the shares (0: no bound).
func (p *pool) admit(c *uconn, n, principalMax, tenantMax int) (limit string, victim *uconn) {
	switch {
	case principalMax > 0 && p.byPrincipal[c.principal] >= principalMax:
		return limitPrincipal, p.idle(func(o *uconn) bool { return o.principal == c.principal })
	case tenantMax > 0 && p.byTenant[c.tenant] >= tenantMax:
		return limitTenant, p.idle(func(o *uconn) bool { return o.tenant == c.tenant })
	case n > 0 && p.n >= n:
		return limitPool, p.idle(nil)
	}
	p.n++
	p.byPrincipal[c.principal]++
	p.byTenant[c.tenant]++
	p.conns[c] = struct{}{}
	return "", nil
}

// The bounds admit names; the caller maps them to its Limit* names.
const (
	limitPool      = "pool"
	limitPrincipal = "principal"
	limitTenant    = "tenant"
)

// remove forgets c; it reports whether c was counted.
func (p *pool) remove(c *uconn) bool {
	if _, ok := p.conns[c]; !ok {
		return false
	}
	delete(p.conns, c)
	p.n--
	if p.byPrincipal[c.principal]--; p.byPrincipal[c.principal] <= 0 {
		delete(p.byPrincipal, c.principal)
	}
	if p.byTenant[c.tenant]--; p.byTenant[c.tenant] <= 0 {
		delete(p.byTenant, c.tenant)
	}
	return true
}

// idle returns the idle Conn of the pool (of those that match, if match is
// set) whose principal, then tenant, holds the most Conns, the least
// recently used of those; nil if none is idle. It locks each Conn: the
// pool's owner's mutex comes before a Conn's.
func (p *pool) idle(match func(*uconn) bool) *uconn {
	var best *uconn
	var bestP, bestT int
	var bestUsed time.Time
	for c := range p.conns {
		if match != nil && !match(c) {
			continue
		}
		used, ok := c.idleSince()
		if !ok {
			continue
		}
		np, nt := p.byPrincipal[c.principal], p.byTenant[c.tenant]
		if best == nil || np > bestP || np == bestP && (nt > bestT || nt == bestT && used.Before(bestUsed)) {
			best, bestP, bestT, bestUsed = c, np, nt, used
		}
	}
	return best
}

// idleSince reports whether c is running, initialized and idle (no
// request in flight, no GET stream, not being stopped), and since when.
func (c *uconn) idleSince() (time.Time, bool) {
	if !isClosed(c.ready) || c.dialErr != nil || !isClosed(c.initDone) {
		return time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.ended || len(c.pending) > 0 || len(c.streams) > 0 {
		return time.Time{}, false
	}
	return c.lastUsed, true
}

// A Limit bounds the Conns of several Handlers together, and the share of
// them one principal and one tenant hold. Its methods are safe for
// concurrent use.
type Limit struct {
	mu           sync.Mutex
	max          int
	principalMax int // -1: derived from max
	tenantMax    int // -1: derived from max
	p            pool
}

// NewLimit returns a Limit of max Conns; 0 or less means none. The shares
// are derived from max (see SetShares).
func NewLimit(n int) *Limit {
	return &Limit{max: n, principalMax: -1, tenantMax: -1, p: newPool()}
}

// SetMax changes the bound; Conns beyond a lowered one run on.
func (l *Limit) SetMax(n int) {
	l.mu.Lock()
	l.max = n
	l.mu.Unlock()
}

// SetShares sets the most Conns one principal and one tenant hold; 0
// means no bound but the Limit's, and a negative value the default,
// derived from the Limit's bound (see DefaultShares).
func (l *Limit) SetShares(principal, tenant int) {
	l.mu.Lock()
	l.principalMax, l.tenantMax = principal, tenant
	l.mu.Unlock()
}

// DefaultShares returns the shares of a pool of max Conns that a
// principal and a tenant hold unless configured: a quarter and a half of
// it, at least one; none when the pool is unbounded.
func DefaultShares(n int) (principal, tenant int) {
	if n <= 0 {
		return 0, 0
	}
	return max(1, n/4), max(1, n/2)
}

// InUse returns how many Conns hold the Limit.
func (l *Limit) InUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.n
}

// admit counts c in the Limit (nil: no Limit), or returns the bound it
// would exceed and an idle Conn to stop to make room.
func (l *Limit) admit(c *uconn) (limit string, victim *uconn) {
	if l == nil {
		return "", nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	dp, dt := DefaultShares(l.max)
	pm, tm := l.principalMax, l.tenantMax
	if pm < 0 {
		pm = dp
	}
	if tm < 0 {
		tm = dt
	}
	return l.p.admit(c, l.max, pm, tm)
}

func (l *Limit) release(c *uconn) {
	if l != nil {
		l.mu.Lock()
		l.p.remove(c)
		l.mu.Unlock()
	}
}
