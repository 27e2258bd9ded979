package guard

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/mcpgw/gateway/internal/catalog"
)

// The engine on the gateway's requests: a call's arguments (after policy,
// before validation and the upstream), its result (before the client gets
// it), and each definition of a tenant's merged lists. A tenant and
// upstream without guards cost one map lookup per call.

// Inspect inspects content in phase p (Arguments: a tools/call's
// arguments, after fixed ones are set; Results: a tool's result, a
// prompt's messages, a resource's contents) for in. It returns the content
// to pass on, redacted or as it was, or a *BlockError. in is copied only
// when some guard inspects it.
func (e *Engine) Inspect(ctx context.Context, p Phase, in Input, content json.RawMessage) (json.RawMessage, error) {
	s := e.For(in.Tenant, in.Upstream, in.Tool)
	if s == nil || !s.Has(p) {
		return content, nil
	}
	inspected := in
	var out json.RawMessage
	var v Verdict
	if p == Arguments {
		out, v = s.Arguments(ctx, &inspected, content)
	} else {
		out, v = s.Result(ctx, &inspected, content)
	}
	if v.Action == Block {
		return nil, &BlockError{Verdict: v}
	}
	return out, nil
}

// Definitions applies tenant's definitions guards to items, its merged
// list of kind k, once per listing (the caller keeps the list): a
// definition a guard blocks is left out, quarantined (see Quarantined) and
// uncallable (see DefinitionBlocked); one it redacts is listed redacted.
// It returns items itself when nothing changed.
func (e *Engine) Definitions(ctx context.Context, tenant string, k catalog.Kind, items []catalog.Item) []catalog.Item {
	if e == nil {
		return items
	}
	kept := items[:0:0]
	changed := false
	for i := range items {
		it := items[i]
		out, blocked := e.definition(ctx, tenant, k, &it)
		if blocked {
			changed = true
			continue
		}
		if out != nil {
			it.Raw, changed = out, true
		}
		kept = append(kept, it)
	}
	if !changed {
		return items
	}
	return kept
}

// definition inspects one definition: it returns the redacted one (nil
// when unchanged) or whether a guard blocks it.
func (e *Engine) definition(ctx context.Context, tenant string, k catalog.Kind, it *catalog.Item) (json.RawMessage, bool) {
	tool := ""
	if k == catalog.Tools {
		tool = it.Original
	}
	s := e.For(tenant, it.Upstream, tool)
	if s == nil || !s.Has(Definitions) {
		return nil, false
	}
	in := &Input{Tenant: tenant, Upstream: it.Upstream, Tool: tool, Method: k.Info().ListMethod}
	if tool == "" {
		in.Item = it.Original
	}
	out, v := s.Definition(ctx, in, it.Raw)
	switch {
	case v.Action == Block:
		e.Quarantine(KeyOf(tenant, it.Upstream, k.Info().Noun, it.Original, it.Raw), v)
		return nil, true
	case string(out) != string(it.Raw):
		return out, false
	}
	return nil, false
}

// DefinitionBlocked reports whether a guard blocks the definition of the
// item of kind k a call of tenant's resolved to: it is then unknown, as it
// is unlisted (a call may come before any list, or name it from an older
// one). The verdict is remembered for the definition's exact text.
func (e *Engine) DefinitionBlocked(ctx context.Context, tenant string, k catalog.Kind, it *catalog.Item) bool {
	tool := ""
	if k == catalog.Tools {
		tool = it.Original
	}
	if s := e.For(tenant, it.Upstream, tool); s == nil || !s.Has(Definitions) {
		return false
	}
	key := KeyOf(tenant, it.Upstream, k.Info().Noun, it.Original, it.Raw)
	if blocked, ok := e.Blocked(key); ok {
		return blocked
	}
	_, blocked := e.definition(ctx, tenant, k, it)
	e.Remember(key, blocked)
	return blocked
}

// Notes returns, for /readyz, the definitions guards blocked: hidden and
// uncallable for the tenant named, the rest served.
func (e *Engine) Notes() []string {
	qs := e.Quarantined()
	notes := make([]string, 0, len(qs))
	for _, q := range qs {
		notes = append(notes, "upstream "+q.Upstream+": "+q.Kind+" "+strconv.QuoteToASCII(q.Original)+
			" quarantined by guards for tenant "+q.Tenant+" (found: "+q.Found+")")
	}
	return notes
}
