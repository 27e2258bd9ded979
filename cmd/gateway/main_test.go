package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

func runCmd(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.code
	default:
		code = 1
		errb.WriteString(err.Error())
	}
	return code, out.String(), errb.String()
}

func TestVersionAndUsage(t *testing.T) {
	if code, out, _ := runCmd(t, nil, "version"); code != 0 || out != "gateway dev\n" {
		t.Errorf("version: %d %q", code, out)
	}
	if code, _, errOut := runCmd(t, nil); code != 2 || !strings.Contains(errOut, "usage:") {
		t.Errorf("no args: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, nil, "frobnicate"); code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, errOut)
	}
	// The demo's address is the first thing a new user changes.
	if code, out, _ := runCmd(t, nil, "-h"); code != 0 || !strings.Contains(out, "demo [-listen ADDR]") {
		t.Errorf("-h: %d %q", code, out)
	}
	if code, _, errOut := runCmd(t, nil, "demo", "-h"); code != 0 || !strings.Contains(errOut, "-upstream-listen") || !strings.Contains(errOut, "-issuer-listen") {
		t.Errorf("demo -h: %d %q", code, errOut)
	}
}

func TestValidate(t *testing.T) {
	good := testkit.WriteFile(t, "good.yaml", `
server:
  listen: "127.0.0.1:0"
auth:
  anonymous: true
upstreams:
  - name: github
    url: "http://127.0.0.1:9001/mcp"
    headers:
      Authorization: "Bearer ${GITHUB_MCP_TOKEN}"
`)
	code, out, _ := runCmd(t, map[string]string{"GITHUB_MCP_TOKEN": "s3cret-value"}, "validate", "-config", good)
	if code != 0 || out != good+": ok\n" {
		t.Errorf("good config: %d %q", code, out)
	}

	bad := testkit.WriteFile(t, "bad.yaml", `server:
  listen: "127.0.0.1:0"
  bogus: 1
upstreams:
  - name: github
    url: "ftp://example.com"
  - name: github
    url: "http://127.0.0.1:9002/mcp"
    headers:
      Authorization: "Bearer ${UNSET_TOKEN}"
      X-Key: "s3cret-value"
`)
	code, out, _ = runCmd(t, map[string]string{}, "validate", "-config", bad)
	if code != 1 {
		t.Errorf("bad config: exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// The unset ${UNSET_TOKEN} is a warning to validate, not a problem.
	wantPrefixes := []string{bad + ": auth.issuers: at least one issuer is required", bad + ":3: server.bogus", bad + ":6: upstreams[0].url", bad + ":7: upstreams[1].name"}
	if len(lines) != len(wantPrefixes) {
		t.Fatalf("got %d problems, want %d:\n%s", len(lines), len(wantPrefixes), out)
	}
	for i, p := range wantPrefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("problem %d = %q, want prefix %q", i, lines[i], p)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("validate printed a secret:\n%s", out)
	}
	if code, _, _ := runCmd(t, nil, "validate", "-config", "/nonexistent.yaml"); code != 1 {
		t.Errorf("missing file: exit %d", code)
	}
}

// TestServeBinary runs the built binary with a YAML config in front of two
// Go SDK upstreams and drives it with the Go SDK client.
func TestServeBinary(t *testing.T) {
	bin := testkit.BuildGateway(t)
	a := testkit.NewUpstream(t, "alpha")
	b := testkit.NewUpstream(t, "beta")
	cfg := testkit.WriteFile(t, "gateway.yaml", `
server:
  listen: "127.0.0.1:0"
  admin_listen: "127.0.0.1:0"
  drain_delay: 0s
sessions:
  store: memory
  idle_ttl: 5m
auth:
  anonymous: true
upstreams:
  - name: alpha
    url: "`+a.URL+`"
    headers:
      Authorization: "Bearer ${ALPHA_TOKEN}"
  - name: beta
    url: "`+b.URL+`"
    prefix: "b"
    timeout: 5s
`)
	p := testkit.StartGateway(t, bin, []string{"serve", "-config", cfg, "-log-format", "json"}, []string{"ALPHA_TOKEN=alpha-secret"})
	cs := testkit.Connect(t, p.Endpoint, nil)
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 2*len(testkit.UpstreamTools) {
		t.Errorf("got %d tools", len(tools.Tools))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__echo", Arguments: map[string]any{"text": "hey"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc := res.Content[0].(*mcp.TextContent); tc.Text != "beta:hey" {
		t.Errorf("b__echo = %q", tc.Text)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__headers"})
	if err != nil {
		t.Fatal(err)
	}
	// The upstream got it, and its echo of the gateway's own secret is
	// redacted on the way back (docs/guards.md).
	if tc := res.Content[0].(*mcp.TextContent); !strings.Contains(tc.Text, `"Authorization":["[redacted:gateway-secret]"]`) || strings.Contains(tc.Text, "alpha-secret") {
		t.Errorf("alpha did not get its configured credential, or it came back: %s", tc.Text)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + p.AdminAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
	if err := cs.Close(); err != nil {
		t.Errorf("closing the client session: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("gateway did not exit cleanly on SIGTERM: %v", err)
	}
	if out := p.Output(); strings.Contains(out, "alpha-secret") {
		t.Errorf("a credential reached the log:\n%s", out)
	}
}

// TestDemoBinary runs "gateway demo" as a user would and uses each kind of
// thing the demo upstream offers through it.
func TestDemoBinary(t *testing.T) {
	bin := testkit.BuildGateway(t)
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	upAddr, issAddr, adminAddr := free(), free(), free()
	p := testkit.StartGateway(t, bin, []string{"demo", "-listen", "127.0.0.1:0", "-upstream-listen", upAddr, "-issuer-listen", issAddr, "-admin-listen", adminAddr}, nil)
	// stdout and stderr are separate pipes: the instructions, written
	// before the log line, may still be on their way.
	testkit.Poll(5*time.Second, func() bool { return strings.Contains(p.Stdout(), p.Endpoint) })
	if !strings.Contains(p.Stdout(), "MCP gateway demo") || !strings.Contains(p.Stdout(), p.Endpoint) {
		t.Errorf("demo did not print how to connect:\n%s", p.Stdout())
	}
	for _, want := range []string{"at http://" + upAddr + "/mcp (-upstream-listen)", "issuer:    http://" + issAddr + " (-issuer-listen)",
		"admin:     http://" + adminAddr + "/console (-admin-listen)"} {
		if !strings.Contains(p.Stdout(), want) {
			t.Errorf("demo did not print %q:\n%s", want, p.Stdout())
		}
	}
	// The admin listener: the console (no sign-in on loopback), metrics.
	for _, path := range []string{"/console/", "/metrics", "/readyz"} {
		resp, err := http.Get("http://" + adminAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("admin %s: %d", path, resp.StatusCode)
		}
	}
	token := regexp.MustCompile(`eyJ[\w-]+\.[\w-]+\.[\w-]+`).FindString(p.Stdout())
	if token == "" {
		t.Fatalf("demo printed no token:\n%s", p.Stdout())
	}
	// Without the token: a challenge that points at the metadata.
	resp, err := http.Post(p.Endpoint, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Errorf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	progress := make(chan float64, 10)
	cs := testkit.Connect(t, p.Endpoint, &testkit.ConnectOptions{
		Header:          http.Header{"Authorization": {"Bearer " + token}},
		ProgressHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params.Progress },
	})
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name: "demo__countdown", Arguments: map[string]any{"from": 2, "delay_ms": 10}, Meta: mcp.Meta{"progressToken": "c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if tc := res.Content[0].(*mcp.TextContent); tc.Text != "liftoff" {
		t.Errorf("countdown = %q", tc.Text)
	}
	if len(progress) == 0 {
		// Notifications may be handled just after the call returns.
		<-progress
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo+demo://readme"})
	if err != nil || len(rr.Contents) != 1 {
		t.Fatalf("readme: %v", err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "demo__review", Arguments: map[string]string{"code": "x := 1"}}); err != nil {
		t.Errorf("prompt: %v", err)
	}
}

// TestBinaryWithTypeScriptClient is the end-to-end test: the built binary,
// configured by YAML to trust a real OpenID provider, driven by the official
// TypeScript SDK client with a bearer token.
func TestBinaryWithTypeScriptClient(t *testing.T) {
	bin := testkit.BuildGateway(t)
	idp := testkit.StartIDP(t, []testkit.IDPClient{{ID: "acme-app", Secret: "s", Tenant: "acme"}})
	a := testkit.NewUpstream(t, "alpha")
	port := testkit.FreePort(t)
	public := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	cfg := testkit.WriteFile(t, "gateway.yaml", fmt.Sprintf(`
server:
  listen: "127.0.0.1:%d"
  public_url: %q
  drain_delay: 0s
auth:
  issuers:
    - name: corp
      issuer_url: %q
      tenant_claim: org.tenant
  required_scopes: ["mcp"]
tenants:
  - id: acme
upstreams:
  - name: alpha
    url: %q
`, port, public, idp.Issuer, a.URL))
	p := testkit.StartGateway(t, bin, []string{"serve", "-config", cfg}, nil)
	token := idp.Token(t, "acme-app", public, "mcp")

	results := testkit.RunTSClient(t, p.Endpoint, token,
		testkit.TSStep{Op: "listTools"},
		testkit.TSStep{Op: "callTool", Name: "alpha__echo", Arguments: map[string]any{"text": "from ts"}},
		testkit.TSStep{Op: "callTool", Name: "alpha__progress", Arguments: map[string]any{"steps": 2}, Progress: true},
		testkit.TSStep{Op: "readResource", URI: "alpha+test://alpha/readme"},
		testkit.TSStep{Op: "callTool", Name: "alpha__missing"},
	)
	if len(results) != 5 {
		t.Fatalf("got %d results: %+v", len(results), results)
	}
	for i, r := range results[:4] {
		if !r.OK {
			t.Fatalf("step %d (%s) failed: %d %s", i, r.Op, r.ErrorCode, r.ErrorMessage)
		}
	}
	if !strings.Contains(string(results[0].Result), `"alpha__echo"`) {
		t.Errorf("listTools: %s", results[0].Result)
	}
	if !strings.Contains(string(results[1].Result), "alpha:from ts") {
		t.Errorf("callTool: %s", results[1].Result)
	}
	if len(results[2].Progress) != 2 {
		t.Errorf("progress through the gateway: %d notifications, want 2", len(results[2].Progress))
	}
	if !strings.Contains(string(results[3].Result), "readme of alpha") {
		t.Errorf("readResource: %s", results[3].Result)
	}
	if results[4].OK || results[4].ErrorCode != -32602 {
		t.Errorf("unknown tool: %+v", results[4])
	}

	// Without a token the SDK sees the 401 and its challenge.
	bad := testkit.RunTSClient(t, p.Endpoint, "", testkit.TSStep{Op: "listTools"})
	if len(bad) == 0 || bad[0].OK || bad[0].HTTPStatus != 401 {
		t.Errorf("no token: %+v", bad)
	}
	if out := p.Output(); strings.Contains(out, token) {
		t.Error("the token reached the gateway's log")
	}
}

func TestExplain(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	b := testkit.NewUpstream(t, "beta")
	cfg := testkit.WriteFile(t, "explain.yaml", `
server:
  public_url: "https://mcp.example.com/mcp"
auth:
  issuers:
    - name: corp
      issuer_url: "https://idp.example.com"
      tenant_claim: tenant
tenants:
  - id: acme
    upstreams:
      - name: alpha
        tools: { allow: ["e*", "fail"], deny: ["fail"] }
        resources: { allow: ["test://alpha/items/*"] }
        required_scopes: { echo: ["mcp:write"] }
        present: { echo: { alias: say, description: "Say it.", fixed_arguments: { text: hi } } }
    budgets:
      quotas:
        - { name: echo-daily, tools: ["echo"], calls: 100 }
    tool_search: { mode: beside }
budgets:
  rate_limits:
    - { name: per-user, per: [principal], requests: 20 }
    - { name: alpha-calls, upstreams: ["alpha"], requests: 5, interval: 1m }
upstreams:
  - name: alpha
    url: "`+a.URL+`"
    concurrency: { max_in_flight: 8 }
    circuit_breaker: { failures: 3 }
  - name: beta
    url: "`+b.URL+`"
`)
	code, out, errOut := runCmd(t, nil, "explain", "-config", cfg, "-tenant", "acme")
	if code != 0 {
		t.Fatalf("explain: %d %s", code, errOut)
	}
	for _, want := range []string{
		`tenant "acme"`,
		`upstream alpha (prefix "alpha")`,
		`+ say`, `tools.allow[0] "e*"; requires scopes [mcp:write]`,
		`alias of alpha__echo (not shown); description replaced; fixed arguments: text`,
		`tool search: mode beside, at most 10 results: tools/list adds mcpgw__search_tools and mcpgw__call_tool to the tools below`,
		`- alpha__fail`, `tools.deny[0] "fail"`,
		`- alpha__meta`, `matches no tools.allow pattern`,
		`+ alpha__greet`, `no prompts.allow list: everything not denied`,
		`- alpha+test://alpha/readme`,
		`+ alpha+test://alpha/items/{id}`,
		`upstream beta: hidden (not listed for this tenant; never initialized for its sessions)`,
		`budget: rate limit per-user on every request: 20 requests per 1s per tenant and principal`,
		`budget: rate limit alpha-calls: 5 requests per 1m0s per tenant, upstreams alpha`,
		`budget: quota echo-daily: 100 tool calls per day per tenant, tools echo`,
		`concurrency: 8 in flight per replica, 8 queued (4 per tenant, 2 per principal) for at most 1s`,
		`circuit breaker: opens after 3 consecutive failures for 30s, 1 probes at once`,
		`budgets of its prompts, resources and completions: rate limit alpha-calls`,
		`requires scopes [mcp:write]; budgets: rate limit alpha-calls, quota echo-daily`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := runCmd(t, nil, "explain", "-config", cfg, "-tenant", "initech"); code != 1 || !strings.Contains(errOut, "unknown tenant") {
		t.Errorf("unknown tenant: %d %s", code, errOut)
	}
}

// TestValidateBudgets: every mistake in budgets is reported at once, with
// its line and key.
func TestValidateBudgets(t *testing.T) {
	f := testkit.WriteFile(t, "budgets.yaml", `auth:
  anonymous: true
budgets:
  time_zone: Mars/Olympus
  rate_limits:
    - { name: Bad_Name, per: [user], requests: 5 }
    - { name: dup, requests: 5, on_store_error: maybe }
    - { name: dup, tools: ["[a-"], requests: 1 }
  quotas:
    - { name: q, period: week }
upstreams:
  - name: a
    url: "http://127.0.0.1:9/mcp"
    concurrency: { queue: 3 }
`)
	code, out, errOut := runCmd(t, nil, "validate", "-config", f)
	if code != 1 {
		t.Fatalf("validate: %d %s %s", code, out, errOut)
	}
	for _, want := range []string{
		`budgets.time_zone: "Mars/Olympus" is not a known IANA time zone`,
		`budgets.rate_limits[0].name: "Bad_Name" must contain only a-z, 0-9 and "-"`,
		`budgets.rate_limits[0].per[0]: "user" must be "principal", "upstream" or "tool"`,
		`budgets.rate_limits[1].on_store_error: "maybe" must be "open" or "closed"`,
		`budgets.rate_limits[2].name: duplicate name "dup" (also [1])`,
		`budgets.rate_limits[2].tools[0]: "[a-" is not a valid glob pattern`,
		`budgets.quotas[0].calls: is required`,
		`budgets.quotas[0].period: "week" must be "day" or "month"`,
		`upstreams[0].concurrency.max_in_flight: is required`,
	} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("validate output lacks %q:\n%s%s", want, out, errOut)
		}
	}
}

func TestValidateWarns(t *testing.T) {
	f := testkit.WriteFile(t, "warn.yaml", `auth:
  anonymous: true
tenants:
  - id: default
    upstreams:
      - name: a
        tools: { allow: ["x"], deny: ["x"] }
upstreams:
  - name: a
    url: "http://127.0.0.1:9/mcp"
`)
	code, out, _ := runCmd(t, nil, "validate", "-config", f)
	if code != 0 || !strings.Contains(out, "warning: "+f+":7: tenants[0].upstreams[0].tools.allow[0]") || !strings.HasSuffix(out, f+": ok\n") {
		t.Errorf("validate with a dead pattern: %d\n%s", code, out)
	}
}

// TestBinaryReloadsItsConfig edits the config file under a running binary:
// a valid change takes effect without a restart, an invalid one is refused
// and the last good config keeps serving.
func TestBinaryReloadsItsConfig(t *testing.T) {
	bin := testkit.BuildGateway(t)
	a := testkit.NewUpstream(t, "alpha")
	write := func(path, allow string) string {
		return testkit.WriteFile(t, path, `
server:
  listen: "127.0.0.1:0"
  admin_listen: "127.0.0.1:0"
  drain_delay: 0s
auth:
  anonymous: true
tenants:
  - id: default
    upstreams:
      - name: alpha
        tools: { allow: [`+allow+`] }
upstreams:
  - name: alpha
    url: "`+a.URL+`"
`)
	}
	cfg := write("gateway.yaml", `"echo"`)
	p := testkit.StartGateway(t, bin, []string{"serve", "-config", cfg}, nil)
	cs := testkit.Connect(t, p.Endpoint, nil)
	ctx := context.Background()
	count := func() int {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Tools)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d tools before the reload, want 1", n)
	}
	write("gateway.yaml", `"echo", "meta", "fail"`)
	// The gateway watches its config file: the edit shows by itself.
	if !testkit.Poll(10*time.Second, func() bool { return count() == 3 }) {
		t.Fatalf("the edited config was not applied:\n%s", p.Output())
	}
	// An invalid edit is refused; the gateway keeps the last good config.
	testkit.WriteFile(t, "gateway.yaml", "upstreams: [oops\n")
	readyz := func() string {
		resp, err := http.Get("http://" + p.AdminAddr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if !testkit.Poll(15*time.Second, func() bool { return strings.Contains(readyz(), "refused") }) {
		t.Fatalf("the invalid config was not reported:\n%s", readyz())
	}
	if !strings.Contains(readyz(), "generation 2") {
		t.Errorf("readyz: %s", readyz())
	}
	if n := count(); n != 3 {
		t.Errorf("%d tools after a refused reload, want the last good 3", n)
	}
	if !strings.Contains(p.Output(), "config reload refused") {
		t.Errorf("the refusal was not logged:\n%s", p.Output())
	}
}

// TestSecondSignalStopsAtOnce: SIGTERM starts the drain, during which
// /readyz answers 503; a second signal ends the process without waiting out
// server.drain_delay.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	bin := testkit.BuildGateway(t)
	a := testkit.NewUpstream(t, "alpha")
	cfg := testkit.WriteFile(t, "gateway.yaml", `
server:
  listen: "127.0.0.1:0"
  admin_listen: "127.0.0.1:0"
  drain_delay: 20s
  shutdown_grace: 25s
auth:
  anonymous: true
upstreams:
  - name: alpha
    url: "`+a.URL+`"
    watch: false
`)
	p := testkit.StartGateway(t, bin, []string{"serve", "-config", cfg}, nil)
	start := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	status := 0
	if !testkit.Poll(time.Until(start.Add(5*time.Second)), func() bool {
		resp, err := http.Get("http://" + p.AdminAddr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		status = resp.StatusCode
		return status == http.StatusServiceUnavailable
	}) {
		t.Fatalf("/readyz = %d 5s after SIGTERM, want 503", status)
	}
	if err := p.Cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(3 * time.Second):
		t.Fatal("the gateway still runs 3s after a second signal")
	}
}

// TestPin: `gateway pin` writes a pins file that validates, pins every
// tool and prompt, and that explain then checks definitions against.
func TestPin(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	dir := t.TempDir()
	pins := filepath.Join(dir, "pins.yaml")
	cfg := testkit.WriteFile(t, "pin.yaml", `
auth: { anonymous: true }
pins: { file: "`+pins+`" }
upstreams:
  - name: alpha
    url: "`+a.URL+`"
    pin: { on_change: quarantine, new: quarantine }
`)
	// Before the file exists: a warning, and every item is new.
	code, out, errOut := runCmd(t, nil, "explain", "-config", cfg, "-tenant", "default")
	if code != 0 || !strings.Contains(errOut, "does not exist") || !strings.Contains(out, "- alpha__echo") || !strings.Contains(out, "pin: not pinned: quarantined") {
		t.Fatalf("explain before pinning: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, nil, "pin", "-config", cfg)
	if code != 0 || !strings.Contains(out, "pinned ") {
		t.Fatalf("pin: %d %s %s", code, out, errOut)
	}
	f, err := config.ReadPins(pins)
	if err != nil {
		t.Fatal(err)
	}
	up := f.Upstreams["alpha"]
	if up == nil || len(up.Tools) != len(testkit.UpstreamTools) || len(up.Prompts) == 0 || len(up.Tools["echo"].SHA256) != 64 || up.Tools["echo"].Fields["description"] == "" {
		t.Fatalf("pins: %+v", up)
	}
	code, out, errOut = runCmd(t, nil, "explain", "-config", cfg, "-tenant", "default")
	if code != 0 || !strings.Contains(out, "+ alpha__echo") || strings.Contains(out, "pin:") {
		t.Errorf("explain after pinning: %d\n%s\n%s", code, out, errOut)
	}
	// A pin that no longer matches.
	echo := up.Tools["echo"]
	echo.Fields["description"] = strings.Repeat("0", 64)
	echo.SHA256 = strings.Repeat("0", 64)
	up.Tools["echo"] = echo
	data, _ := f.Marshal()
	if err := os.WriteFile(pins, data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCmd(t, nil, "explain", "-config", cfg, "-tenant", "default")
	if code != 0 || !strings.Contains(out, "- alpha__echo") || !strings.Contains(out, "pin: changed (description): quarantined") {
		t.Errorf("explain with a changed pin: %d\n%s", code, out)
	}
	if code, _, errOut := runCmd(t, nil, "pin", "-config", testkit.WriteFile(t, "nopins.yaml", "auth: { anonymous: true }\nupstreams: [{name: a, url: \""+a.URL+"\"}]\n")); code != 2 || !strings.Contains(errOut, "-out") {
		t.Errorf("pin without pins.file: %d %s", code, errOut)
	}
}

// TestHelpExitsZero: every command's -h prints its flags and exits 0.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"serve", "-h"}, {"validate", "-h"}, {"explain", "-h"}, {"pin", "-h"},
		{"demo", "-h"}, {"bridge", "-h"}, {"tokens", "list", "-h"},
	} {
		var out, errOut strings.Builder
		err := run(t.Context(), args, func(string) string { return "" }, &out, &errOut)
		var ee exitError
		if err != nil && (!errors.As(err, &ee) || ee.code != 0) {
			t.Errorf("%v: %v", args, err)
		}
		if out.Len()+errOut.Len() == 0 {
			t.Errorf("%v printed nothing", args)
		}
	}
}
