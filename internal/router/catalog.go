package router

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// The catalog caches, per replica, each upstream's lists (tools, prompts,
// resources, resource templates) already rewritten to their exposed names,
// and answers two questions from them: what does a tenant see (a merge of
// its upstreams' lists), and which upstream owns an exposed name. Both
// answers come from the same data, so a name that is not listed is not
// routable, and a name two upstreams expose (possible with empty prefixes)
// is neither listed nor routable: it is a conflict, reported to the admin,
// never silently shadowed.

// kind is one of the four list kinds.
type kind int

const (
	kindTools kind = iota
	kindPrompts
	kindResources
	kindTemplates
)

type kindInfo struct {
	listMethod string // the upstream method that lists this kind
	field      string // the result member holding the items
	key        string // the item member the gateway rewrites
	capability string // the server capability that enables it
	uri        bool   // key is a URI (namespaced with "+"), not a name
	noun       string
}

var kinds = [...]kindInfo{
	kindTools:     {"tools/list", "tools", "name", "tools", false, "tool"},
	kindPrompts:   {"prompts/list", "prompts", "name", "prompts", false, "prompt"},
	kindResources: {"resources/list", "resources", "uri", "resources", true, "resource"},
	kindTemplates: {"resources/templates/list", "resourceTemplates", "uriTemplate", "resources", true, "resource template"},
}

// expose returns the exposed form of an item key for an upstream prefix.
func (k kind) expose(prefix, key string) string {
	if kinds[k].uri {
		return exposedURI(prefix, key)
	}
	return exposedName(prefix, key)
}

// owns reports whether an upstream with the given prefix could expose the
// name at all; the catalog consults only those upstreams.
func (k kind) owns(prefix, exposed string) bool {
	if prefix == "" {
		return true
	}
	sep := nameSeparator
	if kinds[k].uri {
		sep = uriSeparator
	}
	return strings.HasPrefix(exposed, prefix+sep)
}

// item is one listed tool, prompt, resource or template.
type item struct {
	upstream string
	exposed  string
	original string
	raw      json.RawMessage // the upstream's object with the exposed key
	// headers are a tool's x-mcp-header annotations, parsed once here.
	headers []paramHeader
}

// listing is one upstream's list of one kind.
type listing struct {
	items   []item
	index   map[string]int // exposed name → position in items; -1 for a duplicate
	fetched time.Time
	digest  [32]byte // of the items as listed, to notice a change
}

type listKey struct {
	upstream string
	kind     kind
}

// fetchFunc fetches the raw items of one kind from one upstream, following
// pagination.
type fetchFunc func(ctx context.Context) ([]json.RawMessage, error)

type catalog struct {
	ttl time.Duration
	log *slog.Logger
	now func() time.Time
	// onChange, if set, is called when a refetched listing differs from
	// the one it replaces.
	onChange func(upstream string, k kind)

	mu       sync.Mutex
	lists    map[listKey]*listing
	refetch  map[listKey]time.Time // last forced refresh, to rate-limit them
	reported map[string]time.Time  // conflicts logged recently
	sf       singleflight.Group
}

// minRefetch bounds how often a name missing from a fresh listing makes the
// gateway ask the upstream again: a client calling unknown names in a loop
// costs the upstream at most one list per this interval.
const minRefetch = time.Second

func newCatalog(ttl time.Duration, log *slog.Logger) *catalog {
	return &catalog{
		ttl: ttl, log: log, now: time.Now,
		lists:    make(map[listKey]*listing),
		refetch:  make(map[listKey]time.Time),
		reported: make(map[string]time.Time),
	}
}

// setTTL changes how long listings stay fresh.
func (c *catalog) setTTL(ttl time.Duration) {
	c.mu.Lock()
	c.ttl = ttl
	c.mu.Unlock()
}

// fresh returns the upstream's cached listing of kind k if it is fresh,
// else nil.
func (c *catalog) fresh(up *upstreamRef, k kind) *listing {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lists[listKey{up.cfg.Name, k}]
	if l == nil || c.now().Sub(l.fetched) >= c.ttl {
		return nil
	}
	return l
}

// get returns the upstream's listing of kind k, from the cache while it is
// fresh, else fetched. force asks for a fetch even of a fresh listing, rate
// limited by minRefetch.
func (c *catalog) get(ctx context.Context, up *upstreamRef, k kind, force bool, fetch fetchFunc) (*listing, error) {
	key := listKey{up.cfg.Name, k}
	c.mu.Lock()
	l := c.lists[key]
	now := c.now()
	fresh := l != nil && now.Sub(l.fetched) < c.ttl
	if fresh && force {
		if now.Sub(c.refetch[key]) < minRefetch {
			force = false
		} else {
			c.refetch[key] = now
		}
	}
	c.mu.Unlock()
	if fresh && !force {
		return l, nil
	}
	v, err, _ := c.sf.Do(fmt.Sprintf("%s\x00%d", key.upstream, key.kind), func() (any, error) {
		raw, err := fetch(ctx)
		if err != nil {
			return nil, err
		}
		l := c.build(up, k, raw)
		c.mu.Lock()
		old := c.lists[key]
		c.lists[key] = l
		c.refetch[key] = l.fetched
		c.mu.Unlock()
		if old != nil && old.digest != l.digest && c.onChange != nil {
			c.onChange(up.cfg.Name, k)
		}
		return l, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*listing), nil
}

// invalidate drops an upstream's cached listings of the given kinds, so the
// next use fetches them again (an upstream said its list changed, or the
// config changed).
func (c *catalog) invalidate(upstream string, ks ...kind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range ks {
		delete(c.lists, listKey{upstream, k})
	}
}

// stale marks an upstream's cached listings of the given kinds as due for
// a fetch (the upstream said they changed) and returns the kinds that had
// one. Unlike invalidate, it keeps what was listed, so that the fetch can
// tell whether anything changed and, if so, call onChange.
func (c *catalog) stale(upstream string, ks ...kind) []kind {
	c.mu.Lock()
	defer c.mu.Unlock()
	var had []kind
	for _, k := range ks {
		key := listKey{upstream, k}
		if l := c.lists[key]; l != nil {
			cp := *l // readers may hold l
			cp.fetched = time.Time{}
			c.lists[key] = &cp
			had = append(had, k)
		}
	}
	return had
}

// build rewrites an upstream's raw items to their exposed names. Items that
// are not objects or lack their key are dropped and logged: upstream output
// is untrusted input.
func (c *catalog) build(up *upstreamRef, k kind, raw []json.RawMessage) *listing {
	info := kinds[k]
	l := &listing{index: make(map[string]int, len(raw)), fetched: c.now()}
	h := sha256.New()
	for _, r := range raw {
		h.Write(r)
		h.Write([]byte{0})
	}
	h.Sum(l.digest[:0])
	for _, r := range raw {
		o, err := jsonx.ParseValidObject(r)
		if err != nil {
			c.log.Warn("upstream listed a malformed item", "upstream", up.cfg.Name, "kind", info.noun, "error", err)
			continue
		}
		orig, ok := o.GetString(info.key)
		if !ok || orig == "" {
			c.log.Warn("upstream listed an item without "+info.key, "upstream", up.cfg.Name, "kind", info.noun)
			continue
		}
		var headers []paramHeader
		if k == kindTools {
			// A tool whose x-mcp-header annotations break the rules is
			// left out, as a conforming client must (2026-07-28
			// basic/transports/streamable-http, "Schema Extension").
			if headers, err = paramHeaders(r); err != nil {
				c.log.Warn("upstream tool left out: invalid x-mcp-header", "upstream", up.cfg.Name, "tool", orig, "error", err)
				continue
			}
		}
		exp := k.expose(up.prefix, orig)
		if exp != orig {
			o.SetString(info.key, exp)
		}
		if _, dup := l.index[exp]; dup {
			// The upstream listed one name twice, or two long names
			// shortened to the same one: neither is usable.
			c.reportConflict(k, exp, up.cfg.Name, up.cfg.Name)
			l.index[exp] = -1
			continue
		}
		l.index[exp] = len(l.items)
		l.items = append(l.items, item{upstream: up.cfg.Name, exposed: exp, original: orig, raw: o.Bytes(), headers: headers})
	}
	return l
}

func (c *catalog) reportConflict(k kind, name string, upstreams ...string) {
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
		"kind", kinds[k].noun, "name", name, "upstreams", strings.Join(upstreams, ","))
}

// merge combines several upstreams' listings into one list sorted by exposed
// name. Only items visible(up, item) reports true for take part: an item the
// tenant cannot see neither appears nor conflicts with anything. A name more
// than one visible item has is left out.
func (c *catalog) merge(k kind, ups []*upstreamRef, ls []*listing, visible func(*upstreamRef, *item) bool) []item {
	owners := make(map[string][]string)
	var out []item
	for i, l := range ls {
		if l == nil {
			continue
		}
		for j := range l.items {
			it := &l.items[j]
			if !visible(ups[i], it) {
				continue
			}
			owners[it.exposed] = append(owners[it.exposed], ups[i].cfg.Name)
			out = append(out, *it)
		}
		for name, pos := range l.index {
			if pos < 0 { // listed twice by this upstream
				owners[name] = append(owners[name], ups[i].cfg.Name, ups[i].cfg.Name)
			}
		}
	}
	kept := out[:0]
	for _, it := range out {
		if o := owners[it.exposed]; len(o) > 1 {
			c.reportConflict(k, it.exposed, o...)
			continue
		}
		kept = append(kept, it)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].exposed < kept[j].exposed })
	return kept
}

// resolveError is what resolving an exposed name reports: the name is
// unknown, or several upstreams expose it.
type resolveError struct {
	conflict []string // upstreams exposing the name, when ambiguous
	name     string
	kind     kind
	// deniedBy is the upstream that has the item when the tenant's policy
	// hides it, and deniedName its name there; for audit and metrics only,
	// never for the client.
	deniedBy, deniedName string
}

func (e *resolveError) Error() string {
	if len(e.conflict) > 0 {
		return fmt.Sprintf("%s %q is provided by several upstreams (%s); an admin must give them distinct prefixes",
			kinds[e.kind].noun, e.name, strings.Join(e.conflict, ", "))
	}
	if kinds[e.kind].uri {
		return "Resource not found: " + e.name
	}
	return fmt.Sprintf("Unknown %s: %s", kinds[e.kind].noun, e.name)
}
