package catalog

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/gateway/internal/config"
)

// TestListStats: per upstream and kind, the listings cached and the
// newest one's time and items; a stale listing has no time.
func TestListStats(t *testing.T) {
	c := testCatalog(t, time.Hour)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	ctx := context.Background()
	get := func(up *Upstream, k Kind, sc Scope, items ...string) {
		t.Helper()
		fetch := func(context.Context, Bounds) ([]json.RawMessage, bool, error) { return tools(items...), false, nil }
		if _, err := c.Get(ctx, up, k, sc, fetch); err != nil {
			t.Fatal(err)
		}
	}
	a, b := testRef("a", config.ListsShared), testRef("b", "")
	get(a, Tools, Scope{Partition: "p1"}, "x", "y")
	now = now.Add(time.Second)
	get(a, Tools, Scope{Partition: "p2"}, "x", "y", "z")
	get(a, Prompts, Scope{}, "p")
	get(b, Tools, Scope{}, "t")
	c.Stale("b", Tools)
	want := map[string][]ListStat{
		"a": {{Kind: Tools, Listings: 2, Fetched: now, Items: 3}, {Kind: Prompts, Listings: 1, Fetched: now, Items: 1}},
		"b": {{Kind: Tools, Listings: 1, Items: 1}},
	}
	if diff := cmp.Diff(want, c.ListStats()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
