package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// guardKindRE is a kind an extra pattern names, as markers show it.
var guardKindRE = regexp.MustCompile(`^[a-z0-9-]{1,48}$`)

// guards checks the content guards of every upstream, tenant and
// tenant's upstream. Extra patterns are compiled here, so that a bad
// regular expression is reported with its line.
func (v *validator) guards(c *Config) {
	for i := range c.Upstreams {
		v.guardList(fmt.Sprintf("upstreams[%d].guards", i), c.Upstreams[i].Guards)
	}
	for i := range c.Tenants {
		t := &c.Tenants[i]
		v.guardList(fmt.Sprintf("tenants[%d].guards", i), t.Guards)
		for k := range t.Upstreams {
			v.guardList(fmt.Sprintf("tenants[%d].upstreams[%d].guards", i, k), t.Upstreams[k].Guards)
		}
	}
}

func (v *validator) guardList(path string, gs []Guard) {
	names := make(map[string]string)
	for i := range gs {
		p := fmt.Sprintf("%s[%d]", path, i)
		g := &gs[i]
		if g.Name != "" {
			if !nameRE.MatchString(g.Name) || len(g.Name) > 64 {
				v.addf(p+".name", "%q must be 1 to 64 characters of a-z, 0-9 and -", g.Name)
			} else if other, ok := names[g.Name]; ok {
				v.addf(p+".name", "duplicate guard name %q (also %s)", g.Name, other)
			} else {
				names[g.Name] = p
			}
		}
		v.guard(p, g)
	}
}

func (v *validator) guard(path string, g *Guard) {
	seen := map[string]bool{}
	for i, ph := range g.Phases {
		pp := fmt.Sprintf("%s.phases[%d]", path, i)
		switch ph {
		case GuardPhaseArguments, GuardPhaseResults, GuardPhaseDefinitions:
			if seen[ph] {
				v.addf(pp, "phase %q is listed twice", ph)
			}
			seen[ph] = true
		default:
			v.addf(pp, "unknown phase %q: must be %q, %q or %q", ph, GuardPhaseArguments, GuardPhaseResults, GuardPhaseDefinitions)
		}
	}
	if g.Phases != nil && len(g.Phases) == 0 {
		v.addf(path+".phases", "is empty: leave the key out for the default phases")
	}
	for i, pat := range g.Tools {
		v.pattern(fmt.Sprintf("%s.tools[%d]", path, i), pat, true)
	}
	switch g.Oversize {
	case "", GuardBlock, GuardPass:
	default:
		v.addf(path+".oversize", "unknown value %q: must be %q or %q", g.Oversize, GuardBlock, GuardPass)
	}
	nonNegative(v, path+".max_bytes", g.MaxBytes)

	if w := g.Webhook; w != nil {
		for _, k := range []struct {
			key string
			set bool
		}{{"detect", g.Detect != nil}, {"patterns", g.Patterns != nil}, {"phrases", g.Phrases != nil}, {"action", g.Action != ""}} {
			if k.set {
				v.addf(path+"."+k.key, "does not apply to a webhook guard (the hook decides): write it in a guard of its own")
			}
		}
		v.guardWebhook(path+".webhook", w)
		return
	}
	if len(g.Detect) == 0 && len(g.Patterns) == 0 {
		v.addf(path, "must set detect, patterns or webhook")
	}
	switch g.Action {
	case "", GuardRedact, GuardBlock, GuardFlag:
	default:
		v.addf(path+".action", "unknown action %q: must be %q, %q or %q", g.Action, GuardRedact, GuardBlock, GuardFlag)
	}
	instructions := false
	detected := map[string]bool{}
	for i, d := range g.Detect {
		dp := fmt.Sprintf("%s.detect[%d]", path, i)
		if _, ok := GuardKinds(d); !ok {
			v.addf(dp, "unknown detector %q: must be a group (%s) or one of its kinds (see docs/guards.md)", d, strings.Join(GuardGroups(), ", "))
			continue
		}
		if detected[d] {
			v.addf(dp, "detector %q is listed twice", d)
		}
		detected[d] = true
		if d == GuardInstructions {
			instructions = true
		}
	}
	if g.Phrases != nil {
		if !instructions {
			v.addf(path+".phrases", "applies to detector %q only: add it to detect", GuardInstructions)
		}
		if len(g.Phrases) == 0 {
			v.addf(path+".phrases", "is empty: leave the key out for the default phrases")
		}
		v.nonEmptyItems(path+".phrases", g.Phrases)
	}
	kinds := map[string]string{}
	for i := range g.Patterns {
		pt := &g.Patterns[i]
		pp := fmt.Sprintf("%s.patterns[%d]", path, i)
		switch {
		case pt.Kind == "":
			v.addf(pp+".kind", "is required: it names what the pattern finds, as in [redacted:KIND]")
		case !guardKindRE.MatchString(pt.Kind):
			v.addf(pp+".kind", "%q must be 1 to 48 characters of a-z, 0-9 and -", pt.Kind)
		case GuardKindGroup(pt.Kind) != "":
			v.addf(pp+".kind", "%q is a built-in kind: choose another name", pt.Kind)
		default:
			if other, ok := kinds[pt.Kind]; ok {
				v.addf(pp+".kind", "duplicate kind %q (also %s)", pt.Kind, other)
			}
			kinds[pt.Kind] = pp
		}
		if pt.Regexp == "" {
			v.addf(pp+".regexp", "is required")
			continue
		}
		re, err := regexp.Compile(pt.Regexp)
		if err != nil {
			v.addf(pp+".regexp", "is not a valid RE2 regular expression: %v", err)
			continue
		}
		if re.MatchString("") {
			v.addf(pp+".regexp", "matches the empty string, so it would match everywhere")
		}
	}
}

func (v *validator) guardWebhook(path string, w *GuardWebhook) {
	if w.URL == "" {
		v.addf(path+".url", "is required")
	} else {
		v.httpURL(path+".url", w.URL)
	}
	v.headers(path+".headers", w.Headers)
	v.upstreamTLS(path+".tls", w.URL, w.TLS)
	nonNegative(v, path+".timeout", w.Timeout)
	nonNegative(v, path+".max_response_bytes", w.MaxResponseBytes)
	nonNegative(v, path+".max_in_flight", w.MaxInFlight)
	if !slices.Contains([]string{"", GuardBlock, GuardAllow}, w.OnError) {
		v.addf(path+".on_error", "unknown value %q: must be %q or %q", w.OnError, GuardBlock, GuardAllow)
	}
}
