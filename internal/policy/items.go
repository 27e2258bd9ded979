package policy

import (
	"context"

	"github.com/mcpgw/gateway/internal/catalog"
)

// The rules on a tenant's merged lists and the requests that name an item
// of them (internal/catalog's items).

// HasRulesAny reports whether rules apply to any of a tenant's upstreams.
func (e *Engine) HasRulesAny(tenantID string, upstreams []string) bool {
	if e == nil {
		return false
	}
	for _, name := range upstreams {
		if e.HasRules(tenantID, name) {
			return true
		}
	}
	return false
}

// Filter returns items, tenant's merged list of kind k, without what
// who's list-phase rules hide (asked in one batch for the request of
// method); the same slice when they hide nothing. decided, if not nil, is
// told each decision.
func (e *Engine) Filter(ctx context.Context, tenantID string, who *Principal, method string, k catalog.Kind, items []catalog.Item, decided func(*Decision)) []catalog.Item {
	idx := make([]int, 0, len(items))
	ins := make([]Input, 0, len(items))
	for i := range items {
		it := &items[i]
		if !e.HasRules(tenantID, it.Upstream) {
			continue
		}
		idx = append(idx, i)
		ins = append(ins, Input{Principal: who, Phase: PhaseList, Method: method, Kind: k.Policy(),
			Upstream: it.Upstream, Name: it.Exposed, Original: it.Original})
	}
	if len(ins) == 0 {
		return items
	}
	ds := e.DecideBatch(ctx, ins)
	hidden := make(map[int]bool)
	for j := range ds {
		if decided != nil {
			decided(&ds[j])
		}
		if !ds[j].Allow {
			hidden[idx[j]] = true
		}
	}
	if len(hidden) == 0 {
		return items
	}
	kept := make([]catalog.Item, 0, len(items)-len(hidden))
	for i := range items {
		if !hidden[i] {
			kept = append(kept, items[i])
		}
	}
	return kept
}

// Refuse returns the error of decision d, a refusal of a request in phase
// of the item of kind k the tenant sees as name: one the list phase
// refused (or a PhaseList request) answers as the unknown item it is to
// the caller.
func Refuse(d Decision, phase Phase, k catalog.Kind, name string) *Refusal {
	pr := &Refusal{Decision: d, Noun: k.Info().Noun}
	if d.Unknown || phase == PhaseList {
		pr.Unknown = &catalog.ResolveError{Kind: k, Name: name}
	}
	return pr
}
