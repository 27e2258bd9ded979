package dispatch

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonx"
)

// Tool search (tenants[].tool_search): hosts degrade when a tenant has
// hundreds of tools, so the gateway can give it two tools of its own
// instead: one ranks the tenant's tools (exactly those it may list, as it
// sees them) by a query, with BM25 over their names, titles,
// descriptions and argument names, and returns a bounded number of
// definitions; the other calls one of them by name, through tools/call
// and so under every rule a direct call is (policy, scopes, fixed
// arguments, validation, pins, budgets, audit). The index is made from
// the tenant's merged list on the first search and kept with it.

// The gateway's own tools. Their names lie in the namespace of the prefix
// "mcpgw", which no upstream can take from them (see present).
const (
	searchToolName = "mcpgw__search_tools"
	callToolName   = "mcpgw__call_tool"
)

// maxQueryBytes bounds a search query.
const maxQueryBytes = 1 << 10

var searchTools = []catalog.Item{
	{Exposed: callToolName, Original: callToolName, Raw: json.RawMessage(`{"name":"` + callToolName + `",` +
		`"description":"Calls one of your tools by its name, as ` + searchToolName + ` returned it, with its arguments.",` +
		`"inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The tool's name."},` +
		`"arguments":{"type":"object","description":"The tool's arguments, as its inputSchema says."}},"required":["name"],"additionalProperties":false}}`)},
	{Exposed: searchToolName, Original: searchToolName, Raw: json.RawMessage(`{"name":"` + searchToolName + `",` +
		`"description":"Finds the tools that fit a task among all the tools you have: describe the task in a few words. Returns the best matches' full definitions; call one with ` + callToolName + `.",` +
		`"inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"What you want to do, in a few words."},` +
		`"limit":{"type":"integer","minimum":1,"description":"How many tools to return at most."}},"required":["query"],"additionalProperties":false},` +
		`"annotations":{"readOnlyHint":true,"openWorldHint":false}}`)},
}

// searchList encodes the tenant's tools list: its items, or with tool
// search, the gateway's two tools in their place or beside them (an item
// named like one of them is left out).
func (rq *Request) searchList(items []catalog.Item) []byte {
	ts := rq.view.Search
	if ts == nil {
		return catalog.Encode(catalog.Tools, items)
	}
	if ts.Mode != config.SearchBeside {
		return catalog.Encode(catalog.Tools, searchTools)
	}
	all := make([]catalog.Item, 0, len(items)+len(searchTools))
	for _, it := range items {
		if it.Exposed != searchToolName && it.Exposed != callToolName {
			all = append(all, it)
		}
	}
	all = append(all, searchTools...)
	sort.Slice(all, func(i, j int) bool { return all[i].Exposed < all[j].Exposed })
	return catalog.Encode(catalog.Tools, all)
}

// searchCall serves a tools/call of one of the gateway's own tools; ok is
// false for any other name (or without tool search).
func (rq *Request) searchCall(ctx context.Context, c *call, name string, p *jsonx.Object) (res json.RawMessage, ok bool, err error) {
	ts := rq.view.Search
	if ts == nil || name != searchToolName && name != callToolName {
		return nil, false, nil
	}
	c.target = name
	var args *jsonx.Object
	if a := p.Get("arguments"); len(a) > 0 && string(a) != "null" {
		if args, err = jsonx.ParseValidObject(a); err != nil {
			c.isError = true
			return toolError("Invalid arguments for tool " + strconv.Quote(name) + ": arguments must be an object"), true, nil
		}
	} else {
		args = &jsonx.Object{}
	}
	if name == searchToolName {
		c.original = name // for the audit log: no upstream's tool
		q, _ := args.GetString("query")
		if q == "" || len(q) > maxQueryBytes {
			c.isError = true
			return toolError("Invalid arguments for tool " + strconv.Quote(name) + ": query must be a string of 1 to " + strconv.Itoa(maxQueryBytes) + " bytes"), true, nil
		}
		limit := ts.MaxResults
		if l := args.Get("limit"); l != nil {
			if n, err := strconv.Atoi(string(l)); err == nil && n >= 1 && n <= limit {
				limit = n
			}
		}
		e := rq.merged(ctx, catalog.Tools)
		e.indexOnce.Do(func() { e.index = newSearchIndex(e.items) })
		return searchResult(e.index.search(q, limit)), true, nil
	}
	target, _ := args.GetString("name")
	if target == "" || target == searchToolName || target == callToolName {
		c.isError = true
		return toolError("Invalid arguments for tool " + strconv.Quote(name) + ": name must name one of your tools"), true, nil
	}
	// A tools/call of target, with the caller's _meta: served as if the
	// client had sent it, under every rule.
	inner := &jsonx.Object{}
	inner.SetString("name", target)
	if a := args.Get("arguments"); a != nil {
		inner.Set("arguments", a)
	}
	if m := p.Get("_meta"); m != nil {
		inner.Set("_meta", m)
	}
	c.params = inner.Bytes()
	res, err = namedCall(catalog.Tools)(ctx, rq, c)
	return res, true, err
}

// searchResult is a search tool's result: the definitions found, as JSON
// text for the model and as structured content.
func searchResult(found []catalog.Item) json.RawMessage {
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

// searchIndex is a BM25 index of a tenant's tools: for each word, the
// tools that have it and how often (weighted by field).
type searchIndex struct {
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

func newSearchIndex(items []catalog.Item) *searchIndex {
	ix := &searchIndex{items: items, postings: map[string][]posting{}, lens: make([]float64, len(items))}
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

// search returns at most limit items that match query, best first.
func (ix *searchIndex) search(query string, limit int) []catalog.Item {
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
