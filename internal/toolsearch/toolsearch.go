// Package toolsearch ranks a tenant's tools by a query, for the gateway's
// tool search (tenants[].tool_search): hosts degrade when a tenant has
// hundreds of tools, so the gateway can give it two tools of its own
// instead: one ranks the tenant's tools (exactly those it may list, as it
// sees them) by a query, with BM25 over their names, titles,
// descriptions and argument names, and returns a bounded number of
// definitions; the other calls one of them by name. This package holds
// the two tools' definitions, the index and the search; the request
// pipeline serves the calls (a call of a found tool goes through
// tools/call, under every rule a direct call is).
package toolsearch

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonx"
)

// The gateway's own tools. Their names lie in the namespace of the prefix
// "mcpgw", which no upstream can take from them.
const (
	SearchTool = "mcpgw__search_tools"
	CallTool   = "mcpgw__call_tool"
)

// MaxQueryBytes bounds a search query.
const MaxQueryBytes = 1 << 10

// Tools are the definitions of the gateway's two tools, in name order.
var Tools = []catalog.Item{
	{Exposed: CallTool, Original: CallTool, Raw: json.RawMessage(`{"name":"` + CallTool + `",` +
		`"description":"Calls one of your tools by its name, as ` + SearchTool + ` returned it, with its arguments.",` +
		`"inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The tool's name."},` +
		`"arguments":{"type":"object","description":"The tool's arguments, as its inputSchema says."}},"required":["name"],"additionalProperties":false}}`)},
	{Exposed: SearchTool, Original: SearchTool, Raw: json.RawMessage(`{"name":"` + SearchTool + `",` +
		`"description":"Finds the tools that fit a task among all the tools you have: describe the task in a few words. Returns the best matches' full definitions; call one with ` + CallTool + `.",` +
		`"inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"What you want to do, in a few words."},` +
		`"limit":{"type":"integer","minimum":1,"description":"How many tools to return at most."}},"required":["query"],"additionalProperties":false},` +
		`"annotations":{"readOnlyHint":true,"openWorldHint":false}}`)},
}

// IsOwn reports whether name is one of the gateway's two tools.
func IsOwn(name string) bool { return name == SearchTool || name == CallTool }

// List encodes a tenant's tools list under tool search ts: its items, or
// the gateway's two tools in their place or beside them (mode beside; an
// item named like one of them is then left out). Without tool search
// (nil) it is the items.
func List(ts *config.ToolSearch, items []catalog.Item) []byte {
	if ts == nil {
		return catalog.Encode(catalog.Tools, items)
	}
	if ts.Mode != config.SearchBeside {
		return catalog.Encode(catalog.Tools, Tools)
	}
	all := make([]catalog.Item, 0, len(items)+len(Tools))
	for _, it := range items {
		if !IsOwn(it.Exposed) {
			all = append(all, it)
		}
	}
	all = append(all, Tools...)
	sort.Slice(all, func(i, j int) bool { return all[i].Exposed < all[j].Exposed })
	return catalog.Encode(catalog.Tools, all)
}

// Result is a search tool's result: the definitions found, as JSON
// text for the model and as structured content.
func Result(found []catalog.Item) json.RawMessage {
	raws := make([]json.RawMessage, len(found))
	for i, it := range found {
		raws[i] = it.Raw
	}
	tools := jsonx.AppendArray(nil, raws)
	sc := append(append([]byte(`{"tools":`), tools...), '}')
	text := jsonx.AppendString(nil, string(sc))
	out := append([]byte(`{"content":[{"type":"text","text":`), text...)
	out = append(out, `}],"structuredContent":`...)
	out = append(out, sc...)
	return append(out, '}')
}

// An Index is a BM25 index of a tenant's tools: for each word, the
// tools that have it and how often (weighted by field).
type Index struct {
	items    []catalog.Item
	postings map[string][]posting
	lens     []float64
	avgLen   float64
}

type posting struct {
	doc int
	f   float64
}

// Field weights: a word in a name says more than one in a description.
const (
	weightName = 3
	weightArg  = 2
	weightDesc = 1
)

// Bounds on a tenant's search index: the lists it is made from are
// upstream output of up to limits.list_bytes each, and the index is kept
// per tenant, so what it holds is bounded apart from them. Each tool is
// indexed by its name, and by at most maxIndexTextBytes of its title and
// of its description each (a prefix: what a model reads first), and its
// argument names, up to maxIndexTerms distinct words; words longer than
// maxTermBytes are left out. All tools together hold at most
// maxIndexPostings (word, tool) pairs: past them, tools are indexed by
// their names alone (still found by name, and always callable).
const (
	maxIndexTextBytes = 1 << 10
	maxIndexTerms     = 64
	maxTermBytes      = 64
	maxIndexPostings  = 1 << 17
)

func NewIndex(items []catalog.Item) *Index {
	ix := &Index{items: items, postings: map[string][]posting{}, lens: make([]float64, len(items))}
	total := 0.0
	postings := 0
	tf := map[string]float64{}
	for i, it := range items {
		clear(tf)
		n := 0.0
		add := func(text string, w float64) {
			tokenizeInto(prefix(text, maxIndexTextBytes), func(t string) {
				if _, ok := tf[t]; !ok && len(tf) >= maxIndexTerms {
					return
				}
				tf[t] += w
				n += w
			})
		}
		add(it.Exposed, weightName)
		if postings+maxIndexTerms <= maxIndexPostings {
			if o, err := jsonx.ParseValidObject(it.Raw); err == nil {
				if s, ok := o.GetString("title"); ok {
					add(s, weightArg)
				}
				if s, ok := o.GetString("description"); ok {
					add(s, weightDesc)
				}
				if in, ok := o.Object("inputSchema"); ok {
					if props, ok := in.Object("properties"); ok {
						for _, m := range props.Members {
							add(m.Name, weightArg)
						}
					}
				}
			}
		}
		for t, f := range tf {
			ix.postings[t] = append(ix.postings[t], posting{i, f})
		}
		postings += len(tf)
		ix.lens[i] = n
		total += n
	}
	if len(items) > 0 {
		ix.avgLen = total / float64(len(items))
	}
	return ix
}

// prefix is s cut to at most n bytes, at a rune boundary.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Search returns at most limit items that match query, best first.
func (ix *Index) Search(query string, limit int) []catalog.Item {
	const k1, b = 1.2, 0.75
	n := float64(len(ix.items))
	scores := make([]float64, len(ix.items))
	terms := tokenize(query)
	slices.Sort(terms)
	for _, t := range slices.Compact(terms) {
		ps := ix.postings[t]
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			scores[p.doc] += idf * p.f * (k1 + 1) / (p.f + k1*(1-b+b*ix.lens[p.doc]/ix.avgLen))
		}
	}
	type hit struct {
		i     int
		score float64
	}
	var hits []hit
	for i, s := range scores {
		if s > 0 {
			hits = append(hits, hit{i, s})
		}
	}
	sort.Slice(hits, func(a, c int) bool {
		if hits[a].score != hits[c].score {
			return hits[a].score > hits[c].score
		}
		return ix.items[hits[a].i].Exposed < ix.items[hits[c].i].Exposed
	})
	out := make([]catalog.Item, 0, min(limit, len(hits)))
	for _, h := range hits[:min(limit, len(hits))] {
		out = append(out, ix.items[h.i])
	}
	return out
}

// stopWords are English words too common to rank by.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields("a an and are as at be by for from how i in into is it its me my of on or that the this to with what which who you your all any every") {
		stopWords[w] = true
	}
}

// tokenize splits text into lower-case words: at anything but letters and
// digits, and between a lower-case letter and an upper-case one
// (createIssue), so names and prose share words, leaving out stop words
// and words longer than maxTermBytes. A trailing "s" is cut from words of
// four letters or more: issues finds issue.
func tokenize(text string) []string {
	var out []string
	tokenizeInto(text, func(w string) { out = append(out, w) })
	return out
}

// tokenizeInto calls emit with each word of text, as tokenize has them.
func tokenizeInto(text string, emit func(string)) {
	var cur []rune
	size := 0 // bytes of cur
	flush := func() {
		if len(cur) > 0 && size <= maxTermBytes {
			w := strings.ToLower(string(cur))
			if !stopWords[w] {
				if len(w) >= 4 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
					w = w[:len(w)-1]
				}
				emit(w)
			}
		}
		cur, size = cur[:0], 0
	}
	prevLower := false
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && prevLower {
				flush()
			}
			if size <= maxTermBytes {
				cur = append(cur, r) // a longer word is left out: no need to hold it
			}
			size += utf8.RuneLen(r)
			prevLower = unicode.IsLower(r)
		default:
			flush()
			prevLower = false
		}
	}
	flush()
}
