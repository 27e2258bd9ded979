// Package catalog owns what a tenant sees of its upstreams: each
// upstream's lists (tools, prompts, resources, resource templates), cached
// per replica and already rewritten to their exposed names; their merge
// into the one list a tenant sees; and the way back from an exposed name
// or URI to the upstream that owns it and the name it has there.
//
// Both answers come from the same data, so a tool or prompt name that is
// not listed is not routable, and a name two upstreams expose (possible
// with empty prefixes) is neither listed nor routable: it is a conflict,
// reported to the admin, never silently shadowed. Resource URIs are the
// exception: a server may serve resources it does not list (templates,
// links in results), so a URI only one upstream could own goes to it by
// its prefix, and the listings decide only among several candidates. Namespacing (names.go), the hygiene of listed
// names, and what a tool's definition says about headers (xheader.go) live
// here too.
//
// The catalog never talks to an upstream: a request hands it a [FetchFunc]
// (and a [Lookup]), so every rule here is tested with messages in and the
// aggregated answer out (testdata/*.txtar). It decides nothing about
// tenants either: the policy comes in through [Lookup.Visible].
package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// Item is one listed tool, prompt, resource or template.
type Item struct {
	Upstream string
	Exposed  string
	Original string
	Raw      json.RawMessage // the upstream's object with the exposed key
	// Headers are a tool's x-mcp-header annotations, parsed once here.
	Headers []ParamHeader
	// schemas are the compiled schemas of the tools of the Listing the
	// item came in (see schema.go); nil for other kinds.
	schemas *schemaCache
	// pin is the hash of its definition (see PinOf), for an upstream with
	// a pin policy.
	pin string
}

// Listing is one upstream's list of one kind.
type Listing struct {
	Items []Item
	index map[string]int // exposed name → position in Items; -1 for a duplicate
	// dups holds, for each exposed name listed more than once, the
	// original of each copy: the policy decides whether the tenant sees
	// the clash at all.
	dups    map[string][]string
	fetched time.Time
	digest  [32]byte // of the items as listed, to notice a change
	size    int      // bytes of the items as listed
	// private marks a shared entry that holds no items: the upstream said
	// its list of this kind is not to be shared (2026-07-28 cacheScope
	// "private"), so every session gets its own from now on.
	private bool
}

// listKey names a cached Listing. scope is "" for a Listing shared by every
// session; "\x00" and a partition for one shared by the sessions of that
// partition (see Scope); else the id of the one gateway session it was
// fetched for and may be served to.
type listKey struct {
	upstream string
	kind     Kind
	scope    string
}

// A Scope says which cached listings a request may be served.
type Scope struct {
	// Partition names the identity the request reaches the upstream with
	// ("" when every caller reaches it as the same one): listings shared
	// between sessions are shared only within one partition.
	Partition string
	// Tenant is the request's tenant: listings of an upstream reached
	// through a process of the tenant's own (Upstream.PerTenant) are
	// shared only within it.
	Tenant string
	// Session is the gateway session ("" outside any), whose own listings
	// serve upstreams with lists per session or marked private.
	Session string
}

// shared is the key of the listing of kind k of up shared in sc's
// partition (and tenant, for an upstream reached per tenant). c.mu is
// held.
func (c *Catalog) shared(up *Upstream, k Kind, sc Scope) listKey {
	if up.PerTenant && sc.Tenant != "" {
		// The tenant's own scope string is made once, not on every call.
		ts, ok := c.tenantScopes[sc.Tenant]
		if !ok {
			ts = "\x00t:" + sc.Tenant
			if len(c.tenantScopes) >= maxTenantScopes {
				clear(c.tenantScopes)
			}
			c.tenantScopes[sc.Tenant] = ts
		}
		if sc.Partition == "" {
			return listKey{up.Name, k, ts}
		}
		return listKey{up.Name, k, ts + "\x00" + sc.Partition}
	}
	if sc.Partition == "" {
		return listKey{up.Name, k, ""}
	}
	return listKey{up.Name, k, "\x00" + sc.Partition}
}

// sharedKey reports whether key is one shared by sessions.
func sharedKey(key listKey) bool { return key.scope == "" || key.scope[0] == 0 }

// Bounds bound one walk through an upstream's pages.
type Bounds struct {
	Pages int
	Bytes int64
}

// FetchFunc fetches the raw items of one kind from one upstream, following
// pagination within b. private reports that the upstream marked a page
// cacheScope "private".
type FetchFunc func(ctx context.Context, b Bounds) (items []json.RawMessage, private bool, err error)

// Bounds on the catalog itself.
const (
	// listWait is how long a list or a call waits for an upstream's
	// Listing, counted from when its walk started. A slower upstream is
	// left out of that answer (a list shows the others' items; a call to
	// a name only it could own fails), and its walk goes on in the
	// background, bounded by the upstream's timeout, for the next request.
	// A later request never waits past this point of a walk: an upstream
	// that lists slowly costs each list at most listWait once.
	listWait = 5 * time.Second
	// maxScopedLists and maxScopedBytes bound the listings cached for one
	// session each (upstreams with lists: per_session, or that said
	// cacheScope private), all sessions together; beyond them the oldest
	// are dropped. One principal can fill them, which costs the others
	// upstream fetches, never a wrong answer.
	maxScopedLists = 1024
	maxScopedBytes = 64 << 20
	// minBackoff and maxBackoff bound how long a failed walk is
	// remembered: the first failure for minBackoff, each next one twice as
	// long, up to min(list_cache_ttl, maxBackoff). Until then, lists and
	// calls get the failure without asking the upstream.
	minBackoff = time.Second
	maxBackoff = time.Minute
	// maxFailures bounds the failures remembered, all scopes together.
	maxFailures = 4096
	// maxTenantScopes bounds the tenants' scope strings kept (tenants are
	// configured, so this is only a backstop).
	maxTenantScopes = 4096
)

// walk is one fetch of one Listing in progress. Its result is set before
// done is closed.
type walk struct {
	done    chan struct{}
	start   time.Time
	l       *Listing
	err     error
	private bool   // the upstream marked the result private
	scope   string // the session the walk was fetched under
}

// failure is a remembered failed walk.
type failure struct {
	err     error
	until   time.Time
	backoff time.Duration
}

// errListSlow is what a request gets for an upstream whose Listing did not
// arrive within listWait.
type errListSlow struct{ upstream, method string }

func (e *errListSlow) Error() string {
	return fmt.Sprintf("upstream %s: %s not answered within %s", e.upstream, e.method, listWait)
}

type Catalog struct {
	log     *slog.Logger
	metrics *telemetry.Metrics
	now     func() time.Time
	// OnChange, if set, is called when a refetched Listing differs from
	// the one it replaces.
	OnChange func(upstream string, k Kind)
	// OnPin, if set, is called for each item whose definition newly stands
	// differently against its pin than when last listed (see PinStatus).
	OnPin func(PinStatus)

	// ctx ends the walks in the background when the catalog closes; wg
	// waits for them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	ttl      time.Duration
	bounds   Bounds
	prefixes []string // every configured non-empty prefix
	closed   bool
	lists    map[listKey]*Listing
	scoped   map[string][]listKey // session → its cached listings
	nScoped  int
	scopedSz int
	walks    map[listKey]*walk
	failures map[listKey]*failure
	// tenantScopes holds the scope string of each tenant's listings of
	// upstreams reached per tenant (see shared).
	tenantScopes map[string]string
	reported     map[string]time.Time // conflicts logged recently
	// pins holds, by upstream and kind, the items of the last Listing
	// built whose definitions do not match their pins, at most
	// maxPinStatus each (quarantined first), and how many were
	// quarantined in all.
	pins map[pinKey]*pinEntry
}

type pinKey struct {
	upstream string
	kind     Kind
}

type pinEntry struct {
	items       []PinStatus
	quarantined int
}

// maxPinStatus bounds the mismatches kept per upstream and kind, for
// /readyz, explain and telling new ones from known ones; beyond it they
// are counted, and reported each time they are listed. A variable, so
// that a test can exhaust it.
var maxPinStatus = 256

func New(ttl time.Duration, log *slog.Logger, m *telemetry.Metrics) *Catalog {
	ctx, cancel := context.WithCancel(context.Background())
	return &Catalog{
		ttl: ttl, log: log, metrics: m, now: time.Now,
		ctx: ctx, cancel: cancel,
		bounds:       Bounds{Pages: config.DefaultListPages, Bytes: config.DefaultListBytes},
		lists:        make(map[listKey]*Listing),
		scoped:       make(map[string][]listKey),
		walks:        make(map[listKey]*walk),
		failures:     make(map[listKey]*failure),
		tenantScopes: make(map[string]string),
		reported:     make(map[string]time.Time),
		pins:         make(map[pinKey]*pinEntry),
	}
}

// Configure takes what the catalog needs from a config: the list TTL, the
// walk bounds, and the prefixes, which decide what an unprefixed upstream
// may list (a change drops every Listing, to filter them again).
func (c *Catalog) Configure(cfg *config.Config) {
	var prefixes []string
	for i := range cfg.Upstreams {
		if p := cfg.Upstreams[i].EffectivePrefix(); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	sort.Strings(prefixes)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ttl = cfg.Server.ListCacheTTL.D()
	c.bounds = Bounds{Pages: cfg.Limits.ListPages, Bytes: cfg.Limits.ListBytes}
	if c.bounds.Pages <= 0 {
		c.bounds.Pages = config.DefaultListPages
	}
	if c.bounds.Bytes <= 0 {
		c.bounds.Bytes = config.DefaultListBytes
	}
	if !slices.Equal(prefixes, c.prefixes) {
		c.prefixes = prefixes
		clear(c.lists)
		clear(c.scoped)
		c.nScoped, c.scopedSz = 0, 0
	}
}

// Foreign reports whether key lies in the namespace of a configured
// non-empty prefix (see foreignNamespace), so that no unprefixed upstream
// may have it.
func (c *Catalog) Foreign(key string, uri bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return foreignNamespace(c.prefixes, key, uri)
}

// Close ends the walks in progress and waits for them.
func (c *Catalog) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// key returns where the Listing of kind k of up is cached for a request of
// scope sc: the entry shared in its partition, unless up's lists are per
// session or the upstream marked them private. ok is false when there is
// no such place (a per-session Listing wanted outside any session).
func (c *Catalog) key(up *Upstream, k Kind, sc Scope) (key listKey, ok bool) {
	key = c.shared(up, k, sc)
	if up.sharedKind(k) {
		if l := c.lists[key]; l == nil || !l.private {
			return key, true
		}
	}
	key.scope = sc.Session
	return key, sc.Session != ""
}

// Fresh returns the cached Listing of kind k of up for a request of scope
// sc if it is fresh, else nil.
func (c *Catalog) Fresh(up *Upstream, k Kind, sc Scope) *Listing {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := c.shared(up, k, sc)
	l := c.lists[key] // one lookup on every call's path, for a shared list
	if !up.sharedKind(k) || l != nil && l.private {
		// As key does: the session's own Listing.
		if sc.Session == "" {
			return nil
		}
		key.scope = sc.Session
		l = c.lists[key]
	}
	if l == nil || l.private || c.now().Sub(l.fetched) >= c.ttl {
		return nil
	}
	return l
}

// Get returns up's Listing of kind k for a request of scope sc: from the cache while it is fresh, else the remembered failure
// while it lasts, else from a walk, which it starts unless one is running.
// It waits for the walk until listWait after the walk started, or until
// ctx ends, whichever is first; the walk itself goes on, owned by the
// catalog, bounded by the upstream's timeout, so that the next request has
// it. No client-chosen value causes a walk: only a Listing that is missing
// or older than the TTL does.
func (c *Catalog) Get(ctx context.Context, up *Upstream, k Kind, sc Scope, fetch FetchFunc) (*Listing, error) {
	c.mu.Lock()
	key, ok := c.key(up, k, sc)
	if !ok {
		c.mu.Unlock()
		return nil, fmt.Errorf("upstream %s: %s: lists are per session", up.Name, kinds[k].ListMethod)
	}
	now := c.now()
	if l := c.lists[key]; l != nil && !l.private && now.Sub(l.fetched) < c.ttl {
		c.mu.Unlock()
		return l, nil
	}
	if f := c.failures[key]; f != nil && now.Before(f.until) {
		c.mu.Unlock()
		return nil, f.err
	}
	w := c.walks[key]
	if w == nil {
		if c.closed {
			c.mu.Unlock()
			return nil, errors.New("catalog: closed")
		}
		w = &walk{done: make(chan struct{}), start: now, scope: sc.Session}
		c.walks[key] = w
		c.wg.Add(1)
		go c.run(ctx, up, k, key, w, fetch)
	}
	c.mu.Unlock()

	timer := time.NewTimer(listWait - c.now().Sub(w.start))
	defer timer.Stop()
	select {
	case <-w.done:
	case <-timer.C:
		return nil, &errListSlow{up.Name, kinds[k].ListMethod}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if w.private && w.scope != sc.Session {
		// A shared walk came back private: it belongs to the session it
		// was fetched under. Any other session fetches its own (the key
		// now says so).
		return c.Get(ctx, up, k, sc, fetch)
	}
	return w.l, w.err
}

// run is one walk: fetch within the bounds and the upstream's timeout for
// the whole walk, then cache the Listing or remember the failure.
func (c *Catalog) run(ctx context.Context, up *Upstream, k Kind, key listKey, w *walk, fetch FetchFunc) {
	defer c.wg.Done()
	timeout := up.Timeout
	if timeout <= 0 {
		timeout = config.DefaultUpstreamTimeout
	}
	// Detached from the request that started it (others may be waiting,
	// and the next request wants the result), but not from the catalog.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()

	c.mu.Lock()
	b := c.bounds
	c.mu.Unlock()
	raw, private, err := fetch(ctx, b)
	var le *ListLimitError
	switch {
	case errors.As(err, &le):
		c.metrics.LimitRejection(le.Limit, "")
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && c.ctx.Err() == nil:
		c.metrics.LimitRejection(telemetry.LimitListTime, "")
		err = fmt.Errorf("upstream %s: %s: not complete within the upstream timeout (%s)", up.Name, kinds[k].ListMethod, timeout)
	}
	var l *Listing
	if err == nil {
		l = c.build(up, k, raw)
	}

	c.mu.Lock()
	var old *Listing
	switch {
	case c.walks[key] != w:
		// invalidate dropped the walk (the upstream's config changed
		// meanwhile): its waiters get what it found, the cache does not.
	case err != nil:
		if c.ctx.Err() == nil && !caller(err) {
			c.fail(key, err)
		}
	case private && sharedKey(key):
		// cacheScope "private" (2026-07-28 server/utilities/caching,
		// "Cache Scope Field"): never in the shared cache. The marker
		// sends every session to its own Listing from now on; this one
		// goes to the session it was fetched under, if any.
		c.store(key, &Listing{private: true, fetched: l.fetched})
		if w.scope != "" {
			c.store(listKey{key.upstream, key.kind, w.scope}, l)
		}
	default:
		delete(c.failures, key)
		if sharedKey(key) {
			// Only a shared Listing's change (in a partition too) is
			// news for the sessions that share it; a session's own is
			// refetched when it asks.
			old = c.lists[key]
		}
		c.store(key, l)
	}
	if c.walks[key] == w {
		delete(c.walks, key)
	}
	c.mu.Unlock()
	w.l, w.err, w.private = l, err, private
	close(w.done)
	if old != nil && !old.private && old.digest != l.digest && c.OnChange != nil {
		c.OnChange(up.Name, k)
	}
}

// store caches l under key, keeping the per-session listings within their
// bounds. c.mu is held.
func (c *Catalog) store(key listKey, l *Listing) {
	if key.scope == "" {
		c.lists[key] = l
		return
	}
	if old := c.lists[key]; old != nil {
		c.scopedSz -= old.size
		c.scopedSz += l.size
		c.lists[key] = l
	} else {
		c.lists[key] = l
		c.scoped[key.scope] = append(c.scoped[key.scope], key)
		c.nScoped++
		c.scopedSz += l.size
	}
	for c.nScoped > maxScopedLists || c.scopedSz > maxScopedBytes {
		var oldest listKey
		var at time.Time
		for s, keys := range c.scoped {
			for _, k := range keys {
				if l := c.lists[k]; l != nil && (at.IsZero() || l.fetched.Before(at)) {
					oldest, at = listKey{k.upstream, k.kind, s}, l.fetched
				}
			}
		}
		if at.IsZero() {
			break
		}
		c.dropScoped(oldest)
	}
}

// dropScoped removes one per-session Listing. c.mu is held.
func (c *Catalog) dropScoped(key listKey) {
	if l := c.lists[key]; l != nil {
		c.nScoped--
		c.scopedSz -= l.size
		delete(c.lists, key)
	}
	keys := slices.DeleteFunc(c.scoped[key.scope], func(k listKey) bool { return k == key })
	if len(keys) == 0 {
		delete(c.scoped, key.scope)
	} else {
		c.scoped[key.scope] = keys
	}
}

// EndSession drops what was cached for a gateway session that ended.
func (c *Catalog) EndSession(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, key := range c.scoped[id] {
		if l := c.lists[key]; l != nil {
			c.nScoped--
			c.scopedSz -= l.size
			delete(c.lists, key)
		}
		delete(c.failures, key)
	}
	delete(c.scoped, id)
}

// caller reports whether err is the caller's to fix, not the upstream's
// failure (say, a consent the user has yet to give): it is not
// remembered, so that the next request, once fixed, gets through.
func caller(err error) bool {
	var ce interface{ CallerMustAct() bool }
	return errors.As(err, &ce) && ce.CallerMustAct()
}

// fail remembers a failed walk, for twice as long as the last time, so
// that a failing upstream is asked again at a bounded rate whatever the
// clients do. c.mu is held.
func (c *Catalog) fail(key listKey, err error) {
	f := c.failures[key]
	if f == nil {
		if len(c.failures) >= maxFailures {
			now := c.now()
			for k, f := range c.failures {
				if !now.Before(f.until) || k.scope != "" {
					delete(c.failures, k)
				}
			}
		}
		f = &failure{}
		c.failures[key] = f
	}
	limit := min(c.ttl, maxBackoff)
	f.backoff = min(max(2*f.backoff, minBackoff), limit)
	f.err = err
	f.until = c.now().Add(f.backoff)
}

// Invalidate drops an upstream's cached listings of the given kinds, for
// every session, and any failure remembered, so the next use fetches them
// again (the config changed).
func (c *Catalog) Invalidate(upstream string, ks ...Kind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropPins(upstream, ks...)
	for _, k := range ks {
		delete(c.lists, listKey{upstream, k, ""})
		delete(c.failures, listKey{upstream, k, ""})
	}
	for _, keys := range c.scoped {
		// A copy: dropScoped deletes from the slice being ranged over.
		for _, key := range slices.Clone(keys) {
			if key.upstream == upstream && slices.Contains(ks, key.kind) {
				c.dropScoped(key)
			}
		}
	}
	for key := range c.failures {
		if key.upstream == upstream {
			delete(c.failures, key)
		}
	}
	for key := range c.walks {
		if key.upstream == upstream && slices.Contains(ks, key.kind) {
			delete(c.walks, key)
		}
	}
}

// Stale marks an upstream's cached listings of the given kinds, shared and
// per session, as due for a fetch (the upstream said they changed) and
// returns the kinds that had a shared one, and apart those that had one
// shared within a partition (see Scope). Unlike invalidate, it keeps what
// was listed, so that the fetch can tell whether anything changed and, if
// so, call OnChange. A remembered failure stays: an upstream cannot skip
// its backoff by announcing changes.
func (c *Catalog) Stale(upstream string, ks ...Kind) (had, partitioned []Kind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mark := func(key listKey) bool {
		l := c.lists[key]
		if l == nil || l.private {
			return false
		}
		cp := *l // readers may hold l
		cp.fetched = time.Time{}
		c.lists[key] = &cp
		return true
	}
	for _, k := range ks {
		if mark(listKey{upstream, k, ""}) {
			had = append(had, k)
		}
	}
	for _, keys := range c.scoped {
		for _, key := range keys {
			if key.upstream == upstream && slices.Contains(ks, key.kind) {
				if mark(key) && sharedKey(key) && !slices.Contains(partitioned, key.kind) {
					partitioned = append(partitioned, key.kind)
				}
			}
		}
	}
	return had, partitioned
}

// build rewrites an upstream's raw items to their exposed names. Items that
// are not objects or lack their key are dropped and logged: upstream output
// is untrusted input. So are keys that could disguise themselves or claim
// another upstream's namespace (see names.go); each such reason is logged
// once per Listing and each key counted.
func (c *Catalog) build(up *Upstream, k Kind, raw []json.RawMessage) *Listing {
	info := kinds[k]
	l := &Listing{index: make(map[string]int, len(raw)), fetched: c.now()}
	h := sha256.New()
	for _, r := range raw {
		h.Write(r)
		h.Write([]byte{0})
		l.size += len(r)
	}
	h.Sum(l.digest[:0])
	c.mu.Lock()
	var prefixes []string
	if up.Prefix == "" {
		prefixes = c.prefixes
	}
	c.mu.Unlock()
	var mismatches []PinStatus
	if up.Pin != nil && k.Pinnable() {
		defer func() { c.notePins(up.Name, k, mismatches) }()
	}
	var schemas *schemaCache
	if k == Tools {
		schemas = &schemaCache{log: c.log, upstream: up.Name}
	}
	var flagged map[string][]string // reason → keys
	flag := func(reason, key string) {
		c.metrics.NameFlagged(up.Name, reason)
		if flagged == nil {
			flagged = make(map[string][]string)
		}
		flagged[reason] = append(flagged[reason], key)
	}
	for _, r := range raw {
		o, err := jsonx.ParseValidObject(r)
		if err != nil {
			c.log.Warn("upstream listed a malformed item", "upstream", up.Name, "kind", info.Noun, "error", err)
			continue
		}
		orig, ok := o.GetString(info.Key)
		if !ok || orig == "" {
			c.log.Warn("upstream listed an item without "+info.Key, "upstream", up.Name, "kind", info.Noun)
			continue
		}
		if hasHiddenChar(orig) {
			flag(telemetry.NameControlCharacter, orig)
			continue
		}
		if foreignNamespace(prefixes, orig, info.URI) {
			flag(telemetry.NameForeignNamespace, orig)
			continue
		}
		if k == Tools && !standardToolName(orig) {
			flag(telemetry.NameNonstandard, orig) // a SHOULD: kept
		}
		var headers []ParamHeader
		if k == Tools {
			// A tool whose x-mcp-header annotations break the rules is
			// left out, as a conforming client must (2026-07-28
			// basic/transports/streamable-http, "Schema Extension").
			if headers, err = ParamHeaders(r); err != nil {
				c.log.Warn("upstream tool left out: invalid x-mcp-header", "upstream", up.Name, "tool", orig, "error", err)
				continue
			}
		}
		var pin string
		if up.Pin != nil && k.Pinnable() {
			var st *PinStatus
			if pin, st = CheckPin(up.Pin, up.Name, k, orig, r); st != nil {
				mismatches = append(mismatches, *st)
				if st.Quarantined {
					continue
				}
			}
		}
		exp := k.Expose(up.Prefix, orig)
		if exp != orig {
			o.SetString(info.Key, exp)
		}
		if k == Tools {
			// The MCP Apps link to the tool's UI resource, which the
			// client reads back through the gateway (see uris.go).
			if m, ok := ExposeUIMeta(o.Get("_meta"), up.Prefix); ok {
				o.Set("_meta", m)
			}
		}
		if pos, dup := l.index[exp]; dup {
			// The upstream listed one name twice, or two long names
			// shortened to the same one: neither is usable.
			c.reportConflict(k, exp, up.Name, up.Name)
			if l.dups == nil {
				l.dups = make(map[string][]string)
			}
			if pos >= 0 {
				l.dups[exp] = []string{l.Items[pos].Original}
				l.index[exp] = -1
			}
			l.dups[exp] = append(l.dups[exp], orig)
			continue
		}
		l.index[exp] = len(l.Items)
		l.Items = append(l.Items, Item{Upstream: up.Name, Exposed: exp, Original: orig, Raw: o.Bytes(), Headers: headers, schemas: schemas, pin: pin})
	}
	for reason, keys := range flagged {
		msg := "upstream listed " + info.Noun + " " + info.Key + "s in another upstream's namespace: left out"
		switch reason {
		case telemetry.NameControlCharacter:
			msg = "upstream listed " + info.Noun + " " + info.Key + "s with control, format or bidi characters: left out"
		case telemetry.NameNonstandard:
			msg = "upstream listed tool names outside the recommended characters (kept)"
		}
		// Quoted, so that the characters that got them flagged cannot
		// forge log lines either.
		c.log.Warn(msg, "upstream", up.Name, "count", len(keys), "example", strconv.QuoteToASCII(truncate(keys[0], 80)))
	}
	return l
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
