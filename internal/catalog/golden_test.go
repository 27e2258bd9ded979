package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the want/ files of testdata/*.txtar with what the catalog answers")

// kindWords are the kinds as the archives spell them.
var kindWords = map[string]catalog.Kind{
	"tools":     catalog.Tools,
	"prompts":   catalog.Prompts,
	"resources": catalog.Resources,
	"templates": catalog.Templates,
}

func kindWord(k catalog.Kind) string {
	for w, kk := range kindWords {
		if kk == k {
			return w
		}
	}
	panic(fmt.Sprintf("unknown kind %d", k))
}

// TestGolden runs the golden tests, in the style of the Go MCP SDK's
// conformance tests: each testdata/*.txtar archive is one case, holding what the upstreams answer
// (messages in) and what the catalog makes of them (the merged lists and
// the answers to resolve: the aggregated answer out). No network: the
// upstreams are the archive's pages, served through a FetchFunc.
//
// An archive's comment (the text before the first file) says what the case
// shows. Its files:
//
//	upstreams       one line per configured upstream, in config order:
//	                  <name> [prefix=<p>] [lists=shared|per_session] [tenant=no]
//	                without prefix=, the prefix is the name; "prefix=" alone
//	                means no prefix. tenant=no: configured (so its prefix is
//	                reserved) but not one of the tenant's upstreams.
//	limits          optional: list_pages=<n> list_bytes=<n> (config limits)
//	policy          optional: one rule a line, the first that matches wins,
//	                and a name no rule matches is visible:
//	                  allow|hide <kind> <upstream glob>/<name glob>
//	                kind is tools, prompts, resources, templates or *; the
//	                globs are path.Match patterns over the upstream's name and
//	                the item's original name (or URI), so "*" stops at a "/".
//	                The real policy lives in internal/tenant; this is only
//	                its shape.
//	<up>/<method>   the pages upstream <up> answers to <method> (tools/list,
//	                prompts/list, resources/list or resources/templates/list):
//	                one JSON result per page, in order, compact or indented. The
//	                first request gets the first page; a request with cursor c
//	                gets the page after the first one whose nextCursor is c. An
//	                upstream without pages for a method lists nothing.
//	resolve         optional: one query a line: <kind> <exposed name or URI>,
//	                the rest of the line, or Go-quoted for unusual characters.
//	                tools and prompts go to Resolve, resources and templates
//	                to ResolveURI, with the tenant's upstreams and the policy.
//
// and what the catalog answered, which -update rewrites:
//
//	want/<method>   the merged list (Merge, then Encode), indented; one for
//	                every method some upstream has pages for
//	want/resolve    every query, then "=>" and the upstream and original name,
//	                or "error:" and the error text (Go-quoted if it holds
//	                anything but printable ASCII); a name hidden by policy
//	                adds "| denied: <upstream> <original>" (the ResolveError's
//	                DeniedBy and DeniedName, never shown to a client)
//	want/errors     the listings that failed: <upstream> <method>: <error>
//	want/log        what the catalog logged, without times, sorted
//
// Every case runs in a catalog of its own, as one tenant's requests in one
// session: every kind some upstream has pages for is listed (each upstream
// once: listings stay fresh for an hour), then the queries are resolved.
// The case fails if the catalog leaves a goroutine behind once closed.
//
// Update the want files with
//
//	go test ./internal/catalog -run TestGolden -update
//
// and read the diff before committing it: it is the behaviour under test.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.txtar")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			runGolden(t, file)
		})
	}
}

// goldenCase is a parsed archive.
type goldenCase struct {
	cfg    *config.Config
	tenant []bool // per cfg.Upstreams: one of the tenant's upstreams
	policy []rule
	// pages are the pages each upstream answers, by "<up>/<method>".
	pages   map[string][]json.RawMessage
	queries []query
}

type rule struct {
	allow   bool
	kind    string // a kind word or "*"
	up, key string // globs
}

type query struct {
	kind catalog.Kind
	name string
}

func runGolden(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(ar.Comment)) == 0 {
		t.Error("the archive has no comment saying what the case shows")
	}
	gc, err := parseCase(ar)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	got := gc.run(t)

	if *update {
		ar.Files = slices.DeleteFunc(ar.Files, func(f txtar.File) bool { return strings.HasPrefix(f.Name, "want/") })
		for _, o := range got {
			ar.Files = append(ar.Files, txtar.File{Name: o.name, Data: []byte(o.data)})
		}
		if err := os.WriteFile(file, txtar.Format(ar), 0o666); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := make(map[string]string)
	for _, f := range ar.Files {
		if strings.HasPrefix(f.Name, "want/") {
			want[f.Name] = string(f.Data)
		}
	}
	for _, o := range got {
		w, ok := want[o.name]
		delete(want, o.name)
		if !ok {
			t.Errorf("%s: missing; the catalog answered:\n%s", o.name, o.data)
			continue
		}
		if strings.HasSuffix(o.name, "/list") {
			// A list is compared after the same indentation, so that
			// only its content and member order matter.
			if w, err = indentJSON([]byte(w)); err != nil {
				t.Errorf("%s: %v", o.name, err)
				continue
			}
		}
		if diff := cmp.Diff(w, o.data); diff != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", o.name, diff)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		t.Errorf("%s: the catalog answered nothing, want:\n%s", name, want[name])
	}
}

// output is one want/ file as the catalog answered it.
type output struct{ name, data string }

// run runs a case: lists every kind some upstream has pages for, merges
// each, resolves the queries. It checks that the catalog leaves no
// goroutine behind.
func (gc *goldenCase) run(t *testing.T) []output {
	goroutines := runtime.NumGoroutine()
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	c := catalog.New(time.Hour, log, nil)
	t.Cleanup(c.Close)
	c.Configure(gc.cfg)

	var ups []*catalog.Upstream
	for i := range gc.cfg.Upstreams {
		if gc.tenant[i] {
			up := catalog.NewUpstream(&gc.cfg.Upstreams[i])
			ups = append(ups, &up)
		}
	}
	lk := &lookup{c: c, gc: gc, scope: "session-1"}
	ctx := t.Context()

	var out []output
	var errs []string
	for _, k := range catalog.Kinds {
		method := k.Info().ListMethod
		listed := false
		for _, up := range ups {
			_, ok := gc.pages[up.Name+"/"+method]
			listed = listed || ok
		}
		if !listed {
			continue
		}
		ls := make([]*catalog.Listing, len(ups))
		for i, up := range ups {
			l, err := lk.Listing(ctx, up, k)
			if err != nil {
				// As dispatch does: one failing upstream never breaks
				// the others' list.
				errs = append(errs, fmt.Sprintf("%s %s: %v\n", up.Name, method, err))
				continue
			}
			ls[i] = l
		}
		body, err := indentJSON(catalog.Encode(k, c.Merge(k, ups, ls, lk)))
		if err != nil {
			t.Fatalf("%s: Encode gave invalid JSON: %v", method, err)
		}
		out = append(out, output{"want/" + method, body})
	}

	if len(gc.queries) > 0 {
		var b strings.Builder
		for _, q := range gc.queries {
			fmt.Fprintf(&b, "%s %s => %s\n", kindWord(q.kind), word(q.name), resolve(t, c, ups, lk, q))
		}
		out = append(out, output{"want/resolve", b.String()})
	}
	if len(errs) > 0 {
		out = append(out, output{"want/errors", strings.Join(errs, "")})
	}

	c.Close()
	if lines := strings.SplitAfter(logBuf.String(), "\n"); len(lines) > 1 {
		slices.Sort(lines) // a Listing's flagged names are logged in map order
		out = append(out, output{"want/log", strings.Join(lines, "")})
	}
	// Close waited for the walks; their goroutines may need a moment to
	// exit after saying so.
	if !testkit.Poll(5*time.Second, func() bool { return runtime.NumGoroutine() <= goroutines }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines leaked: %d before, %d after Close\n%s", goroutines, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
	return out
}

// resolve answers one query the way want/resolve spells it.
func resolve(t *testing.T, c *catalog.Catalog, ups []*catalog.Upstream, lk *lookup, q query) string {
	ctx := t.Context()
	var i int
	var orig string
	var err error
	switch q.kind {
	case catalog.Tools, catalog.Prompts:
		var it *catalog.Item
		i, it, err = c.Resolve(ctx, q.kind, q.name, ups, lk)
		if err == nil {
			if it.Exposed != q.name || it.Upstream != ups[i].Name {
				t.Errorf("resolve %s %q: item %q of %s from upstream %s", kindWord(q.kind), q.name, it.Exposed, it.Upstream, ups[i].Name)
			}
			orig = it.Original
		}
	default:
		i, orig, err = c.ResolveURI(ctx, q.kind, q.name, ups, lk)
	}
	if err == nil {
		return ups[i].Name + " " + word(orig)
	}
	ans := "error: " + text(err.Error())
	var re *catalog.ResolveError
	if errors.As(err, &re) && re.DeniedBy != "" {
		// A hidden name reads, to the client, as an unknown one.
		if unknown := (&catalog.ResolveError{Kind: re.Kind, Name: re.Name}).Error(); err.Error() != unknown {
			t.Errorf("resolve %s %q: hidden name answered %q, an unknown one %q", kindWord(q.kind), q.name, err, unknown)
		}
		ans += " | denied: " + re.DeniedBy + " " + word(re.DeniedName)
	}
	return ans
}

// lookup is one request's way into the catalog, as dispatch's: the
// fresh Listing, else a walk through the archive's pages; and the policy.
type lookup struct {
	c     *catalog.Catalog
	gc    *goldenCase
	scope string
}

func (lk *lookup) Listing(ctx context.Context, up *catalog.Upstream, k catalog.Kind) (*catalog.Listing, error) {
	if l := lk.c.Fresh(up, k, catalog.Scope{Session: lk.scope}); l != nil {
		return l, nil
	}
	pages := lk.gc.pages[up.Name+"/"+k.Info().ListMethod]
	return lk.c.Get(ctx, up, k, catalog.Scope{Session: lk.scope}, func(ctx context.Context, b catalog.Bounds) ([]json.RawMessage, bool, error) {
		return catalog.Paginate(up.Name, k, b, func(params json.RawMessage) (json.RawMessage, error) {
			return servePage(pages, params)
		})
	})
}

func (lk *lookup) Visible(k catalog.Kind, up *catalog.Upstream, original string) bool {
	for _, r := range lk.gc.policy {
		if r.kind != "*" && r.kind != kindWord(k) {
			continue
		}
		// The patterns were checked when parsed.
		if okUp, _ := path.Match(r.up, up.Name); !okUp {
			continue
		}
		if okKey, _ := path.Match(r.key, original); okKey {
			return r.allow
		}
	}
	return true
}

// servePage is an upstream answering one list request from its pages.
func servePage(pages []json.RawMessage, params json.RawMessage) (json.RawMessage, error) {
	if params == nil {
		if len(pages) == 0 {
			return json.RawMessage(`{}`), nil
		}
		return pages[0], nil
	}
	var p struct {
		Cursor string `json:"cursor"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("bad params %s: %v", params, err)
	}
	for i, pg := range pages[:max(len(pages)-1, 0)] {
		var r struct {
			NextCursor any `json:"nextCursor"`
		}
		if json.Unmarshal(pg, &r) == nil && r.NextCursor == p.Cursor {
			return pages[i+1], nil
		}
	}
	// What an upstream answers with -32602.
	return nil, fmt.Errorf("invalid cursor %q", p.Cursor)
}

func parseCase(ar *txtar.Archive) (*goldenCase, error) {
	gc := &goldenCase{cfg: &config.Config{}, pages: make(map[string][]json.RawMessage)}
	// Listings stay fresh through the case: a query reads what was listed.
	gc.cfg.Server.ListCacheTTL = config.Duration(time.Hour)
	files := make(map[string][]byte)
	for _, f := range ar.Files {
		if _, dup := files[f.Name]; dup {
			return nil, fmt.Errorf("file %s twice", f.Name)
		}
		files[f.Name] = f.Data
	}

	lines, ok := files["upstreams"]
	if !ok {
		return nil, errors.New("no upstreams file")
	}
	names := make(map[string]bool)
	for _, line := range textLines(lines) {
		f := strings.Fields(line)
		u := config.Upstream{Name: f[0], URL: "http://" + f[0] + ".invalid/mcp"}
		if names[u.Name] {
			return nil, fmt.Errorf("upstreams: %s twice", u.Name)
		}
		names[u.Name] = true
		inTenant := true
		for _, opt := range f[1:] {
			key, val, _ := strings.Cut(opt, "=")
			switch key {
			case "prefix":
				u.Prefix = &val
			case "lists":
				if val != config.ListsShared && val != config.ListsPerSession {
					return nil, fmt.Errorf("upstreams: %s: lists=%s", u.Name, val)
				}
				u.Lists = val
			case "tenant":
				if val != "no" {
					return nil, fmt.Errorf("upstreams: %s: tenant=%s (only tenant=no)", u.Name, val)
				}
				inTenant = false
			default:
				return nil, fmt.Errorf("upstreams: %s: unknown option %q", u.Name, opt)
			}
		}
		gc.cfg.Upstreams = append(gc.cfg.Upstreams, u)
		gc.tenant = append(gc.tenant, inTenant)
	}

	for _, line := range textLines(files["limits"]) {
		for _, opt := range strings.Fields(line) {
			key, val, _ := strings.Cut(opt, "=")
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("limits: %s: %v", opt, err)
			}
			switch key {
			case "list_pages":
				gc.cfg.Limits.ListPages = int(n)
			case "list_bytes":
				gc.cfg.Limits.ListBytes = n
			default:
				return nil, fmt.Errorf("limits: unknown %q", key)
			}
		}
	}

	for _, line := range textLines(files["policy"]) {
		f := strings.Fields(line)
		if len(f) != 3 || (f[0] != "allow" && f[0] != "hide") {
			return nil, fmt.Errorf("policy: %q: want allow|hide <kind> <upstream>/<name>", line)
		}
		if _, ok := kindWords[f[1]]; !ok && f[1] != "*" {
			return nil, fmt.Errorf("policy: %q: unknown kind %q", line, f[1])
		}
		up, key, ok := strings.Cut(f[2], "/")
		if !ok {
			return nil, fmt.Errorf("policy: %q: want <upstream>/<name>", line)
		}
		for _, p := range []string{up, key} {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("policy: %q: %v", line, err)
			}
		}
		gc.policy = append(gc.policy, rule{allow: f[0] == "allow", kind: f[1], up: up, key: key})
	}

	for _, line := range textLines(files["resolve"]) {
		kw, name, _ := strings.Cut(line, " ")
		k, ok := kindWords[kw]
		if !ok {
			return nil, fmt.Errorf("resolve: %q: unknown kind %q", line, kw)
		}
		name = strings.TrimSpace(name)
		if strings.HasPrefix(name, `"`) {
			var err error
			if name, err = strconv.Unquote(name); err != nil {
				return nil, fmt.Errorf("resolve: %q: %v", line, err)
			}
		}
		if name == "" {
			return nil, fmt.Errorf("resolve: %q: no name", line)
		}
		gc.queries = append(gc.queries, query{k, name})
	}

	methods := make(map[string]bool)
	for _, k := range catalog.Kinds {
		methods[k.Info().ListMethod] = true
	}
	for _, f := range ar.Files {
		switch f.Name {
		case "upstreams", "limits", "policy", "resolve":
			continue
		}
		if strings.HasPrefix(f.Name, "want/") {
			continue
		}
		up, method, _ := strings.Cut(f.Name, "/")
		i := slices.IndexFunc(gc.cfg.Upstreams, func(u config.Upstream) bool { return u.Name == up })
		if i < 0 || !methods[method] {
			return nil, fmt.Errorf("file %s: neither a known file nor <upstream>/<list method>", f.Name)
		}
		if !gc.tenant[i] {
			return nil, fmt.Errorf("file %s: upstream %s is not the tenant's: nothing would ask for its pages", f.Name, up)
		}
		dec := json.NewDecoder(bytes.NewReader(f.Data))
		var pages []json.RawMessage
		for {
			var page json.RawMessage
			if err := dec.Decode(&page); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("file %s: page %d: %v", f.Name, len(pages)+1, err)
			}
			pages = append(pages, page)
		}
		gc.pages[f.Name] = pages
	}
	return gc, nil
}

// textLines returns the lines of a text file that say something: neither
// blank nor "#" comments.
func textLines(b []byte) []string {
	var out []string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// text returns an error text as want/resolve shows it: as it is if it is
// printable ASCII, else Go-quoted (it may quote the name asked for).
func text(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r >= 0x7f }) {
		return s
	}
	return strconv.QuoteToASCII(s)
}

// word returns s as want/resolve shows a name or URI: as it is if it is
// plain printable ASCII without spaces or quotes, else Go-quoted.
func word(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r >= 0x7f }) {
		return s
	}
	return strconv.QuoteToASCII(s)
}

func indentJSON(b []byte) (string, error) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(b), "", "  "); err != nil {
		return "", err
	}
	buf.WriteByte('\n')
	return buf.String(), nil
}
