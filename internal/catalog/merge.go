package catalog

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// A tenant's merged list: its upstreams' listings, as it may see them,
// one namespace, names claimed twice reported and left out.

func (c *Catalog) reportConflict(k Kind, name string, upstreams ...string) {
	key := fmt.Sprintf("%d\x00%s\x00%s", k, name, strings.Join(upstreams, ","))
	c.mu.Lock()
	last, seen := c.reported[key]
	now := c.now()
	if seen && now.Sub(last) < time.Minute {
		c.mu.Unlock()
		return
	}
	c.reported[key] = now
	c.mu.Unlock()
	c.log.Error("name conflict: hidden from clients until an upstream prefix disambiguates it",
		"kind", kinds[k].Noun, "name", name, "upstreams", strings.Join(upstreams, ","))
}

// Merge combines several upstreams' listings (ls[i] is ups[i]'s, nil if
// none) into one list sorted by exposed name. Only the items lk.Visible
// allows take part: an item the tenant cannot see neither appears nor
// conflicts with anything. A name more than one visible item has is left
// out.
func (c *Catalog) Merge(k Kind, ups []*Upstream, ls []*Listing, lk Lookup) []Item {
	owners := make(map[string][]string)
	var out []Item
	for i, l := range ls {
		if l == nil {
			continue
		}
		for j := range l.Items {
			it := &l.Items[j]
			if l.dups != nil && l.index[it.Exposed] < 0 {
				continue // listed twice: see below
			}
			if !lk.Visible(k, ups[i], it.Original) {
				continue
			}
			owners[it.Exposed] = append(owners[it.Exposed], ups[i].Name)
			out = append(out, *it)
		}
		for name := range l.dups {
			// Listed twice by this upstream: a clash, if the tenant may
			// see any of the copies; else nothing at all.
			if l.visibleDup(k, ups[i], name, lk) {
				owners[name] = append(owners[name], ups[i].Name, ups[i].Name)
			}
		}
	}
	kept := out[:0]
	for _, it := range out {
		if o := owners[it.Exposed]; len(o) > 1 {
			c.reportConflict(k, it.Exposed, o...)
			continue
		}
		kept = append(kept, it)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Exposed < kept[j].Exposed })
	return kept
}

// visibleDup reports whether the tenant may see any copy of name, which
// the listing holds more than once.
func (l *Listing) visibleDup(k Kind, up *Upstream, name string, lk Lookup) bool {
	for _, orig := range l.dups[name] {
		if lk.Visible(k, up, orig) {
			return true
		}
	}
	return false
}

// ResolveError is what resolving an exposed name reports: the name is
// unknown, or several upstreams expose it.
type ResolveError struct {
	Conflict []string // upstreams exposing the name, when ambiguous
	Name     string
	Kind     Kind
	// DeniedBy is the upstream that has the item when the tenant's policy
	// hides it, and DeniedName its name there; for audit and metrics only,
	// never for the client.
	DeniedBy, DeniedName string
}

func (e *ResolveError) Error() string {
	if len(e.Conflict) > 0 {
		return fmt.Sprintf("%s %q is provided by several upstreams (%s); an admin must give them distinct prefixes",
			kinds[e.Kind].Noun, e.Name, strings.Join(e.Conflict, ", "))
	}
	if kinds[e.Kind].URI {
		return "Resource not found: " + e.Name
	}
	return fmt.Sprintf("Unknown %s: %s", kinds[e.Kind].Noun, e.Name)
}
