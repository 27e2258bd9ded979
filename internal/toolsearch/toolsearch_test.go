package toolsearch

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/catalog"
)

// syntheticCatalog is n tools of made-up services, each with a name, a
// description and a few arguments, like a large tenant's.
func syntheticCatalog(n int) []catalog.Item {
	verbs := []string{"create", "list", "get", "update", "delete", "search", "close", "archive", "export", "sync"}
	nouns := []string{"issue", "repository", "invoice", "customer", "ticket", "deployment", "report", "calendar_event", "message", "file", "user", "order"}
	services := []string{"github", "stripe", "zendesk", "k8s", "drive", "slack", "jira", "shopify", "mail", "crm"}
	args := []string{"id", "owner", "title", "body", "query", "limit", "status", "email", "date", "amount"}
	r := rand.New(rand.NewPCG(1, 2))
	var items []catalog.Item
	for i := range n {
		v, no, s := verbs[i%len(verbs)], nouns[(i/len(verbs))%len(nouns)], services[(i/(len(verbs)*len(nouns)))%len(services)]
		name := fmt.Sprintf("%s__%s_%s_%d", s, v, no, i)
		props := map[string]any{}
		for range 3 {
			props[args[r.IntN(len(args))]] = map[string]string{"type": "string", "description": "The " + args[r.IntN(len(args))] + "."}
		}
		raw, _ := json.Marshal(map[string]any{
			"name":        name,
			"description": fmt.Sprintf("%s a %s in %s. Use it when the user asks to %s the %s; it returns the %s as JSON.", v, no, s, v, no, no),
			"inputSchema": map[string]any{"type": "object", "properties": props},
		})
		items = append(items, catalog.Item{Exposed: name, Original: name, Raw: raw})
	}
	slices.SortFunc(items, func(a, b catalog.Item) int {
		if a.Exposed < b.Exposed {
			return -1
		}
		return 1
	})
	return items
}

// TestSearchRanking: on a known catalog, the tool a query describes
// comes first.
func TestSearchRanking(t *testing.T) {
	ix := NewIndex(syntheticCatalog(1200))
	for query, want := range map[string]string{
		"archive a zendesk ticket":       "zendesk__archive_ticket",
		"refund stripe invoice delete":   "stripe__delete_invoice",
		"list the deployments in k8s":    "k8s__list_deployment",
		"search slack messages":          "slack__search_message",
		"export calendar events (drive)": "drive__export_calendar_event",
	} {
		got := ix.Search(query, 5)
		if len(got) == 0 || !hasPrefix(got[0].Exposed, want) {
			var names []string
			for _, it := range got {
				names = append(names, it.Exposed)
			}
			t.Errorf("search %q: %v, want %s… first", query, names, want)
		}
	}
	if got := ix.Search("the of and", 5); len(got) != 0 {
		t.Errorf("stop words matched %d tools", len(got))
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// BenchmarkToolSearch: one search over a tenant's 1,200 tools from the
// cached index, with its p99, and the bytes a client receives for the
// whole list and for one search of 10 results.
func BenchmarkToolSearch(b *testing.B) {
	items := syntheticCatalog(1200)
	ix := NewIndex(items)
	queries := []string{"create a github issue", "list stripe invoices", "delete a customer in crm",
		"search files on drive", "update a jira ticket status", "send a slack message", "export orders from shopify"}
	var ds []time.Duration
	var resBytes int
	i := 0
	for b.Loop() {
		start := time.Now()
		found := ix.Search(queries[i%len(queries)], 10)
		ds = append(ds, time.Since(start))
		resBytes = len(Result(found))
		i++
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(catalog.Encode(catalog.Tools, items))), "list-bytes")
	b.ReportMetric(float64(resBytes), "search-bytes")
}

// BenchmarkSearchIndex: making the index of 1,200 tools, once per merged
// list.
func BenchmarkSearchIndex(b *testing.B) {
	items := syntheticCatalog(1200)
	for b.Loop() {
		NewIndex(items)
	}
}

// hostileCatalog is n tools whose descriptions are each descBytes of words
// no other tool has, and of words too long to index: the most an index
// could hold of a list that size.
func hostileCatalog(n, descBytes int) []catalog.Item {
	items := make([]catalog.Item, n)
	var b []byte
	for i := range items {
		b = b[:0]
		for j := 0; len(b) < descBytes; j++ {
			if j%8 == 7 {
				b = append(b, strings.Repeat("x", 3*maxTermBytes)...)
			}
			b = fmt.Appendf(b, "w%dx%d ", i, j)
		}
		raw, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("tool_%d", i), "description": string(b),
			"inputSchema": map[string]any{"type": "object"}})
		items[i] = catalog.Item{Exposed: fmt.Sprintf("tool_%d", i), Original: fmt.Sprintf("tool_%d", i), Raw: raw}
	}
	return items
}

// TestSearchIndexBounds: an index of a 14 MB list holds at most
// maxIndexPostings words, each tool at most maxIndexTerms of the first
// maxIndexTextBytes of its description, and its heap stays small; a tool
// past the bound is still found by its name.
func TestSearchIndexBounds(t *testing.T) {
	items := hostileCatalog(4000, 3500) // 14 MB of descriptions
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix := NewIndex(items)
	runtime.GC()
	runtime.ReadMemStats(&after)
	postings, terms := 0, len(ix.postings)
	for term, ps := range ix.postings {
		postings += len(ps)
		if len(term) > maxTermBytes {
			t.Errorf("a word of %d bytes indexed", len(term))
		}
	}
	if postings > maxIndexPostings+len(items)*2 {
		t.Errorf("%d postings, want at most %d and the names'", postings, maxIndexPostings)
	}
	retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d tools: %d terms, %d postings; heap retained %d KiB, allocated %d KiB", len(items), terms, postings, retained>>10, allocated>>10)
	if retained > 24<<20 {
		t.Errorf("the index holds %d MiB, want at most 24", retained>>20)
	}
	if allocated > 96<<20 {
		t.Errorf("making the index allocated %d MiB, want at most 96", allocated>>20)
	}
	// The first tool's words past the first KiB of its description are
	// not indexed, its first words are; the last tool is found by name.
	if got := ix.Search("w0x5", 5); len(got) != 1 || got[0].Exposed != "tool_0" {
		t.Errorf("search of a first word: %v", got)
	}
	if got := ix.Search("w0x400", 5); len(got) != 0 {
		t.Errorf("a word past the indexed prefix found %d tools", len(got))
	}
	if got := ix.Search("tool 3999", 1); len(got) != 1 || got[0].Exposed != "tool_3999" {
		t.Errorf("search of the last tool by name: %v", got)
	}
	runtime.KeepAlive(items)
}
