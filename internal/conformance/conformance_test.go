package conformance_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/testkit"
)

// The suite runs as a Node.js program (testkit.ConformanceCommand); the
// servers and the client under test are the Go SDK's conformance programs
// (everything-server, everything-client), which implement every scenario's
// fixtures, and the gateway is the built binary (server scenarios) or the
// viagateway command (client scenarios).
//
// auth/client-credentials-basic applies: the gateway is the OAuth client
// there (upstreams[].auth.mode client_credentials, its issuer read off the
// test server's protected resource metadata as an admin would; see
// viagateway). The Go SDK's client does not implement the scenario, so it
// has no control run: every check must pass through the gateway.
//
// Client scenarios that do not apply to a gateway, and why:
//
//   - auth/* with the authorization code grant (metadata-*, basic-cimd,
//     scope-*, token-endpoint-auth-*, pre-registration, offline-access-*,
//     iss-*, resource-mismatch, authorization-server-migration,
//     metadata-issuer-mismatch, 2025-03-26-*): the gateway is the upstream's
//     OAuth client, and its user_oauth mode puts a person at a consent link
//     between the client and the authorization server; the suite's client
//     cannot act there, and never sees the upstream's authorization server.
//   - auth/client-credentials-jwt (private_key_jwt), auth/dpop,
//     auth/dpop-nonce, auth/wif-jwt-bearer,
//     auth/enterprise-managed-authorization: extensions the gateway does
//     not implement as a client.

// A scenarioResult is what the suite said of one scenario.
type scenarioResult struct {
	checks int
	failed []string // the ids of the checks that failed
}

func (r *scenarioResult) passed() bool { return r != nil && len(r.failed) == 0 }

// runSuite runs the suite with args in a directory of its own and returns
// each scenario's result, by name.
func runSuite(t *testing.T, args ...string) map[string]*scenarioResult {
	t.Helper()
	out := t.TempDir()
	cmd := testkit.ConformanceCommand(t)
	c := exec.Command(cmd[0], append(append(cmd[1:], args...), "-o", out, "--timeout", "20000")...)
	c.Dir = out
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Exit status 1 is the suite's "some check failed": results decide.
	if b, err := c.CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("conformance %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	res := map[string]*scenarioResult{}
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return err
		}
		rel, _ := filepath.Rel(out, filepath.Dir(path)) // auth/ scenarios sit a level down
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var checks []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			return fmt.Errorf("%s: %v", rel, err)
		}
		r := &scenarioResult{checks: len(checks)}
		for _, c := range checks {
			if c.Status == "FAILURE" {
				r.failed = append(r.failed, c.ID)
			}
		}
		res[scenarioName(filepath.ToSlash(rel))] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 {
		t.Fatalf("conformance %s: no results", strings.Join(args, " "))
	}
	return res
}

// stamped matches the timestamp the suite appends to a result directory.
var stamped = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

func scenarioName(dir string) string {
	return strings.TrimPrefix(stamped.ReplaceAllString(dir, ""), "server-")
}

// compare fails the test for each scenario that passed directly and
// failed through the gateway, unless notApplicable explains it, and logs
// the totals both ways.
func compare(t *testing.T, label string, direct, via map[string]*scenarioResult, notApplicable map[string]string) {
	t.Helper()
	var names []string
	for n := range direct {
		names = append(names, n)
	}
	sort.Strings(names)
	dPass, vPass, dChecks, vChecks := 0, 0, 0, 0
	for _, n := range names {
		d, v := direct[n], via[n]
		if d.passed() {
			dPass++
		}
		dChecks += d.checks - len(d.failed)
		if v != nil {
			vChecks += v.checks - len(v.failed)
		}
		if v.passed() {
			vPass++
		}
		if !d.passed() || v.passed() {
			continue
		}
		if why, ok := notApplicable[n]; ok {
			t.Logf("%s: %s fails through the gateway, as expected: %s", label, n, why)
			continue
		}
		if v == nil {
			t.Errorf("%s: %s passed directly and did not run through the gateway", label, n)
			continue
		}
		t.Errorf("%s: %s passed directly and failed through the gateway: %v", label, n, v.failed)
	}
	t.Logf("%s: directly %d of %d scenarios passed (%d checks); through the gateway %d of %d (%d checks)",
		label, dPass, len(names), dChecks, vPass, len(names), vChecks)
}

// startEverythingServer runs the Go SDK's everything-server over
// Streamable HTTP on a free port: in its stateless mode (which serves the
// 2026-07-28 revision) or with sessions (the 2025-11-25 revision). It
// returns the MCP endpoint's URL.
func startEverythingServer(t *testing.T, stateless bool) string {
	t.Helper()
	bin := testkit.BuildGo(t, testkit.GoSDKConformancePackage+"everything-server")
	addr := "127.0.0.1:" + strconv.Itoa(testkit.FreePort(t))
	cmd := exec.Command(bin, "-http", addr, "-stateless="+strconv.FormatBool(stateless))
	out := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("everything-server output:\n%s", out.String())
		}
	})
	waitListening(t, addr)
	return "http://" + addr + "/mcp"
}

// waitListening waits until addr accepts connections, for up to 10s.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not accept connections: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startGateway runs the gateway binary with upstream as its only upstream,
// with no prefix (the scenarios call the fixtures by their own names) and
// anonymous clients, and returns its MCP endpoint's URL.
func startGateway(t *testing.T, upstream string) string {
	t.Helper()
	port := testkit.FreePort(t)
	p := startReplica(t, port, fmt.Sprintf("http://127.0.0.1:%d/mcp", port), upstream, "")
	return p.URL + "/mcp"
}

// startReplicas runs two gateway replicas in front of upstream, sharing a
// Redis of their own, behind a round-robin load balancer, and returns the
// balancer's MCP endpoint URL: every request of a session may land on
// either replica.
func startReplicas(t *testing.T, upstream string) string {
	t.Helper()
	redis := testkit.StartRedis(t)
	lb := testkit.StartLB(t, nil)
	store := fmt.Sprintf("sessions:\n  store: redis\n  redis:\n    addrs: [%q]\n", redis.Addr)
	var backends []string
	for range 2 {
		p := startReplica(t, testkit.FreePort(t), lb.URL+"/mcp", upstream, store)
		backends = append(backends, p.URL)
	}
	lb.SetBackends(t, backends)
	return lb.URL + "/mcp"
}

// startReplica runs one gateway on port, known to its clients as
// publicURL, in front of upstream, with the config's more (YAML) added.
func startReplica(t *testing.T, port int, publicURL, upstream, more string) *testkit.Process {
	t.Helper()
	cfg := testkit.WriteFile(t, fmt.Sprintf("gateway-%d.yaml", port), fmt.Sprintf(`server:
  listen: "127.0.0.1:%d"
  public_url: %q
auth:
  anonymous: true
upstreams:
  - name: everything
    url: %q
    prefix: ""
%s`, port, publicURL, upstream, more))
	return testkit.StartGateway(t, testkit.BuildGateway(t), []string{"serve", "-config", cfg}, nil)
}

// TestServerScenarios: the server scenarios of both revisions, each run
// directly against the Go SDK's everything-server and through the gateway
// in front of it:
//
//   - 2025-11-25: a session client, the server with sessions;
//   - 2026-07-28 (what the revision requires, --requirements): a stateless
//     client, the server in its stateless mode (2026-07-28);
//   - 2026-07-28 bridged: a stateless client through the gateway to the
//     server with sessions (2025-11-25), with the stateless server run
//     directly as the control.
//
// The first two also run through two replicas sharing Redis behind a
// round-robin load balancer.
func TestServerScenarios(t *testing.T) {
	sessions, stateless := startEverythingServer(t, false), startEverythingServer(t, true)
	gwSessions, gwStateless := startGateway(t, sessions), startGateway(t, stateless)

	direct2025 := runSuite(t, "server", "--url", sessions, "--spec-version", "2025-11-25")
	compare(t, "2025-11-25", direct2025,
		runSuite(t, "server", "--url", gwSessions, "--spec-version", "2025-11-25"), nil)
	compare(t, "2025-11-25, two replicas on Redis", direct2025,
		runSuite(t, "server", "--url", startReplicas(t, sessions), "--spec-version", "2025-11-25"), nil)

	direct2026 := runSuite(t, "server", "--url", stateless, "--requirements", "2026-07-28")
	compare(t, "2026-07-28", direct2026,
		runSuite(t, "server", "--url", gwStateless, "--requirements", "2026-07-28"), nil)
	compare(t, "2026-07-28, two replicas on Redis", direct2026,
		runSuite(t, "server", "--url", startReplicas(t, stateless), "--requirements", "2026-07-28"), nil)

	compare(t, "2026-07-28 bridged to 2025-11-25", direct2026,
		runSuite(t, "server", "--url", gwSessions, "--requirements", "2026-07-28"), map[string]string{
			// The keys of inputRequests are the server's own names in a
			// 2026-07-28 server's input_required; a 2025-11-25 server
			// asks with JSON-RPC requests, which name none, so the
			// gateway names them (input-1, ...).
			"input-required-result-basic-elicitation":       "the input request's key is the gateway's (input-1), not the fixture's (user_name)",
			"input-required-result-multiple-input-requests": "the input requests' keys are the gateway's, not the fixture's",
			// The Go SDK's server with sessions asks its first round as
			// an elicitation request, and returns its second round's
			// inputRequests inside a plain result, which 2025-11-25 has
			// no place for.
			"input-required-result-multi-round": "the server with sessions returns its second round as a plain result",
		})
}

// TestClientScenarios: the client scenarios, the Go SDK's
// everything-client against the suite's test server directly, and through
// the gateway (viagateway, the test server its only upstream); at
// 2025-11-25 and at 2026-07-28, and the 2025-11-25 scenarios with the
// client speaking 2026-07-28 (--force), which only the gateway's bridging
// can pass: those must pass through the gateway whatever the control says.
func TestClientScenarios(t *testing.T) {
	client := testkit.BuildGo(t, testkit.GoSDKConformancePackage+"everything-client")
	via := testkit.BuildGo(t, "./viagateway") + " " + client
	run := func(command string, args ...string) map[string]*scenarioResult {
		all := map[string]*scenarioResult{}
		for _, a := range args {
			fields := strings.Fields(a)
			for n, r := range runSuite(t, append([]string{"client", "--command", command, "--scenario"}, fields...)...) {
				all[n] = r
			}
		}
		return all
	}
	v2025 := []string{"initialize --spec-version 2025-11-25", "tools_call --spec-version 2025-11-25",
		"elicitation-sep1034-client-defaults --spec-version 2025-11-25", "sse-retry --spec-version 2025-11-25"}
	compare(t, "client 2025-11-25", run(client, v2025...), run(via, v2025...), nil)

	v2026 := []string{"tools_call --spec-version 2026-07-28", "request-metadata --spec-version 2026-07-28"}
	compare(t, "client 2026-07-28", run(client, v2026...), run(via, v2026...), nil)

	bridged := []string{"initialize --spec-version 2026-07-28 --force", "tools_call --spec-version 2026-07-28 --force",
		"elicitation-sep1034-client-defaults --spec-version 2026-07-28 --force", "sse-retry --spec-version 2026-07-28 --force"}
	got := run(via, bridged...)
	for _, n := range slices.Sorted(maps.Keys(got)) {
		if r := got[n]; !r.passed() {
			t.Errorf("client 2026-07-28 through the gateway to a 2025-11-25 test server: %s failed: %v", n, r.failed)
		}
	}
	if len(got) != len(bridged) {
		t.Errorf("%d bridged scenarios ran, want %d", len(got), len(bridged))
	}

	cc := runSuite(t, "client", "--command", via, "--scenario", "auth/client-credentials-basic")
	if r := cc["auth/client-credentials-basic"]; r == nil || !r.passed() || r.checks < 5 {
		t.Errorf("auth/client-credentials-basic through the gateway: %+v (results %v)", r, slices.Collect(maps.Keys(cc)))
	}
}
