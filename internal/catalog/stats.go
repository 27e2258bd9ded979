package catalog

import (
	"cmp"
	"slices"
	"time"
)

// A ListStat is what the catalog holds of one upstream's lists of one
// kind, for the operator console.
type ListStat struct {
	Kind Kind
	// Listings are the listings of that kind cached: one per partition,
	// tenant or session that asked (see Scope).
	Listings int
	// Fetched is when the newest of them was fetched, and Items how many
	// items it holds. Fetched is zero when every one is stale (the
	// upstream said its list changed; the next use fetches it again), and
	// Items is then that of one of them.
	Fetched time.Time
	Items   int
}

// ListStats returns what the catalog holds of each upstream's lists, by
// upstream, in the order of Kinds; an upstream of which it holds nothing
// is left out. A listing held for no one (one the upstream marked
// private) counts for nothing.
func (c *Catalog) ListStats() map[string][]ListStat {
	type uk struct {
		upstream string
		kind     Kind
	}
	stats := map[uk]*ListStat{}
	c.mu.Lock()
	for key, l := range c.lists {
		if l.private {
			continue
		}
		k := uk{key.upstream, key.kind}
		st := stats[k]
		if st == nil {
			st = &ListStat{Kind: key.kind}
			stats[k] = st
		}
		st.Listings++
		if st.Listings == 1 || l.fetched.After(st.Fetched) {
			st.Fetched, st.Items = l.fetched, len(l.Items)
		}
	}
	c.mu.Unlock()
	out := make(map[string][]ListStat)
	for k, st := range stats {
		out[k.upstream] = append(out[k.upstream], *st)
	}
	for _, sts := range out {
		slices.SortFunc(sts, func(a, b ListStat) int { return cmp.Compare(a.Kind, b.Kind) })
	}
	return out
}
