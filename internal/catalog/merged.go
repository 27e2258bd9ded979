package catalog

import (
	"context"
	"slices"
	"sync"
)

// Listings returns ups' listings of kind k (nil for one that failed, which
// is logged: one failing upstream never breaks the others). Those the
// catalog holds fresh for scope(up) cost no goroutine and no upstream
// request; the others are fetched through lk, all at once.
func (c *Catalog) Listings(ctx context.Context, k Kind, ups []*Upstream, scope func(*Upstream) Scope, lk Lookup) []*Listing {
	ls := make([]*Listing, len(ups))
	var wg sync.WaitGroup
	for i, up := range ups {
		if l := c.Fresh(up, k, scope(up)); l != nil {
			ls[i] = l // the common case
			continue
		}
		wg.Go(func() {
			l, err := lk.Listing(ctx, up, k)
			if err != nil {
				c.log.Warn("listing failed", "upstream", up.Name, "rpc_method", kinds[k].ListMethod, "error", err)
				return
			}
			ls[i] = l
		})
	}
	wg.Wait()
	return ls
}

// A Merged is a tenant's merged list of one kind as its clients get it,
// and what it was made from: the listings merged (see Merge), by
// upstream. It serves the tenant's list requests while those are the
// listings in force.
type Merged struct {
	ups []*Upstream
	ls  []*Listing
	// Body is the encoded list, shared by every response that uses it:
	// it must not be modified.
	Body []byte
	// Items are the tenant's items, as it sees them.
	Items []Item

	index sync.Once
	idx   any
}

// Index returns what build makes of m's items, made on the first call
// and kept with m (a search index).
func (m *Merged) Index(build func([]Item) any) any {
	m.index.Do(func() { m.idx = build(m.Items) })
	return m.idx
}

// MergedCache holds each tenant's merged lists, by kind. Its zero value
// is ready to use; it is meant to live as long as one configuration.
type MergedCache struct{ m sync.Map }

type mergedKey struct {
	tenant string
	kind   Kind
}

// Get returns the tenant's merged list of kind k if it was made from
// listings ls of ups, nil otherwise.
func (mc *MergedCache) Get(tenant string, k Kind, ups []*Upstream, ls []*Listing) *Merged {
	if v, ok := mc.m.Load(mergedKey{tenant, k}); ok {
		if m := v.(*Merged); slices.Equal(m.ups, ups) && slices.Equal(m.ls, ls) {
			return m
		}
	}
	return nil
}

// Put keeps the tenant's merged list of kind k, made from listings ls of
// ups, and returns it.
func (mc *MergedCache) Put(tenant string, k Kind, ups []*Upstream, ls []*Listing, body []byte, items []Item) *Merged {
	m := &Merged{ups: ups, ls: ls, Body: body, Items: items}
	mc.m.Store(mergedKey{tenant, k}, m)
	return m
}
