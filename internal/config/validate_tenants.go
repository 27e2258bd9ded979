package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/mcpgw/gateway/internal/glob"
)

var tenantIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// aliasRE is a tool name as 2025-11-25 server/tools ("Tool Names")
// recommends, within the 64 characters the gateway shows.
var aliasRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// tenants checks the tenants and their rules.
func (v *validator) tenants(c *Config) {
	if len(c.Auth.Issuers) > 0 && len(c.Tenants) == 0 {
		// Tokens of a tenant that is not configured are refused: with no
		// tenants nobody gets in.
		v.addf("tenants", "at least one tenant is required when auth.issuers are configured")
	}
	upstreams := make(map[string]bool, len(c.Upstreams))
	for _, u := range c.Upstreams {
		upstreams[u.Name] = true
	}
	ids := make(map[string]int) // id -> index of first tenant
	for i := range c.Tenants {
		t := &c.Tenants[i]
		p := fmt.Sprintf("tenants[%d]", i)
		switch {
		case t.ID == "":
			v.addf(p+".id", "is required")
		case !tenantIDRE.MatchString(t.ID):
			v.addf(p+".id", `%q must contain only A-Z, a-z, 0-9, ".", "_" and "-"`, t.ID)
		default:
			if j, ok := ids[t.ID]; ok {
				v.addf(p+".id", "duplicate tenant id %q (also tenants[%d])", t.ID, j)
			} else {
				ids[t.ID] = i
			}
		}

		if ts := t.ToolSearch; ts != nil {
			switch ts.Mode {
			case "", SearchReplace, SearchBeside:
			default:
				v.addf(p+".tool_search.mode", "unknown mode %q: must be %q or %q", ts.Mode, SearchReplace, SearchBeside)
			}
			if ts.MaxResults < 0 || ts.MaxResults > MaxSearchResults {
				v.addf(p+".tool_search.max_results", "must be from 1 to %d", MaxSearchResults)
			}
		}
		listed := make(map[string]int)     // upstream name -> index in t.Upstreams
		aliases := make(map[string]string) // alias -> key path of its entry
		for j := range t.Upstreams {
			tu := &t.Upstreams[j]
			up := fmt.Sprintf("%s.upstreams[%d]", p, j)
			switch {
			case tu.Name == "":
				v.addf(up+".name", "is required")
			case !upstreams[tu.Name]:
				v.addf(up+".name", "unknown upstream %q", tu.Name)
			default:
				if k, ok := listed[tu.Name]; ok {
					v.addf(up+".name", "upstream %q is already listed (%s.upstreams[%d])", tu.Name, p, k)
				} else {
					listed[tu.Name] = j
				}
			}
			v.rules(up+".tools", tu.Tools, true)
			v.rules(up+".prompts", tu.Prompts, false)
			v.rules(up+".resources", tu.Resources, false)

			rs := up + ".required_scopes"
			for _, tool := range slices.Sorted(maps.Keys(tu.RequiredScopes)) {
				kp := keyPath(rs, tool)
				if v.toolKey(kp, tool, tu.Tools) {
					if scopes := tu.RequiredScopes[tool]; len(scopes) == 0 {
						v.addf(kp, "must list at least one scope")
					} else {
						v.scopes(kp, scopes)
					}
				}
			}
			an := up + ".annotations"
			for _, tool := range slices.Sorted(maps.Keys(tu.Annotations)) {
				v.toolKey(keyPath(an, tool), tool, tu.Tools)
			}
			pr := up + ".present"
			for _, tool := range slices.Sorted(maps.Keys(tu.Present)) {
				kp := keyPath(pr, tool)
				if !v.toolKey(kp, tool, tu.Tools) {
					continue
				}
				tp := tu.Present[tool]
				if tp.Alias != "" {
					if !aliasRE.MatchString(tp.Alias) {
						v.addf(kp+".alias", "%q must be 1 to 64 characters of A-Z, a-z, 0-9, \"_\", \"-\" and \".\"", tp.Alias)
					} else if other, ok := aliases[tp.Alias]; ok {
						v.addf(kp+".alias", "%q is already the alias of %s", tp.Alias, other)
					} else {
						aliases[tp.Alias] = kp
					}
				}
				for _, arg := range slices.Sorted(maps.Keys(tp.FixedArguments)) {
					if arg == "" {
						v.addf(kp+".fixed_arguments", "an argument name must not be empty")
					}
				}
			}
			v.headers(up+".headers", tu.Headers)
			if u := c.Upstream(tu.Name); u != nil && u.IsStdio() {
				if len(tu.Headers) > 0 {
					v.addf(up+".headers", "does not apply to a stdio upstream: give the tenant's credentials in env")
				}
				if tu.Auth != nil {
					v.addf(up+".auth", "does not apply to a stdio upstream: give the tenant's credentials in env")
				}
			}
			if tu.Env != nil {
				switch u := c.Upstream(tu.Name); {
				case u == nil:
				case !u.IsStdio():
					v.addf(up+".env", "applies to stdio upstreams only")
				case u.Stdio != nil && u.Stdio.Isolation == IsolationShared:
					v.addf(up+".env", "cannot apply: upstream %q runs one process for all tenants (stdio.isolation: shared)", u.Name)
				default:
					v.env(up+".env", tu.Env)
				}
			}
			if u := c.Upstream(tu.Name); u != nil && tu.Auth != nil {
				v.upstreamAuth(up+".auth", EffectiveAuth(u, tu))
			}
		}
	}
}

// rules checks the patterns of r, at path, and warns about those that can
// never match or look misplaced. The warnings are a cheap heuristic, not a
// proof; they cover the likely mistakes:
//   - an allow pattern without wildcards that a deny pattern matches, or
//     one that a deny pattern repeats exactly: deny wins, so it is dead;
//   - any allow pattern when deny holds "*" (which matches everything,
//     "/" included: see package glob);
//   - in tools (tools is set), a pattern containing "/" (as in "://"):
//     tool names have none, so it was probably meant for resources.
func (v *validator) rules(p string, r Rules, tools bool) {
	denyAll := slices.Contains(r.Deny, "*")
	for i, pat := range r.Allow {
		ip := fmt.Sprintf("%s.allow[%d]", p, i)
		if !v.pattern(ip, pat, tools) {
			continue
		}
		switch {
		case denyAll:
			v.warnf(ip, `pattern %q can never match: deny "*" denies every name it matches`, pat)
		case slices.Contains(r.Deny, pat):
			v.warnf(ip, "pattern %q can never match: deny repeats it", pat)
		case !glob.HasMeta(pat):
			if d, ok := matchAny(r.Deny, pat); ok {
				v.warnf(ip, "pattern %q can never match: deny pattern %q matches it", pat, d)
			}
		}
	}
	for i, pat := range r.Deny {
		v.pattern(fmt.Sprintf("%s.deny[%d]", p, i), pat, tools)
	}
}

// pattern checks one glob pattern and reports whether it is valid.
func (v *validator) pattern(p, pat string, tool bool) bool {
	if pat == "" {
		v.addf(p, "must not be empty")
		return false
	}
	if err := glob.Valid(pat); err != nil {
		v.addf(p, `%q is not a valid glob pattern (path.Match syntax: "*", "?", "[a-z]", "\" escapes)`, pat)
		return false
	}
	if tool && strings.Contains(pat, "/") {
		v.warnf(p, "pattern %q contains %q but tool names have none: did you mean resources?", pat, "/")
	}
	return true
}

// toolKey checks the tool name keying a required_scopes or annotations
// entry at p and reports whether it is valid. It warns when the tool can
// never be shown: no tools.allow pattern matches it (when allow is set), or
// a tools.deny pattern does.
func (v *validator) toolKey(p, tool string, r Rules) bool {
	if tool == "" {
		v.addf(p, "tool name must not be empty")
		return false
	}
	if _, ok := matchAny(r.Allow, tool); r.Allow != nil && !ok {
		v.warnf(p, "tool %q is not matched by any tools.allow pattern: this entry has no effect", tool)
	} else if d, ok := matchAny(r.Deny, tool); ok {
		v.warnf(p, "tool %q is denied by tools.deny pattern %q: this entry has no effect", tool, d)
	}
	return true
}

// matchAny returns the first of patterns that matches name. Invalid
// patterns, reported elsewhere, match nothing.
func matchAny(patterns []string, name string) (string, bool) {
	for _, pat := range patterns {
		if glob.Match(pat, name) {
			return pat, true
		}
	}
	return "", false
}
