// Package tenant turns a principal's tenant id into that tenant's view of
// the configuration: which upstreams exist for it, and which of their tools,
// prompts and resources it may see and use.
//
// # One decision
//
// [View.Decide] is the only policy function. Lists filter with it and calls
// enforce it, so an item a tenant cannot see is an item it cannot use, and
// the reason it gives is the same one `gateway explain` prints. Decisions
// are made on the upstream's original names and URIs, never on anything an
// upstream claims about an item (annotations are hints, not policy).
package tenant

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/glob"
)

// DefaultID is the tenant of anonymous callers (auth.anonymous).
const DefaultID = "default"

// ErrUnknown is returned for a tenant id the config does not name.
var ErrUnknown = errors.New("unknown tenant")

// Kind is what a rule applies to.
type Kind int

const (
	Tool Kind = iota
	Prompt
	Resource // resources and resource templates, by URI
)

func (k Kind) String() string { return [...]string{"tools", "prompts", "resources"}[k] }

// A View is what one tenant may see and use. A View is immutable and safe
// for concurrent use.
type View struct {
	ID string
	// Upstreams are the names of the upstreams that exist for the tenant, in
	// config order.
	Upstreams []string

	rules map[string]*upstreamRules // by upstream; nil entry: everything
	// aliases maps an alias to the tool it names.
	aliases map[string]ToolRef
	// Search is the tenant's tool search; nil: none.
	Search *config.ToolSearch
}

// ToolRef names a tool by its upstream and its original name there.
type ToolRef struct{ Upstream, Original string }

type upstreamRules struct {
	sets        [3]config.Rules // by Kind
	scopes      map[string][]string
	annotations map[string]config.ToolAnnotations
	present     map[string]config.ToolPresentation
}

// Allows reports whether upstream name exists for the tenant.
func (v *View) Allows(name string) bool { return slices.Contains(v.Upstreams, name) }

// A Decision is the outcome of a policy check and the rule that decided it.
type Decision struct {
	Allowed bool
	// Rule names what decided, for admins: `tools.deny[0] "delete_*"`,
	// `no allow list: everything`, `upstream not listed for tenant`.
	Rule string
}

// Decide says whether the tenant may see and use the item of kind k that
// upstream calls name (a tool or prompt name, or a resource URI or URI
// template). Deny wins over allow; an absent allow list allows everything.
func (v *View) Decide(k Kind, upstream, name string) Decision {
	if !v.Allows(upstream) {
		return Decision{false, "upstream not listed for tenant"}
	}
	r := v.rules[upstream]
	if r == nil {
		return Decision{true, "no rules for this upstream: everything"}
	}
	set := r.sets[k]
	candidates := []string{name}
	if k == Resource {
		// A URI is decided the way an upstream might read it: as written,
		// percent-decoded once (an allowed prefix followed by %2e%2e%2f
		// must not reach what it decodes to), and in canonical form
		// (canonicalURI: FILE:, file:////, file:/ and file://localhost/
		// all name file:///). Deny rules match any form; an allow rule
		// must match every form. A URI with a dot segment is refused
		// outright.
		dec, err := url.PathUnescape(name)
		if err != nil || hasDotSegment(dec) {
			return Decision{false, "resource URI with dot segments or bad escapes"}
		}
		if dec != name {
			candidates = append(candidates, dec)
		}
		if c := canonicalURI(dec); c != dec && c != name {
			candidates = append(candidates, c)
		}
	}
	for i, p := range set.Deny {
		for _, c := range candidates {
			if glob.Match(p, c) {
				return Decision{false, fmt.Sprintf("%s.deny[%d] %q", k, i, p)}
			}
		}
	}
	if set.Allow == nil {
		return Decision{true, fmt.Sprintf("no %s.allow list: everything not denied", k)}
	}
	for i, p := range set.Allow {
		ok := true
		for _, c := range candidates {
			ok = ok && glob.Match(p, c)
		}
		if ok {
			return Decision{true, fmt.Sprintf("%s.allow[%d] %q", k, i, p)}
		}
	}
	return Decision{false, fmt.Sprintf("matches no %s.allow pattern", k)}
}

// canonicalURI returns u normalized as RFC 3986 §6.2.2 does, and as
// an upstream that normalizes URIs before it serves them might: the scheme
// and the authority lower-cased (§6.2.2.1), runs of '/' in the path
// collapsed to one, and for file URIs the forms RFC 8089 §2 and Appendix
// E.2 make equal to an empty authority ("file:/p", "file://localhost/p")
// written as "file:///p". Dot segments are not removed here: Decide refuses
// them. It returns u itself when u is canonical already.
func canonicalURI(u string) string {
	colon := strings.IndexByte(u, ':')
	if colon <= 0 || !isScheme(u[:colon]) {
		return u
	}
	// strings.ToLower returns its argument when it has no upper case: a
	// canonical URI (the usual case) costs no allocation.
	scheme, rest := strings.ToLower(u[:colon]), u[colon+1:]
	changed := scheme != u[:colon]
	auth, hasAuth := "", false
	if strings.HasPrefix(rest, "//") {
		end := strings.IndexAny(rest[2:], "/?#")
		if end < 0 {
			end = len(rest) - 2
		}
		auth, rest, hasAuth = strings.ToLower(rest[2:2+end]), rest[2+end:], true
		changed = changed || auth != u[colon+3:colon+3+end]
	}
	if scheme == "file" {
		if auth == "localhost" {
			auth, changed = "", true
		}
		if !hasAuth && strings.HasPrefix(rest, "/") {
			hasAuth, changed = true, true
		}
	}
	path, tail := rest, ""
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		path, tail = rest[:i], rest[i:]
	}
	if strings.Contains(path, "//") {
		changed = true
		for strings.Contains(path, "//") {
			path = strings.ReplaceAll(path, "//", "/")
		}
	}
	if !changed {
		return u
	}
	out := scheme + ":"
	if hasAuth {
		out += "//" + auth
	}
	return out + path + tail
}

// isScheme reports whether s is an RFC 3986 §3.1 scheme:
// ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20 // ASCII lower case, for letters
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (s[i] >= '0' && s[i] <= '9' || s[i] == '+' || s[i] == '-' || s[i] == '.'):
		default:
			return false
		}
	}
	return s != ""
}

func hasDotSegment(s string) bool {
	for _, seg := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// RequiredScopes returns the scopes a token must carry, on top of
// auth.required_scopes, to call the tool upstream calls name.
func (v *View) RequiredScopes(upstream, name string) []string {
	if r := v.rules[upstream]; r != nil {
		return r.scopes[name]
	}
	return nil
}

// Annotations returns the tool annotations the admin asserted for the tool
// upstream calls name, if any.
func (v *View) Annotations(upstream, name string) (config.ToolAnnotations, bool) {
	if r := v.rules[upstream]; r != nil {
		a, ok := r.annotations[name]
		return a, ok
	}
	return config.ToolAnnotations{}, false
}

func newView(cfg *config.Config, t *config.Tenant) *View {
	v := &View{ID: t.ID, rules: make(map[string]*upstreamRules), Search: t.ToolSearch}
	if t.Upstreams == nil {
		for _, u := range cfg.Upstreams {
			v.Upstreams = append(v.Upstreams, u.Name)
		}
		return v
	}
	// Config order, not the tenant's listing order, so every tenant sees
	// upstreams in one order.
	for _, u := range cfg.Upstreams {
		j := slices.IndexFunc(t.Upstreams, func(tu config.TenantUpstream) bool { return tu.Name == u.Name })
		if j < 0 {
			continue
		}
		tu := &t.Upstreams[j]
		v.Upstreams = append(v.Upstreams, u.Name)
		v.rules[u.Name] = &upstreamRules{
			sets:        [3]config.Rules{tu.Tools, tu.Prompts, tu.Resources},
			scopes:      tu.RequiredScopes,
			annotations: tu.Annotations,
			present:     tu.Present,
		}
		for orig, p := range tu.Present {
			if p.Alias != "" {
				if v.aliases == nil {
					v.aliases = make(map[string]ToolRef)
				}
				v.aliases[p.Alias] = ToolRef{u.Name, orig}
			}
		}
	}
	return v
}

// Presentation returns how the tenant is shown the tool upstream calls
// name, if the admin said (see config.ToolPresentation).
func (v *View) Presentation(upstream, name string) (config.ToolPresentation, bool) {
	if r := v.rules[upstream]; r != nil {
		p, ok := r.present[name]
		return p, ok
	}
	return config.ToolPresentation{}, false
}

// Presents reports whether the tenant is shown any tool differently.
func (v *View) Presents() bool {
	for _, r := range v.rules {
		if r != nil && len(r.present) > 0 {
			return true
		}
	}
	return false
}

// Alias returns the tool the tenant calls alias, if that is an alias.
func (v *View) Alias(alias string) (ToolRef, bool) {
	t, ok := v.aliases[alias]
	return t, ok
}

// Set is every tenant's view of one config, built once per config so the
// hot path does not rebuild views per request.
type Set struct {
	views map[string]*View
}

// NewSet builds the views of every tenant of cfg.
func NewSet(cfg *config.Config) *Set {
	s := &Set{views: make(map[string]*View)}
	if len(cfg.Tenants) == 0 {
		// Only possible with auth.anonymous: the default tenant sees every
		// upstream, with no rules.
		s.views[DefaultID] = newView(cfg, &config.Tenant{ID: DefaultID})
		return s
	}
	for i := range cfg.Tenants {
		s.views[cfg.Tenants[i].ID] = newView(cfg, &cfg.Tenants[i])
	}
	return s
}

// Get returns tenant id's view, or ErrUnknown.
func (s *Set) Get(id string) (*View, error) {
	if v, ok := s.views[id]; ok {
		return v, nil
	}
	return nil, ErrUnknown
}

// Known reports whether id is a configured tenant.
func (s *Set) Known(id string) bool { _, ok := s.views[id]; return ok }
