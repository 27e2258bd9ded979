package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// Upstream is what the catalog knows of one configured upstream.
type Upstream struct {
	Name   string
	Prefix string // the effective namespace prefix, maybe ""
	// Shared says its listings may be shared by every session (lists:
	// shared, or unset), until the upstream marks one private.
	Shared bool
	// SessionResources says its resources/list is fetched per session even
	// so: lists is unset and the upstream opens a stateful session per
	// client session, in which a tool may create a resource for that
	// session alone (server-everything's session resources). Only an
	// explicit lists: shared shares it.
	SessionResources bool
	// PerTenant says its shared listings are shared within one tenant
	// only: lists is unset and each tenant reaches it through a process
	// of its own (stdio isolation tenant or session), whose lists are that
	// process's.
	PerTenant bool
	// Timeout bounds one walk through its pages.
	Timeout time.Duration
	// Pin is its pin policy and pins; nil: its definitions are not pinned.
	Pin *config.UpstreamPin
}

// NewUpstream returns what the catalog needs of u.
func NewUpstream(u *config.Upstream) Upstream {
	t := u.Timeout.D()
	if t <= 0 {
		t = config.DefaultUpstreamTimeout
	}
	cu := Upstream{Name: u.Name, Prefix: u.EffectivePrefix(), Shared: u.SharedLists(), Timeout: t, Pin: u.Pin}
	if u.Lists == "" {
		// Unset: the cache is keyed by the identity the upstream is
		// reached with. Credentials that differ per tenant or user
		// partition it already (Scope.Partition); a process does here.
		iso := config.IsolationTenant
		if u.Stdio != nil && u.Stdio.Isolation != "" {
			iso = u.Stdio.Isolation
		}
		switch {
		case !u.IsStdio():
			// Each client session opens its own upstream session.
			cu.SessionResources = true
		case iso == config.IsolationTenant:
			cu.PerTenant = true
		case iso == config.IsolationSession:
			cu.PerTenant = true
			cu.SessionResources = true
		}
		// IsolationShared: one process, one session for all; what it lists
		// is the same to everyone who may see the upstream.
	}
	return cu
}

// sharedKind reports whether up's listings of kind k may be shared
// between sessions (see Shared and SessionResources).
func (up *Upstream) sharedKind(k Kind) bool {
	return up.Shared && !(k == Resources && up.SessionResources)
}

// ListLimitError is a walk cut at one of its bounds; Limit names it (a
// telemetry.Limit* value).
type ListLimitError struct {
	Upstream, Method, Limit string
	Bound                   int64
}

func (e *ListLimitError) Error() string {
	return fmt.Sprintf("upstream %s: %s: more than %d %s", e.Upstream, e.Method, e.Bound,
		strings.TrimPrefix(e.Limit, "list_"))
}

// Paginate collects the items of kind k an upstream lists, asking for one
// page at a time with page (params carry the cursor, nil for the first),
// and refusing cursors that loop, more than b.Pages pages, and more than
// b.Bytes bytes of pages together: each page is counted as it arrives, and
// the walk ends at the first that goes over, so what is held never exceeds
// b.Bytes plus one message (itself bounded by the upstream client). The
// caller bounds the time. private reports that a page said cacheScope
// "private" (2026-07-28 server/utilities/caching: all pages of a list
// share one scope, but one private page is enough to keep the whole list
// unshared).
func Paginate(upstream string, k Kind, b Bounds, page func(params json.RawMessage) (json.RawMessage, error)) (items []json.RawMessage, private bool, err error) {
	info := kinds[k]
	var params json.RawMessage
	var seen map[string]bool
	var total int64
	for n := 0; ; n++ {
		if n >= b.Pages {
			return nil, false, &ListLimitError{upstream, info.ListMethod, telemetry.LimitListPages, int64(b.Pages)}
		}
		res, err := page(params)
		if err != nil {
			return nil, false, err
		}
		if total += int64(len(res)); total > b.Bytes {
			return nil, false, &ListLimitError{upstream, info.ListMethod, telemetry.LimitListBytes, b.Bytes}
		}
		o, err := jsonx.ParseValidObject(res)
		if err != nil {
			return nil, false, fmt.Errorf("upstream %s: %s: malformed result: %w", upstream, info.ListMethod, err)
		}
		if v := o.Get(info.Field); v != nil && string(v) != "null" {
			elems, err := jsonx.ParseValidArray(v)
			if err != nil {
				return nil, false, fmt.Errorf("upstream %s: %s: %s is not an array", upstream, info.ListMethod, info.Field)
			}
			items = append(items, elems...)
		}
		if scope, _ := o.GetString("cacheScope"); scope == "private" {
			private = true
		}
		cursor, ok := o.GetString("nextCursor")
		if !ok || cursor == "" {
			return items, private, nil
		}
		if seen[cursor] {
			return nil, false, fmt.Errorf("upstream %s: %s: pagination loops", upstream, info.ListMethod)
		}
		if seen == nil {
			seen = make(map[string]bool)
		}
		seen[cursor] = true
		params, _ = json.Marshal(map[string]string{"cursor": cursor})
	}
}

// A Lookup is one request's way into the catalog.
type Lookup interface {
	// Listing returns up's listing of kind k as the request may use it:
	// [Catalog.Fresh], else [Catalog.Get] with the request's own fetch.
	Listing(ctx context.Context, up *Upstream, k Kind) (*Listing, error)
	// Visible is the tenant's policy: whether it may see, and so use, the
	// item of kind k that up calls original. Lists and calls both ask it.
	Visible(k Kind, up *Upstream, original string) bool
}

// Resolve finds which of ups exposes name (a tool or prompt name, or a
// resource URI in the listing of kind k), and its listed item. It reads
// each candidate upstream's listing once and never asks an upstream for its
// list because of the name: a name a client chooses (unknown, hidden, or
// under a prefix) costs the same lookups, and at most the walk a stale
// listing would cost anyway, so no answer tells hidden from unknown, and
// calling names in a loop re-lists nothing before the TTL.
func (c *Catalog) Resolve(ctx context.Context, k Kind, name string, ups []*Upstream, lk Lookup) (int, *Item, error) {
	denied := -1 // an upstream that has the name, hidden by policy
	var deniedName string
	var owners []int
	var found *Item
	var lastErr error
	cands := 0
	// A name in a configured prefix's namespace is never an unprefixed
	// upstream's: its listing left such names out.
	foreign := c.Foreign(name, kinds[k].URI)
	for i, up := range ups {
		if !k.Owns(up.Prefix, name) || up.Prefix == "" && foreign {
			continue
		}
		cands++
		l, err := lk.Listing(ctx, up, k)
		if err != nil {
			lastErr = err
			continue
		}
		pos, ok := l.index[name]
		switch {
		case !ok:
		case pos < 0 && l.visibleDup(k, up, name, lk):
			owners = append(owners, i, i) // listed twice by one upstream
		case pos < 0:
			denied, deniedName = i, l.dups[name][0]
		case lk.Visible(k, up, l.Items[pos].Original):
			owners = append(owners, i)
			found = &l.Items[pos]
		default:
			denied, deniedName = i, l.Items[pos].Original
		}
	}
	switch {
	case len(owners) == 1:
		return owners[0], found, nil
	case len(owners) > 1:
		var names []string
		for _, o := range owners {
			names = append(names, ups[o].Name)
		}
		c.reportConflict(k, name, names...)
		return -1, nil, &ResolveError{Kind: k, Name: name, Conflict: names}
	case lastErr != nil && cands == 1:
		// The only upstream that could own the name is failing: say so
		// rather than "unknown", whether the name is listed, hidden or
		// unknown there.
		return -1, nil, lastErr
	case denied >= 0:
		// Hidden by policy: to the client, the same as unknown.
		return -1, nil, &ResolveError{Kind: k, Name: name, DeniedBy: ups[denied].Name, DeniedName: deniedName}
	}
	return -1, nil, &ResolveError{Kind: k, Name: name}
}

// ResolveURI finds which of ups serves a resource URI (or a URI template,
// for completions, with k Templates) and the URI it has there. An explicit
// prefix decides; where empty prefixes make several upstreams possible,
// the listings decide. A URI the tenant may not see is, to the client, the
// same as one that does not exist.
func (c *Catalog) ResolveURI(ctx context.Context, k Kind, uri string, ups []*Upstream, lk Lookup) (int, string, error) {
	i, orig, err := c.resolveURIOwner(ctx, k, uri, ups, lk)
	if err == nil && !lk.Visible(k, ups[i], orig) {
		return -1, "", &ResolveError{Kind: k, Name: uri, DeniedBy: ups[i].Name, DeniedName: orig}
	}
	return i, orig, err
}

func (c *Catalog) resolveURIOwner(ctx context.Context, k Kind, uri string, ups []*Upstream, lk Lookup) (int, string, error) {
	var cands, prefixed []int
	// A URI in a configured prefix's namespace is never an unprefixed
	// upstream's, whether or not this tenant sees that prefix's upstream.
	foreign := c.Foreign(uri, true)
	for i, up := range ups {
		if up.Prefix == "" && foreign {
			continue
		}
		if _, ok := UpstreamURI(up.Prefix, uri); ok {
			cands = append(cands, i)
			if up.Prefix != "" {
				prefixed = append(prefixed, i)
			}
		}
	}
	pick := func(i int) (int, string, error) {
		orig, _ := UpstreamURI(ups[i].Prefix, uri)
		return i, orig, nil
	}
	switch len(cands) {
	case 0:
		return -1, "", &ResolveError{Kind: k, Name: uri}
	case 1:
		return pick(cands[0])
	}
	i, it, err := c.Resolve(ctx, k, uri, ups, lk)
	var re *ResolveError
	if errors.As(err, &re) && len(re.Conflict) == 0 && len(prefixed) == 1 {
		return pick(prefixed[0])
	}
	if err != nil {
		return -1, "", err
	}
	return i, it.Original, nil
}

// ChangedKinds returns the kinds of list a list_changed notification is
// about, nil for any other method.
func ChangedKinds(method string) []Kind {
	switch method {
	case kinds[Tools].Changed:
		return []Kind{Tools}
	case kinds[Prompts].Changed:
		return []Kind{Prompts}
	case kinds[Resources].Changed:
		return []Kind{Resources, Templates}
	}
	return nil
}
