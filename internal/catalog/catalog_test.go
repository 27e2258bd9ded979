package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
)

func testCatalog(t *testing.T, ttl time.Duration) *Catalog {
	c := New(ttl, slog.New(slog.DiscardHandler), nil)
	t.Cleanup(c.Close)
	return c
}

func testRef(name string, lists string) *Upstream {
	return &Upstream{Name: name, Prefix: name, Shared: lists != config.ListsPerSession, Timeout: time.Minute}
}

func tools(names ...string) []json.RawMessage {
	var out []json.RawMessage
	for _, n := range names {
		out = append(out, json.RawMessage(`{"name":"`+n+`","inputSchema":{"type":"object"}}`))
	}
	return out
}

// TestCatalogListFailureBackoff: a failed walk is remembered, for 1 s,
// then 2 s, …, up to min(ttl, 1 min); a request in between gets the
// failure without a walk.
func TestCatalogListFailureBackoff(t *testing.T) {
	c := testCatalog(t, 5*time.Second)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	up := testRef("u", "")
	var walks atomic.Int32
	boom := errors.New("boom")
	fetch := func(context.Context, Bounds) ([]json.RawMessage, bool, error) {
		walks.Add(1)
		return nil, false, boom
	}
	ctx := context.Background()
	for i, step := range []struct {
		advance time.Duration
		walks   int32
	}{
		{0, 1}, {500 * time.Millisecond, 1}, {600 * time.Millisecond, 2}, // 1 s
		{1900 * time.Millisecond, 2}, {200 * time.Millisecond, 3}, // 2 s
		{3900 * time.Millisecond, 3}, {200 * time.Millisecond, 4}, // 4 s
		{4900 * time.Millisecond, 4}, {200 * time.Millisecond, 5}, // 5 s: the TTL caps it
	} {
		now = now.Add(step.advance)
		if _, err := c.Get(ctx, up, Tools, Scope{Session: "s"}, fetch); !errors.Is(err, boom) {
			t.Fatalf("step %d: %v", i, err)
		}
		if n := walks.Load(); n != step.walks {
			t.Fatalf("step %d: %d walks, want %d", i, n, step.walks)
		}
	}
}

// TestCatalogCloseWaitsForWalks: a walk that outlives its request is the
// catalog's: close ends it and waits for it.
func TestCatalogCloseWaitsForWalks(t *testing.T) {
	c := New(time.Minute, slog.New(slog.DiscardHandler), nil)
	up := testRef("u", "")
	ended := make(chan struct{})
	started := make(chan struct{})
	fetch := func(ctx context.Context, _ Bounds) ([]json.RawMessage, bool, error) {
		close(started)
		<-ctx.Done()
		close(ended)
		return nil, false, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if _, err := c.Get(ctx, up, Tools, Scope{Session: "s"}, fetch); !errors.Is(err, context.Canceled) {
		t.Fatalf("get: %v", err)
	}
	select {
	case <-ended:
		t.Fatal("the walk ended with the request")
	default:
	}
	c.Close()
	select {
	case <-ended:
	default:
		t.Fatal("close returned before the walk ended")
	}
	if _, err := c.Get(context.Background(), up, Tools, Scope{Session: "s"}, fetch); err == nil {
		t.Error("a walk started after close")
	}
}

// TestCatalogPrivateLists: a shared walk that comes back cacheScope
// private is kept for the session it was fetched under and never served
// to another; lists: per_session never shares either.
func TestCatalogPrivateLists(t *testing.T) {
	for _, tc := range []struct {
		name, lists string
		private     bool
	}{{"private", config.ListsShared, true}, {"per_session", config.ListsPerSession, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCatalog(t, time.Minute)
			up := testRef("u", tc.lists)
			fetchAs := func(session string) FetchFunc {
				return func(context.Context, Bounds) ([]json.RawMessage, bool, error) {
					return tools("only_" + session), tc.private, nil
				}
			}
			ctx := context.Background()
			for range 2 {
				for _, s := range []string{"a", "b"} {
					l, err := c.Get(ctx, up, Tools, Scope{Session: s}, fetchAs(s))
					if err != nil {
						t.Fatal(err)
					}
					if len(l.Items) != 1 || l.Items[0].Original != "only_"+s {
						t.Fatalf("session %s got %v", s, l.Items)
					}
					if f := c.Fresh(up, Tools, Scope{Session: s}); f != l {
						t.Fatalf("session %s: fresh is not its own Listing", s)
					}
				}
			}
			if _, err := c.Get(ctx, up, Tools, Scope{Session: ""}, fetchAs("watch")); err == nil {
				t.Error("a per-session Listing was served outside any session")
			}
			c.EndSession("a")
			if c.Fresh(up, Tools, Scope{Session: "a"}) != nil {
				t.Error("an ended session's Listing is still cached")
			}
			if c.Fresh(up, Tools, Scope{Session: "b"}) == nil {
				t.Error("another session's Listing was dropped")
			}
		})
	}
}

// TestCatalogScopedBound: per-session listings stay within maxScopedLists,
// the oldest going first.
func TestCatalogScopedBound(t *testing.T) {
	c := testCatalog(t, time.Hour)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	up := testRef("u", config.ListsPerSession)
	fetch := func(context.Context, Bounds) ([]json.RawMessage, bool, error) { return tools("x"), false, nil }
	for i := range maxScopedLists + 10 {
		now = now.Add(time.Millisecond)
		if _, err := c.Get(context.Background(), up, Tools, Scope{Session: "s" + strconv.Itoa(i)}, fetch); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	n, entries := c.nScoped, len(c.lists)
	c.mu.Unlock()
	if n != maxScopedLists || entries != maxScopedLists {
		t.Errorf("%d scoped listings (%d entries), want %d", n, entries, maxScopedLists)
	}
}

// TestCatalogInvalidateScoped: invalidating an upstream drops every
// per-session Listing it has, however many kinds one session cached.
func TestCatalogInvalidateScoped(t *testing.T) {
	c := testCatalog(t, time.Hour)
	up := testRef("u", config.ListsPerSession)
	fetch := func(context.Context, Bounds) ([]json.RawMessage, bool, error) { return tools("x"), false, nil }
	for _, k := range []Kind{Tools, Prompts, Resources, Templates} {
		if _, err := c.Get(context.Background(), up, k, Scope{Session: "s1"}, fetch); err != nil {
			t.Fatal(err)
		}
	}
	c.Invalidate("u", Tools, Prompts, Resources, Templates)
	c.mu.Lock()
	n, entries, scopes := c.nScoped, len(c.lists), len(c.scoped)
	c.mu.Unlock()
	if n != 0 || entries != 0 || scopes != 0 {
		t.Errorf("after invalidate: %d scoped listings, %d entries, %d sessions; want none", n, entries, scopes)
	}
}

// TestCatalogPartitions: a shared listing is shared within its partition
// only (the identity the upstream was reached with), and the partitioned
// listings stay within the bound on listings that are not shared by all.
func TestCatalogPartitions(t *testing.T) {
	c := testCatalog(t, time.Minute)
	up := testRef("u", config.ListsShared)
	ctx := context.Background()
	fetchAs := func(who string) FetchFunc {
		return func(context.Context, Bounds) ([]json.RawMessage, bool, error) {
			return tools("only_" + who), false, nil
		}
	}
	for _, p := range []string{"", "t:a/", "t:b/"} {
		l, err := c.Get(ctx, up, Tools, Scope{Partition: p, Session: "s-" + p}, fetchAs(p))
		if err != nil || len(l.Items) != 1 || l.Items[0].Original != "only_"+p {
			t.Fatalf("partition %q: %+v %v", p, l, err)
		}
	}
	for _, p := range []string{"", "t:a/", "t:b/"} {
		// Another session of the same partition is served the same one.
		if l := c.Fresh(up, Tools, Scope{Partition: p, Session: "other"}); l == nil || l.Items[0].Original != "only_"+p {
			t.Errorf("partition %q: %+v", p, l)
		}
	}
	for i := range maxScopedLists + 10 {
		p := "u:" + strconv.Itoa(i)
		if _, err := c.Get(ctx, up, Tools, Scope{Partition: p}, fetchAs(p)); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	n := c.nScoped
	c.mu.Unlock()
	if n > maxScopedLists {
		t.Errorf("%d partitioned listings kept, bound %d", n, maxScopedLists)
	}
}
