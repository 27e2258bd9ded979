package telemetry

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// Bounds on distinct label values, per process. They are backstops: the
// gateway passes only configured tenants and upstreams and the tools those
// upstreams list, so a real deployment stays far below them. A value seen
// once keeps its series; values beyond a bound are recorded as "other".
// The sets are never pruned (a tenant removed by a reload keeps its slot
// until restart), which is what keeps a series from flapping between its
// name and "other".
const (
	MaxTenantLabels          = 1000
	MaxUpstreamLabels        = 200
	MaxToolLabelsPerUpstream = 500
	// MaxReasonLabels bounds the reason label of auth failures and the
	// kind label of policy denials.
	MaxReasonLabels = 32
	// MaxBudgetLabels bounds the budget names (rate limits and quotas by
	// name, upstreams for concurrency and circuit breakers).
	MaxBudgetLabels = 256
	// MaxLabelLen is the longest label value kept, in bytes; longer ones
	// are cut (at a UTF-8 boundary).
	MaxLabelLen = 128
)

// cleanLabel makes v a label value Prometheus accepts (valid UTF-8:
// WithLabelValues panics otherwise) and bounds its length.
func cleanLabel(v string) string {
	if !utf8.ValidString(v) {
		v = strings.ToValidUTF8(v, "\uFFFD")
	}
	if len(v) > MaxLabelLen {
		cut := MaxLabelLen
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut]
	}
	return v
}

// capped is a set of at most max label values.
type capped struct {
	mu   sync.RWMutex
	max  int
	seen map[string]struct{}
}

func newCapped(max int) *capped {
	return &capped{max: max, seen: make(map[string]struct{})}
}

// value returns v (cleaned) if it is in the set or the set has room for
// it, else "other".
func (c *capped) value(v string) string {
	v = cleanLabel(v)
	c.mu.RLock()
	_, ok := c.seen[v]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[v]; ok {
		return v
	}
	if len(c.seen) >= c.max {
		return otherLabel
	}
	c.seen[v] = struct{}{}
	return v
}

// cappedByKey is one capped set per key, for at most maxKeys keys; values
// of keys beyond that are "other".
type cappedByKey struct {
	mu      sync.Mutex
	maxKeys int
	max     int
	sets    map[string]*capped
}

func newCappedByKey(maxKeys, max int) *cappedByKey {
	return &cappedByKey{maxKeys: maxKeys, max: max, sets: make(map[string]*capped)}
}

func (c *cappedByKey) value(key, v string) string {
	c.mu.Lock()
	s, ok := c.sets[key]
	if !ok {
		if len(c.sets) >= c.maxKeys {
			c.mu.Unlock()
			return otherLabel
		}
		s = newCapped(c.max)
		c.sets[key] = s
	}
	c.mu.Unlock()
	return s.value(v)
}
