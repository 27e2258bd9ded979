package policy

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/policy/celenv"
	"github.com/mcpgw/gateway/internal/tenant"
)

// head is the config every test's rules go into: the tenant's rules are
// appended at its end (indented by 4), after an upstream-level list.
const head = `server: {public_url: "https://mcp.example.com/mcp"}
auth: {issuers: [{name: idp, issuer_url: "https://idp.example.com", tenant_claim: tenant}]}
upstreams:
  - name: github
    url: http://127.0.0.1:1/mcp
  - name: shell
    url: http://127.0.0.1:1/mcp
tenants:
  - id: acme
    upstreams:
      - name: github
      - name: shell
    policy:
`

// compile parses head with rules (YAML list items, indented as under
// "policy:") and compiles it.
func compile(t testing.TB, rules string, o Options) *Engine {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(head+rules), func(string) string { return "secret" })
	if err != nil {
		t.Fatalf("%v\n%s", err, head+rules)
	}
	e, err := Compile(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func principal(groups ...string) *Principal {
	gs := make([]any, len(groups))
	for i, g := range groups {
		gs[i] = g
	}
	return &Principal{
		Subject: "alice", Tenant: "acme", Scopes: []string{"mcp", "repo:write"},
		Claims: map[string]any{
			"sub": "alice", "azp": "agent-1", "groups": gs,
			"dept": "eng", "level": float64(3), "org": map[string]any{"region": "eu", "teams": []any{"a", "b"}},
			"scope": "mcp repo:write",
		},
	}
}

func call(p *Principal, upstream, tool, args string) *Input {
	return &Input{Principal: p, Phase: PhaseCall, Method: "tools/call", Kind: tenant.Tool,
		Upstream: upstream, Name: upstream + "__" + tool, Original: tool, Arguments: json.RawMessage(args)}
}

func listed(p *Principal, upstream, tool string) *Input {
	return &Input{Principal: p, Phase: PhaseList, Method: "tools/list", Kind: tenant.Tool,
		Upstream: upstream, Name: upstream + "__" + tool, Original: tool}
}

// TestConditions: each condition kind, in a deny rule, against a
// principal and call that meet it and one that does not.
func TestConditions(t *testing.T) {
	alice := principal("sre")
	other := &Principal{Subject: "bob", Tenant: "acme", ClientID: "agent-2", Scopes: []string{"mcp"},
		Claims: map[string]any{"groups": "ops", "dept": "sales", "level": float64(1), "scope": "mcp"}}
	for _, c := range []struct {
		name, when string
		phase      string
		args       string // arguments of the call meeting it; the other call has {}
		denyOther  bool   // the condition holds for other too
	}{
		{name: "claims equals", when: `claims: [{claim: dept, equals: eng}]`},
		{name: "claims equals number", when: `claims: [{claim: level, equals: "3"}]`},
		{name: "claims dotted path", when: `claims: [{claim: org.region, equals: eu}]`},
		{name: "claims contains array", when: `claims: [{claim: org.teams, contains: b}]`},
		{name: "claims contains word", when: `claims: [{claim: scope, contains: "repo:write"}]`},
		{name: "claims one_of", when: `claims: [{claim: dept, one_of: [eng, research]}]`},
		{name: "groups array", when: `groups: [admins, sre]`},
		{name: "groups string", when: `groups: [ops]`, denyOther: true},
		{name: "scopes all", when: `scopes: [mcp, "repo:write"]`},
		{name: "client id from azp", when: `client_ids: [agent-1]`},
		{name: "client id given", when: `client_ids: [agent-2]`, denyOther: true},
		{name: "argument exact", phase: "call", when: `arguments: [{name: repo, equals: prod}]`, args: `{"repo":"prod"}`},
		{name: "argument number", phase: "call", when: `arguments: [{name: n, equals: "10"}]`, args: `{"n":10}`},
		{name: "argument glob", phase: "call", when: `arguments: [{name: repo, glob: "prod-*"}]`, args: `{"repo":"prod-eu"}`},
		{name: "argument one_of", phase: "call", when: `arguments: [{name: repo, one_of: [a, b]}]`, args: `{"repo":"b"}`},
		{name: "argument pointer", phase: "call", when: `arguments: [{pointer: /repo/owner, equals: acme}]`, args: `{"repo":{"owner":"acme"}}`},
		{name: "argument pointer escape", phase: "call", when: `arguments: [{pointer: "/a~1b/0", equals: x}]`, args: `{"a/b":["x"]}`},
		{name: "cel principal", when: `cel: '"sre" in principal.groups && principal.claims.dept == "eng"'`},
		{name: "cel request", when: `cel: 'request.upstream == "github" && request.original == "deploy" && request.kind == "tool" && (principal.subject == "alice" || request.method == "x")'`},
		{name: "cel arguments", phase: "call", when: `cel: 'has(arguments.force) && arguments.force == true'`, args: `{"force":true}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			phase := c.phase
			if phase == "" {
				phase = "list"
			}
			e := compile(t, "      - {name: r, phase: "+phase+", effect: deny, when: {"+c.when+"}}\n", Options{})
			args := c.args
			if args == "" {
				args = "{}"
			}
			d := e.Decide(context.Background(), call(alice, "github", "deploy", args))
			if c.denyOther {
				d = e.Decide(context.Background(), call(other, "github", "deploy", args))
			}
			if d.Allow || d.Name != "r" || d.By != ByRule || d.Err != nil {
				t.Errorf("meeting it: %+v, want denied by rule r", d)
			}
			who := other
			if c.denyOther {
				who = alice
			}
			if d := e.Decide(context.Background(), call(who, "github", "deploy", "{}")); !d.Allow || d.By != ByDefault {
				t.Errorf("not meeting it: %+v, want the default allow", d)
			}
		})
	}
}

// TestFirstMatchWins: rules are tried in order (the tenant's, then the
// upstream's), the first that applies decides, and none applying allows.
func TestFirstMatchWins(t *testing.T) {
	const rules = `      - {name: sre-deploy, phase: list, match: {tools: ["deploy_*"]}, when: {groups: [sre]}, effect: allow}
      - {name: no-deploy, phase: list, match: {tools: ["deploy_*"]}, effect: deny}
      - {name: no-shell-for-agent, phase: list, match: {upstreams: [shell]}, when: {client_ids: [agent-1]}, effect: deny}
`
	cfg, err := config.Parse("test.yaml", []byte(strings.Replace(head, "      - name: shell\n",
		"      - name: shell\n        policy:\n          - {name: shell-allow-ls, phase: list, match: {tools: [ls]}, effect: allow}\n", 1)+rules), nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Compile(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		in    *Input
		allow bool
		rule  string
		index int
	}{
		{listed(principal("sre"), "github", "deploy_prod"), true, `tenants[0].policy[0] "sre-deploy"`, 0},
		{listed(principal("dev"), "github", "deploy_prod"), false, `tenants[0].policy[1] "no-deploy"`, 1},
		{listed(principal("dev"), "github", "search"), true, "default: no list-phase rule applies", -1},
		{listed(principal("dev"), "shell", "ls"), false, `tenants[0].policy[2] "no-shell-for-agent"`, 2},
		{listed(&Principal{Tenant: "acme", ClientID: "human"}, "shell", "ls"), true, `tenants[0].upstreams[1].policy[0] "shell-allow-ls"`, 3},
		{listed(&Principal{Tenant: "other"}, "shell", "ls"), true, "default: no list-phase rule applies", -1},
	} {
		d := e.Decide(ctx, c.in)
		if d.Allow != c.allow || d.Rule() != c.rule || d.Index != c.index {
			t.Errorf("%s %s/%s: allow %v by %s (#%d), want %v by %s (#%d)", c.in.Principal.Subject, c.in.Upstream, c.in.Original,
				d.Allow, d.Rule(), d.Index, c.allow, c.rule, c.index)
		}
	}
	if !e.HasRules("acme", "github") || e.HasRules("other", "github") {
		t.Error("HasRules")
	}
}

// TestPhases: list rules decide lists and calls (a hidden tool is
// unknown); call rules only calls, with an actionable refusal.
func TestPhases(t *testing.T) {
	e := compile(t, `      - {name: contractors, phase: list, match: {tools: ["*"]}, when: {groups: [contractors]}, unless: {cel: 'request.original.startsWith("get_")'}, effect: deny}
      - name: sandbox-only
        phase: call
        match: {tools: [create_issue]}
        unless: {arguments: [{name: repo, glob: "sandbox-*"}]}
        effect: deny
        message: Use a sandbox repository.
      - {name: no-force, phase: call, match: {tools: [push]}, when: {arguments: [{name: force, equals: "true"}]}, effect: deny, refusal: error}
`, Options{})
	ctx := context.Background()
	contractor, dev := principal("contractors"), principal("dev")

	if d := e.Decide(ctx, listed(contractor, "github", "create_issue")); d.Allow || !d.Unknown {
		t.Errorf("contractor list create_issue: %+v", d)
	}
	if d := e.Decide(ctx, call(contractor, "github", "create_issue", `{"repo":"sandbox-1"}`)); d.Allow || !d.Unknown || d.AsResult {
		t.Errorf("contractor call of a hidden tool: %+v, want unknown", d)
	}
	if d := e.Decide(ctx, listed(contractor, "github", "get_issue")); !d.Allow {
		t.Errorf("contractor list get_issue: %+v", d)
	}
	// The list phase does not consult call rules.
	if d := e.Decide(ctx, listed(dev, "github", "create_issue")); !d.Allow {
		t.Errorf("dev list create_issue: %+v", d)
	}
	d := e.Decide(ctx, call(dev, "github", "create_issue", `{"repo":"prod"}`))
	want := `refused by policy rule "sandbox-only": argument "repo" must match "sandbox-*". Use a sandbox repository.`
	if d.Allow || d.Unknown || !d.AsResult || d.Message != want || d.Phase != PhaseCall {
		t.Errorf("dev create_issue prod: %+v\nwant message %q", d, want)
	}
	if strings.Contains(d.Message, "prod") {
		t.Errorf("the refusal quotes the argument's value: %q", d.Message)
	}
	if d := e.Decide(ctx, call(dev, "github", "create_issue", `{}`)); d.Allow || !d.AsResult {
		t.Errorf("dev create_issue without repo: %+v", d)
	}
	if d := e.Decide(ctx, call(dev, "github", "create_issue", `{"repo":"sandbox-7"}`)); !d.Allow {
		t.Errorf("dev create_issue sandbox: %+v", d)
	}
	d = e.Decide(ctx, call(dev, "github", "push", `{"force":true}`))
	if d.Allow || d.AsResult || d.Message != `refused by policy rule "no-force": argument "force" must not be "true"` {
		t.Errorf("push force: %+v", d)
	}
}

// TestValidation: what config validation refuses, with its line.
func TestValidation(t *testing.T) {
	for _, c := range []struct{ name, rules, want string }{
		{"list rule reading arguments", "      - phase: list\n        effect: deny\n        when:\n          arguments: [{name: repo, equals: x}]\n",
			`test.yaml:17: tenants[0].policy[0].when.arguments[0]: a list-phase rule cannot read arguments`},
		{"list rule reading arguments in cel", "      - phase: list\n        effect: deny\n        when:\n          cel: 'arguments.repo == \"x\"'\n",
			`test.yaml:17: tenants[0].policy[0].when.cel: a list-phase rule cannot read arguments`},
		{"cel typo", "      - phase: call\n        effect: deny\n        when: {cel: 'principal.group == \"x\"'}\n",
			`test.yaml:16: tenants[0].policy[0].when.cel: at 1:10: undeclared reference to 'principal.group'`},
		{"cel type error", "      - phase: call\n        effect: deny\n        when: {cel: 'request.name + 1 == 2'}\n",
			`test.yaml:16: tenants[0].policy[0].when.cel: at 1:14: found no matching overload for '_+_'`},
		{"cel not bool", "      - phase: call\n        effect: deny\n        when: {cel: 'request.name'}\n",
			`test.yaml:16: tenants[0].policy[0].when.cel: must be a bool expression, is string`},
		{"cel cost", "      - phase: call\n        effect: deny\n        when: {cel: 'principal.claims.all(a, principal.claims.all(b, principal.claims.all(c, a + b + c != \"\")))'}\n",
			`test.yaml:16: tenants[0].policy[0].when.cel: estimated worst-case cost`},
		{"no phase", "      - {effect: deny}\n", `test.yaml:14: tenants[0].policy[0].phase: is required`},
		{"pdp without pdp", "      - {phase: list, effect: pdp}\n", `tenants[0].policy[0].effect: is "pdp" but policy.pdp is not configured`},
		{"two matchers", "      - {phase: call, effect: deny, when: {arguments: [{name: a, equals: x, glob: y}]}}\n",
			`tenants[0].policy[0].when.arguments[0]: must set exactly one of equals, glob and one_of`},
		{"bad pointer", "      - {phase: call, effect: deny, when: {arguments: [{pointer: a, equals: x}]}}\n",
			`tenants[0].policy[0].when.arguments[0].pointer: "a" is not a JSON pointer`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse("test.yaml", []byte(head+c.rules), nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error:\n%v\nwant it to hold:\n%s", err, c.want)
			}
		})
	}
	// A lower limit refuses what the default accepts.
	rules := "      - {phase: list, effect: deny, when: {cel: 'principal.groups.exists(g, g == \"x\")'}}\n"
	if _, err := config.Parse("test.yaml", []byte(head+rules), nil); err != nil {
		t.Fatal(err)
	}
	_, err := config.Parse("test.yaml", []byte("policy: {cel_cost_limit: 10}\n"+head+rules), nil)
	if err == nil || !strings.Contains(err.Error(), "test.yaml:15: tenants[0].policy[0].when.cel: estimated worst-case cost") {
		t.Errorf("cel_cost_limit 10: %v", err)
	}
}

// TestHostileInputs: arguments the engine will not read, and a CEL
// expression that runs out of budget, refuse the call (fail closed)
// without reading more than the bounds.
func TestHostileInputs(t *testing.T) {
	e := compile(t, `      - {name: repo, phase: call, match: {tools: [a]}, when: {arguments: [{name: repo, equals: x}]}, effect: deny}
      - {name: cel, phase: call, match: {tools: [b]}, when: {cel: 'arguments.exists(k, k == "x")'}, effect: allow}
      - {name: costly, phase: call, match: {tools: [c]}, when: {cel: 'arguments.exists(k, k + k == "")'}, effect: deny}
`, Options{})
	huge := `{"repo":"` + strings.Repeat("a", MaxArgumentBytes) + `"}`
	deep := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	wide := func() string {
		var b strings.Builder
		b.WriteString("{")
		for i := range 50000 {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"k` + strconv.Itoa(i) + `":1`)
		}
		b.WriteString("}")
		return b.String()
	}()
	ctx := context.Background()
	for _, c := range []struct{ tool, args, err string }{
		{"a", huge, ErrArguments.Error()},
		{"a", deep, ErrArguments.Error()},
		{"a", `[1,2]`, ErrArguments.Error()},
		{"a", `{"repo":`, ErrArguments.Error()},
		{"b", deep, ErrArguments.Error()},
		{"b", `{"y":1}`, ""}, // holds false: no error, the default
		{"c", wide, "cost limit"},
	} {
		d := e.Decide(ctx, call(principal(), "github", c.tool, c.args))
		switch {
		case c.err == "" && (!d.Allow || d.Err != nil):
			t.Errorf("%s %.40s: %+v, want allowed", c.tool, c.args, d)
		case c.err != "" && (d.Allow || d.Err == nil || !strings.Contains(d.Err.Error(), c.err)):
			t.Errorf("%s %.40s: %+v, want refused on an error holding %q", c.tool, c.args, d, c.err)
		}
	}
	if c := e.Counters(); c.Errors != 6 || c.Denied != 6 || c.Allowed != 1 {
		t.Errorf("counters %+v", c)
	}
}

func TestArguments(t *testing.T) {
	for _, c := range []struct {
		s    string
		deep bool
	}{
		{`{"a":[1,{"b":2}]}`, false},
		{`{"a":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}`, false},
		{`{"a":"\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}`, false},
		{`{"a":` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `}`, false},
		{`{"a":` + strings.Repeat("[", 32) + strings.Repeat("]", 32) + `}`, true},
	} {
		_, err := parseArguments(json.RawMessage(c.s))
		if (err != nil) != c.deep {
			t.Errorf("parseArguments(%.30s): %v", c.s, err)
		}
	}
	for _, c := range []struct {
		raw string
		err bool
	}{
		{`{"a":1}`, false},
		{``, false},
		{`null`, false},
		{`"x"`, true},
		{`{"a":1,"a":2}`, true}, // one name, two values: refused
		{`{"a":`, true},
	} {
		st := &state{in: &Input{Arguments: json.RawMessage(c.raw)}}
		if _, err := st.arguments(argNeed{all: true}); errors.Is(err, ErrArguments) != c.err {
			t.Errorf("arguments(%s): %v", c.raw, err)
		}
	}
	// Only the members read are decoded; nesting is bounded over them all.
	st := &state{in: &Input{Arguments: json.RawMessage(`{"ok":1,"big":[1e999]}`)}}
	if args, err := st.arguments(argNeed{names: []string{"ok"}}); err != nil || args["ok"] != 1.0 || len(args) != 1 {
		t.Errorf("ok: %v %v", args, err)
	}
	if _, err := st.arguments(argNeed{names: []string{"big"}}); !errors.Is(err, ErrArguments) {
		t.Errorf("big: %v", err)
	}
	st = &state{in: &Input{Arguments: json.RawMessage(`{"ok":1,"deep":` + strings.Repeat("[", 32) + strings.Repeat("]", 32) + `}`)}}
	if _, err := st.arguments(argNeed{names: []string{"ok"}}); !errors.Is(err, ErrArguments) {
		t.Errorf("deep: %v", err)
	}
}

// TestByteCosts: comparing strings is charged by their bytes, never less
// than CEL's standard charge by runes, so the runtime cost limit holds as
// strictly.
func TestByteCosts(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		runes int
	}{
		{strings.Repeat("x", 10240), "never", 5},
		{strings.Repeat("é", 4000), strings.Repeat("é", 4000), 4000},
		{"", "a", 0},
	} {
		got := (byteCosts{}).CallCost("_==_", overloads.Equals, []ref.Val{types.String(c.a), types.String(c.b)}, types.False)
		std := uint64(math.Ceil(float64(c.runes) * 0.1))
		if got == nil || *got < std {
			t.Errorf("%d/%d bytes: charged %v, the standard charge is %d", len(c.a), len(c.b), got, std)
		}
	}
	if (byteCosts{}).CallCost("_==_", overloads.Equals, []ref.Val{types.Int(1), types.Int(2)}, types.False) != nil {
		t.Error("charged a comparison of integers: the standard tracker's")
	}
}

// TestArgumentsRead: an expression is known to read the members it
// selects by a constant name, and all of them when it uses the map
// otherwise.
func TestArgumentsRead(t *testing.T) {
	for _, c := range []struct {
		expr  string
		names []string
		all   bool
	}{
		{`principal.subject == "x"`, nil, false},
		{`arguments.repo == "x"`, []string{"repo"}, false},
		{`has(arguments.repo) && arguments["owner"] == "x" && arguments.repo.startsWith("s")`, []string{"repo", "owner"}, false},
		{`arguments.size() > 2`, nil, true},
		{`"repo" in arguments`, nil, true},
		{`arguments.exists(k, k == "x")`, nil, true},
		{`arguments[request.name] == 1`, nil, true},
	} {
		ast, err := celenv.Check(c.expr, true, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		got := argumentsRead(ast)
		if got.all != c.all || !slices.Equal(got.names, c.names) {
			t.Errorf("%s: %+v", c.expr, got)
		}
	}
}

// TestBoundedCost: expressions whose cost their shape bounds are run
// without cost tracking; comprehensions, unbounded operations and
// comparisons of two variables keep it.
func TestBoundedCost(t *testing.T) {
	for _, c := range []struct {
		expr    string
		bounded bool
	}{
		{`principal.subject == "nobody"`, true},
		{`has(arguments.q) && arguments.q == "never"`, true},
		{`arguments.repo in ["a", "b"] || !(request.upstream != "github")`, true},
		{`arguments.n > 3 && principal.claims["dept"] == "eng"`, true},
		{`request.name.startsWith("deploy_")`, true},
		{`"sre" in principal.groups`, false},            // as long as the list
		{`arguments.a == arguments.b`, false},           // two variables
		{`arguments.q + "x" == "yx"`, false},            // concatenation
		{`principal.groups.exists(g, g == "x")`, false}, // a comprehension
		{`request.name.contains("x")`, false},
		{`request.name.matches("^a.*")`, false},
		{`principal.claims[request.name] == 1`, false}, // a key of any length
	} {
		ast, err := celenv.Check(c.expr, true, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := boundedCost(ast, 100000); got != c.bounded {
			t.Errorf("%s: bounded %v", c.expr, got)
		}
	}
	ast, _ := celenv.Check(`principal.subject == "`+strings.Repeat("x", 500)+`"`, true, 0)
	if boundedCost(ast, 1000) {
		t.Error("a literal's length is not counted against the limit")
	}
}

// TestPlainString: a string argument that needs no unescaping is read in
// place; any other is decoded, with the same value.
func TestPlainString(t *testing.T) {
	for _, c := range []struct {
		raw, want string
		plain     bool
	}{
		{`"sandbox-1"`, "sandbox-1", true},
		{`""`, "", true},
		{`"a\"b"`, `a"b`, false},
		{`"caf\u00e9"`, "café", false},
		{"\"\xff\"", "\ufffd", false},
	} {
		s, ok := plainString([]byte(c.raw))
		if ok != c.plain || ok && s != c.want {
			t.Errorf("plainString(%s) = %q, %v", c.raw, s, ok)
		}
		st := &state{in: &Input{Arguments: json.RawMessage(`{"q":` + c.raw + `}`)}}
		args, err := st.arguments(argNeed{names: []string{"q"}})
		if err != nil || args["q"] != c.want {
			t.Errorf("arguments(%s) = %q, %v", c.raw, args["q"], err)
		}
	}
}
