package policy

import (
	"context"
	"errors"
	"testing"

	"github.com/mcpgw/gateway/internal/catalog"
)

// TestFilter: the list-phase rules hide what they deny of a merged list,
// each decision is told, a list they leave whole is the same slice, and
// items of an upstream without rules are not asked about.
func TestFilter(t *testing.T) {
	e := compile(t, "      - {name: no-deploy, phase: list, match: {upstreams: [github], tools: [\"deploy_*\"]}, effect: deny}\n", Options{})
	if !e.HasRulesAny("acme", []string{"shell", "github"}) || e.HasRulesAny("other", []string{"github"}) || (*Engine)(nil).HasRulesAny("acme", []string{"github"}) {
		t.Error("HasRulesAny")
	}
	items := []catalog.Item{
		{Upstream: "github", Original: "deploy_prod", Exposed: "github__deploy_prod"},
		{Upstream: "github", Original: "list_repos", Exposed: "github__list_repos"},
	}
	var decided []bool
	got := e.Filter(context.Background(), "acme", principal(), "tools/list", catalog.Tools, items, func(d *Decision) { decided = append(decided, d.Allow) })
	if len(got) != 1 || got[0].Original != "list_repos" || len(decided) != 2 || decided[0] || !decided[1] {
		t.Errorf("Filter = %+v, decisions %v", got, decided)
	}
	whole := items[1:]
	if got := e.Filter(context.Background(), "acme", principal(), "tools/list", catalog.Tools, whole, nil); &got[0] != &whole[0] {
		t.Error("a list the rules leave whole was copied")
	}
}

// TestRefuse: a list-phase refusal is the unknown item; a call-phase one
// is the rule's.
func TestRefuse(t *testing.T) {
	var re *catalog.ResolveError
	if err := Refuse(Decision{}, PhaseList, catalog.Tools, "github__deploy"); !errors.As(err, &re) || re.Name != "github__deploy" || err.Noun != "tool" {
		t.Errorf("list phase: %v", err)
	}
	if err := Refuse(Decision{Unknown: true}, PhaseCall, catalog.Prompts, "p"); !errors.As(err, &re) {
		t.Errorf("hidden at call: %v", err)
	}
	if err := Refuse(Decision{Message: "no"}, PhaseCall, catalog.Tools, "t"); err.Unknown != nil || err.Error() != "no" {
		t.Errorf("call phase: %v", err)
	}
}
