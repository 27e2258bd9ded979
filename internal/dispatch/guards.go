package dispatch

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/guard"
)

// Content guards (internal/guard, docs/guards.md): the engine compiled
// with each generation inspects a call's arguments (after policy, before
// validation and the upstream), its result (before the client gets it),
// and each definition of a tenant's lists. A tenant and upstream without
// guards cost one map lookup per call.

// compileGuards compiles cfg's guards; the gateway's own secrets of each
// upstream are redacted from its results whatever is configured.
func (h *Server) compileGuards(cfg *config.Config) (*guard.Engine, error) {
	secrets := credentials.UpstreamSecrets(cfg)
	return guard.Compile(cfg, guard.Options{
		Secrets: func(upstream string) []string { return secrets[upstream] },
		OnFinding: func(in *guard.Input, f guard.Finding) {
			h.metrics.GuardFinding(in.Tenant, in.Upstream, f.Phase.String(), f.Kind, f.Action.String(), f.Count)
		},
		OnWebhook: func(e guard.WebhookEvent) { h.metrics.GuardWebhook(e.Err != nil, e.Duration) },
	})
}

// guards returns the guards of the request's tenant on upstream up's
// tool (its original name; "" for prompts and resources) that inspect
// phase p; nil when none does.
func (rq *Request) guards(up *upstreamRef, tool string, p guard.Phase) *guard.Set {
	g := rq.st.guards
	if g == nil {
		return nil
	}
	s := g.For(rq.view.ID, up.cfg.Name, tool)
	if s == nil || !s.Has(p) {
		return nil
	}
	return s
}

func (rq *Request) guardInput(c *call, up *upstreamRef, tool, item string) *guard.Input {
	return &guard.Input{Tenant: rq.view.ID, Subject: rq.principal.Subject, Upstream: up.cfg.Name, Tool: tool, Item: item, Method: c.method}
}

// guardArguments inspects a tools/call's arguments, after fixed ones are
// set: it returns the arguments to send (redacted, or as they were) or
// the block.
func (rq *Request) guardArguments(ctx context.Context, c *call, up *upstreamRef, orig string, args json.RawMessage) (json.RawMessage, error) {
	s := rq.guards(up, orig, guard.Arguments)
	if s == nil {
		return args, nil
	}
	out, v := s.Arguments(ctx, rq.guardInput(c, up, orig, ""), args)
	if v.Action == guard.Block {
		return nil, &guard.BlockError{Verdict: v}
	}
	return out, nil
}

// guardResult inspects the result of a call of kind k (a tool's result,
// a prompt's messages, a resource's contents) before the client gets it.
func (rq *Request) guardResult(ctx context.Context, c *call, k catalog.Kind, up *upstreamRef, orig string, res json.RawMessage) (json.RawMessage, error) {
	tool, item := "", orig
	if k == catalog.Tools {
		tool, item = orig, ""
	}
	s := rq.guards(up, tool, guard.Results)
	if s == nil {
		return res, nil
	}
	out, v := s.Result(ctx, rq.guardInput(c, up, tool, item), res)
	if v.Action == guard.Block {
		return nil, &guard.BlockError{Verdict: v}
	}
	return out, nil
}

// guardDefinitions applies the definitions guards of the request's tenant
// to items, its merged list of kind k, once per listing (the list is kept,
// see merged): a definition a guard blocks is left out (and uncallable,
// see definitionBlocked), one it redacts is listed redacted.
func (rq *Request) guardDefinitions(ctx context.Context, k catalog.Kind, items []catalog.Item) []catalog.Item {
	if rq.st.guards == nil {
		return items
	}
	kept := items[:0:0]
	changed := false
	for i := range items {
		it := items[i]
		up := rq.st.byName[it.Upstream]
		if up == nil {
			kept = append(kept, it)
			continue
		}
		out, blocked := rq.guardDefinition(ctx, k, up, &it)
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

// guardDefinition inspects one definition: it returns the redacted one
// (nil when unchanged) or whether a guard blocks it.
func (rq *Request) guardDefinition(ctx context.Context, k catalog.Kind, up *upstreamRef, it *catalog.Item) (json.RawMessage, bool) {
	tool := ""
	if k == catalog.Tools {
		tool = it.Original
	}
	s := rq.guards(up, tool, guard.Definitions)
	if s == nil {
		return nil, false
	}
	in := &guard.Input{Tenant: rq.view.ID, Upstream: up.cfg.Name, Tool: tool, Method: k.Info().ListMethod}
	if tool == "" {
		in.Item = it.Original
	}
	out, v := s.Definition(ctx, in, it.Raw)
	switch {
	case v.Action == guard.Block:
		rq.st.guards.Quarantine(guard.KeyOf(rq.view.ID, up.cfg.Name, k.Info().Noun, it.Original, it.Raw), v)
		return nil, true
	case string(out) != string(it.Raw):
		return out, false
	}
	return nil, false
}

// definitionBlocked reports whether a guard blocks the definition of the
// item a call resolved to: it is then unknown, as it is unlisted (a call
// may come before any list, or name it from an older one).
func (rq *Request) definitionBlocked(ctx context.Context, k catalog.Kind, up *upstreamRef, it *catalog.Item) bool {
	tool := ""
	if k == catalog.Tools {
		tool = it.Original
	}
	if rq.guards(up, tool, guard.Definitions) == nil {
		return false
	}
	key := guard.KeyOf(rq.view.ID, up.cfg.Name, k.Info().Noun, it.Original, it.Raw)
	if blocked, ok := rq.st.guards.Blocked(key); ok {
		return blocked
	}
	_, blocked := rq.guardDefinition(ctx, k, up, it)
	rq.st.guards.Remember(key, blocked)
	return blocked
}

// GuardNotes returns, for /readyz, the definitions guards blocked under
// the config in force: hidden and uncallable for the tenant named, the
// rest served.
func (h *Server) GuardNotes() []string {
	qs := h.Current().guards.Quarantined()
	notes := make([]string, 0, len(qs))
	for _, q := range qs {
		notes = append(notes, "upstream "+q.Upstream+": "+q.Kind+" "+strconv.QuoteToASCII(q.Original)+
			" quarantined by guards for tenant "+q.Tenant+" (found: "+q.Found+")")
	}
	return notes
}
