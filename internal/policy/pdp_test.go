package policy

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// pdpPolicy is the PDP's own policy: sre may do anything; everyone may
// read; create_issue only in sandbox repositories.
const pdpPolicy = `"sre" in subject.properties.groups || resource.properties.original_name.startsWith("get_") ||
	(resource.properties.original_name == "create_issue" && has(context.arguments) && context.arguments.repo.startsWith("sandbox-"))`

// pdpEngine compiles rules against a PDP at url (pdp holds extra keys of
// policy.pdp) with client c.
func pdpEngine(t testing.TB, url, pdp, rules string, c *http.Client, events *[]PDPEvent) *Engine {
	t.Helper()
	y := "policy:\n  pdp:\n    url: " + url + "\n    headers: {Authorization: \"Bearer ${PDP_TOKEN}\"}\n" + pdp + head + rules
	cfg, err := config.Parse("test.yaml", []byte(y), func(string) string { return "s3cret" })
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	o := Options{HTTPClient: c}
	if events != nil {
		o.OnPDP = func(ev PDPEvent) { *events = append(*events, ev) }
	}
	e, err := Compile(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

const pdpRules = `      - {name: ask, phase: list, match: {tools: ["*"]}, effect: pdp}
      - {name: ask-args, phase: call, match: {tools: [create_issue]}, effect: pdp, pdp_arguments: true}
`

// TestPDP: decisions from a real AuthZEN PDP over HTTP, with the shapes
// the spec defines, the configured header, and arguments in the context
// only when the rule sends them.
func TestPDP(t *testing.T) {
	pdp := testkit.NewAuthZEN(t, pdpPolicy)
	pdp.RequireHeader("Authorization", "Bearer s3cret")
	var events []PDPEvent
	e := pdpEngine(t, pdp.URL, "", pdpRules, nil, &events)
	ctx := context.Background()
	sre, dev := principal("sre"), principal("dev")
	for _, c := range []struct {
		in    *Input
		allow bool
	}{
		{listed(sre, "github", "delete_repo"), true},
		{listed(dev, "github", "delete_repo"), false},
		{listed(dev, "github", "get_issue"), true},
		{call(dev, "github", "create_issue", `{"repo":"sandbox-1"}`), false}, // the list phase asks without arguments
		{call(sre, "github", "create_issue", `{"repo":"prod"}`), true},
	} {
		d := e.Decide(ctx, c.in)
		if d.Allow != c.allow || d.By != ByPDP || d.Err != nil {
			t.Errorf("%s %s: %+v, want allow %v by the PDP", c.in.Principal.Claims["groups"], c.in.Original, d, c.allow)
		}
	}
	if v := pdp.Violations(); len(v) > 0 {
		t.Fatalf("requests that break AuthZEN: %q", v)
	}
	reqs := pdp.Requests()
	if len(reqs) != 6 || len(events) != 6 {
		t.Fatalf("%d requests, %d events; want 6 (sre's create_issue asks twice: list, then call)", len(reqs), len(events))
	}
	ev := reqs[len(reqs)-1].Evaluations[0]
	subj := ev["subject"].(map[string]any)
	res := ev["resource"].(map[string]any)
	if subj["type"] != "user" || subj["id"] != "alice" || res["type"] != "mcp_tool" || res["id"] != "github/create_issue" ||
		ev["action"].(map[string]any)["name"] != "tools/call" {
		t.Errorf("evaluation %v", ev)
	}
	if args := ev["context"].(map[string]any)["arguments"].(map[string]any); args["repo"] != "prod" {
		t.Errorf("context %v", ev["context"])
	}
	if _, ok := reqs[0].Evaluations[0]["context"]; ok {
		t.Errorf("a list-phase evaluation has a context: %v", reqs[0].Evaluations[0])
	}

	// A batch for a list: one request for the items not in the cache.
	ins := []Input{*listed(dev, "github", "a"), *listed(dev, "github", "get_b"), *listed(dev, "github", "delete_repo")}
	ds := e.DecideBatch(ctx, ins)
	if ds[0].Allow || !ds[1].Allow || ds[2].Allow || !ds[0].Unknown || ds[2].By != ByPDP {
		t.Errorf("batch: %+v", ds)
	}
	reqs = pdp.Requests()
	if last := reqs[len(reqs)-1]; len(reqs) != 7 || last.Path != EvaluationsPath || len(last.Evaluations) != 2 {
		t.Errorf("batch: %d requests, the last %+v; want one to %s with 2 evaluations (delete_repo is cached)", len(reqs), last, EvaluationsPath)
	}
	if v := pdp.Violations(); len(v) > 0 {
		t.Fatalf("requests that break AuthZEN: %q", v)
	}
	if c := e.Counters(); c.PDPRequests != 7 || c.PDPCacheHits != 1 || c.PDPErrors != 0 {
		t.Errorf("counters %+v", c)
	}
}

// TestPDPFailure: a PDP that fails or does not answer in time: rules
// fail closed unless they say open, and the error names no secret.
func TestPDPFailure(t *testing.T) {
	const rules = `      - {name: closed, phase: list, match: {tools: [a]}, effect: pdp}
      - {name: open, phase: list, match: {tools: [b]}, effect: pdp, on_pdp_error: open}
`
	for _, c := range []struct {
		name  string
		setup func(*testkit.AuthZEN) func()
		err   string
	}{
		{"status", func(p *testkit.AuthZEN) func() { p.FailWith(http.StatusInternalServerError); return func() {} }, "pdp: HTTP status 500"},
		{"unauthorized", func(p *testkit.AuthZEN) func() { p.RequireHeader("Authorization", "other"); return func() {} }, "pdp: HTTP status 401"},
		{"timeout", func(p *testkit.AuthZEN) func() { return p.Hold() }, "pdp: no answer within 500ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pdp := testkit.NewAuthZENHandler(t, "true")
				release := c.setup(pdp)
				defer release()
				e := pdpEngine(t, "http://pdp.test", "", rules, pdp.Client(), nil)
				start := time.Now()
				d := e.Decide(context.Background(), listed(principal(), "github", "a"))
				if d.Allow || d.By != ByPDP || d.Err == nil || d.Err.Error() != c.err {
					t.Errorf("closed: %+v, want refused on %q", d, c.err)
				}
				d = e.Decide(context.Background(), listed(principal(), "github", "b"))
				if !d.Allow || d.By != ByPDP || d.Err == nil {
					t.Errorf("open: %+v, want allowed on an error", d)
				}
				if d.Err != nil && strings.Contains(d.Err.Error(), "s3cret") {
					t.Errorf("the error holds the secret: %v", d.Err)
				}
				if c.name == "timeout" && time.Since(start) != time.Second {
					t.Errorf("the two decisions took %s, want 2 × 500ms", time.Since(start))
				}
				if got := e.Counters(); got.PDPErrors != 2 || got.Errors != 2 {
					t.Errorf("counters %+v", got)
				}
			})
		})
	}
}

// TestPDPCache: decisions are reused for their TTL, at most cache_size
// of them, the oldest dropped first.
func TestPDPCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pdp := testkit.NewAuthZENHandler(t, `"sre" in subject.properties.groups`)
		e := pdpEngine(t, "http://pdp.test", "    cache_ttl: 10s\n    cache_size: 2\n", pdpRules, pdp.Client(), nil)
		ctx := context.Background()
		ask := func(tool string) {
			t.Helper()
			if d := e.Decide(ctx, listed(principal("sre"), "github", tool)); !d.Allow {
				t.Fatalf("%s: %+v", tool, d)
			}
		}
		requests := func(want int) {
			t.Helper()
			if got := len(pdp.Requests()); got != want {
				t.Errorf("%d requests to the PDP, want %d", got, want)
			}
		}
		ask("a")
		ask("a")
		requests(1)
		// Another principal is another key.
		if d := e.Decide(ctx, listed(principal("dev"), "github", "a")); d.Allow {
			t.Errorf("dev: %+v", d)
		}
		requests(2)
		time.Sleep(10 * time.Second)
		ask("a") // expired: asked again
		requests(3)
		ask("b") // drops dev's "a", the oldest
		ask("c") // drops sre's "a"
		requests(5)
		if n := e.pdp.cache.len(); n != 2 {
			t.Errorf("%d decisions kept, want 2", n)
		}
		ask("a") // dropped by b and c
		requests(6)
		if c := e.Counters(); c.PDPCacheHits != 1 || c.PDPCacheEvictions < 2 {
			t.Errorf("counters %+v", c)
		}
	})
}

// BenchmarkDecide: one call against 10 CEL rules and 20 pattern rules
// (none of which applies, so that all are tried), as issue 29 asks.
func BenchmarkDecide(b *testing.B) {
	var rules strings.Builder
	for i := range 20 {
		fmt.Fprintf(&rules, "      - {phase: %s, match: {tools: [\"tool_%d_*\", \"other_%d\"]}, when: {groups: [g%d]}, effect: deny}\n",
			[]string{"list", "call"}[i%2], i, i, i)
	}
	for i := range 10 {
		fmt.Fprintf(&rules, "      - {phase: %s, when: {cel: '\"g%d\" in principal.groups && request.upstream == \"github\"'}, effect: deny}\n",
			[]string{"list", "call"}[i%2], i)
	}
	e := compile(b, rules.String(), Options{})
	in := call(principal("sre"), "github", "create_issue", `{"repo":"sandbox-1","title":"x"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d := e.Decide(ctx, in); !d.Allow {
			b.Fatal(d)
		}
	}
}

// TestConcurrent: one Engine decides from many goroutines (run with
// -race), the PDP's cache and counters shared.
func TestConcurrent(t *testing.T) {
	pdp := testkit.NewAuthZENHandler(t, `"sre" in subject.properties.groups`)
	e := pdpEngine(t, "http://pdp.test", "", pdpRules+
		"      - {phase: call, when: {cel: 'principal.subject == \"x\"'}, effect: deny}\n", pdp.Client(), nil)
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 50 {
				in := call(principal("sre"), "github", fmt.Sprintf("t%d", (g+i)%5), `{"a":1}`)
				if d := e.Decide(context.Background(), in); !d.Allow {
					t.Errorf("%+v", d)
					return
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	// Concurrent identical requests share one (singleflight): five
	// distinct ones, give or take a race between a cache miss and a
	// flight that just ended.
	if c := e.Counters(); c.Allowed != 400 || c.PDPRequests < 5 || c.PDPRequests > 40 || c.PDPErrors != 0 {
		t.Errorf("counters %+v", c)
	}
}

// BenchmarkDecideArguments10KB is the decision of a call of 10 KB of
// arguments that call rules read, with CEL and with a matcher, none of
// which applies: arguments are decoded once per decision.
func BenchmarkDecideArguments10KB(b *testing.B) {
	var rules strings.Builder
	for i := range 5 {
		fmt.Fprintf(&rules, "      - {phase: call, when: {cel: 'has(arguments.text) && arguments.text == \"never-%d\"'}, effect: deny}\n", i)
	}
	rules.WriteString("      - {phase: call, when: {arguments: [{name: text, equals: never}]}, effect: deny}\n")
	e := compile(b, rules.String(), Options{})
	in := call(principal("sre"), "github", "create_issue", `{"text":"`+strings.Repeat("x", 10240)+`"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d := e.Decide(ctx, in); !d.Allow {
			b.Fatal(d)
		}
	}
}

// TestDecisionCacheShares: the PDP's cache is shared by all tenants;
// when it is full, a principal holding a quarter of it loses its own
// oldest decision, and otherwise the tenant holding the most loses.
func TestDecisionCacheShares(t *testing.T) {
	var evicted atomic.Uint64
	c := newDecisionCache(time.Hour, 8, &evicted)
	key := func(s string) [32]byte { return sha256.Sum256([]byte(s)) }
	a1, a2, b1 := holder{"a", "a\x00one"}, holder{"a", "a\x00two"}, holder{"b", "b\x00one"}
	// Tenant b holds three, a's two principals one each.
	for i := range 3 {
		c.put(key("b"+strconv.Itoa(i)), b1, true)
	}
	c.put(key("a1-0"), a1, true)
	c.put(key("a2-0"), a2, true)
	// a1 floods: up to the size, then past it. Holding its share (2 of
	// 8), it churns its own decisions; nobody else's goes.
	for i := 1; i < 20; i++ {
		c.put(key("a1-"+strconv.Itoa(i)), a1, true)
	}
	for _, k := range []string{"b0", "b1", "b2", "a2-0", "a1-19"} {
		if _, ok := c.get(key(k)); !ok {
			t.Errorf("%s was evicted", k)
		}
	}
	if _, ok := c.get(key("a1-0")); ok {
		t.Error("a1's oldest stayed")
	}
	if c.len() != 8 || evicted.Load() == 0 {
		t.Errorf("len %d, evicted %d", c.len(), evicted.Load())
	}
	// A new principal of tenant b, under its share: the tenant holding
	// the most (a, 5 of 8) loses its oldest.
	b2 := holder{"b", "b\x00two"}
	c.put(key("b2-0"), b2, true)
	if _, ok := c.get(key("a2-0")); ok {
		t.Error("tenant a's oldest stayed")
	}
	for _, k := range []string{"b0", "b1", "b2", "b2-0"} {
		if _, ok := c.get(key(k)); !ok {
			t.Errorf("%s was evicted", k)
		}
	}
}

// BenchmarkDecideCallCompare is what one tools/call costs the engine
// with bench/compare.sh's RULES=1 rules: 20 pattern rules on other tools
// and 10 CEL rules on the one called, half in each phase; a call is
// decided in both phases (the list phase first: it must be visible).
func BenchmarkDecideCallCompare(b *testing.B) {
	var rules strings.Builder
	for i := range 20 {
		fmt.Fprintf(&rules, "      - {phase: %s, match: {tools: [\"other_%d_*\"]}, effect: deny}\n", []string{"list", "call"}[i%2], i)
	}
	for i := range 10 {
		if i%2 == 0 {
			fmt.Fprintf(&rules, "      - {phase: list, match: {tools: [echo]}, when: {cel: 'principal.subject == \"nobody-%d\"'}, effect: deny}\n", i)
		} else {
			fmt.Fprintf(&rules, "      - {phase: call, match: {tools: [echo]}, when: {cel: 'has(arguments.text) && arguments.text == \"never-%d\"'}, effect: deny}\n", i)
		}
	}
	e := compile(b, rules.String(), Options{})
	p := principal("sre")
	in := call(p, "up", "echo", `{"text":"`+strings.Repeat("x", 100)+`"}`)
	ls := listed(p, "up", "echo")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, c := *ls, *in
		if d := e.Decide(ctx, &l); !d.Allow {
			b.Fatal(d)
		}
		if d := e.Decide(ctx, &c); !d.Allow {
			b.Fatal(d)
		}
	}
}
