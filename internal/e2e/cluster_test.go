package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/testkit"
)

// replicas is how many gateway processes a cluster runs.
const replicas = 3

// keyPrefix is the Redis key prefix of the cluster's gateways.
const keyPrefix = "e2e:"

// The IdP's clients: two subjects of tenant acme, one of globex.
var idpClients = []testkit.IDPClient{
	{ID: "acme-app", Secret: "acme-secret", Tenant: "acme"},
	{ID: "acme-other", Secret: "other-secret", Tenant: "acme"},
	{ID: "globex-app", Secret: "globex-secret", Tenant: "globex"},
}

// A cluster is the production shape of the gateway, on loopback: replicas
// of the built binary with one YAML config, sharing a private Redis, behind
// a round-robin load balancer whose URL is the public URL, trusting a real
// OpenID provider, in front of two go-sdk upstreams.
type cluster struct {
	idp      *testkit.IDP
	redis    *testkit.Redis
	alpha    *testkit.Upstream
	beta     *testkit.Upstream
	lb       *testkit.LB
	replicas []*testkit.Process
	endpoint string // the LB's MCP endpoint: server.public_url, the tokens' audience

	mu     sync.Mutex
	killed map[int]bool
}

// clusterOptions are settings a test changes in the cluster's config.
type clusterOptions struct {
	listCacheTTL  string // server.list_cache_ttl; default 1m
	drainDelay    string // server.drain_delay; default 0s, so that stopping a replica is quick
	shutdownGrace string // server.shutdown_grace; default 25s
}

func startCluster(t *testing.T, opts ...func(*clusterOptions)) *cluster {
	t.Helper()
	o := clusterOptions{listCacheTTL: "1m", drainDelay: "0s", shutdownGrace: "25s"}
	for _, opt := range opts {
		opt(&o)
	}
	bin := testkit.BuildGateway(t)
	c := &cluster{
		idp:    testkit.StartIDP(t, idpClients),
		redis:  testkit.StartRedis(t),
		alpha:  testkit.NewUpstream(t, "alpha"),
		beta:   testkit.NewUpstream(t, "beta"),
		killed: make(map[int]bool),
	}
	// Clients reach the gateways through the LB only, so its URL is the
	// public URL; it gets its backends once they listen.
	c.lb = testkit.StartLB(t, nil)
	c.endpoint = c.lb.URL + "/mcp"
	cfg := testkit.WriteFile(t, "gateway.yaml", fmt.Sprintf(`
server:
  listen: "127.0.0.1:0"
  admin_listen: "127.0.0.1:0"
  public_url: %q
  list_cache_ttl: %s
  drain_delay: %s
  shutdown_grace: %s
sessions:
  store: redis
  idle_ttl: 5m
  redis:
    addrs: [%q]
    key_prefix: %q
auth:
  issuers:
    - name: corp
      issuer_url: %q
      tenant_claim: tenant
  required_scopes: ["mcp"]
tenants:
  - id: acme
  - id: globex
upstreams:
  # Not watched: the tests count upstream sessions, and each replica's
  # watch would open one more (internal/gateway tests the watch).
  - name: alpha
    url: %q
    watch: false
  - name: beta
    url: %q
    watch: false
    timeout: 10s
`, c.endpoint, o.listCacheTTL, o.drainDelay, o.shutdownGrace, c.redis.Addr, keyPrefix, c.idp.Issuer, c.alpha.URL, c.beta.URL))

	var backends []string
	for range replicas {
		p := testkit.StartGateway(t, bin, []string{"serve", "-config", cfg}, nil)
		if p.AdminAddr == "" {
			t.Fatalf("replica %s logged no admin address:\n%s", p.URL, p.Output())
		}
		c.replicas = append(c.replicas, p)
		backends = append(backends, p.URL)
	}
	c.lb.SetBackends(t, backends)
	// Runs before the processes are stopped: none may have died on its own
	// or panicked, whatever the test did to Redis, the upstreams or the
	// other replicas.
	t.Cleanup(func() {
		for i, p := range c.replicas {
			if !c.wasKilled(i) {
				select {
				case <-p.Exited():
					t.Errorf("replica %d (%s) exited on its own:\n%s", i, p.URL, p.Output())
				default:
				}
			}
			if out := p.Output(); strings.Contains(strings.ToLower(out), "panic") {
				t.Errorf("replica %d (%s) panicked:\n%s", i, p.URL, out)
			}
		}
	})
	return c
}

// kill kills replica i with SIGKILL, waits for it to die, and takes it out
// of the load balancer's rotation.
func (c *cluster) kill(t *testing.T, i int) {
	t.Helper()
	c.mu.Lock()
	c.killed[i] = true
	c.mu.Unlock()
	p := c.replicas[i]
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatalf("killing replica %d (pid %d): %v", i, p.Cmd.Process.Pid, err)
	}
	select {
	case <-p.Exited():
	case <-time.After(5 * time.Second):
		t.Fatalf("replica %d (pid %d) still running 5s after SIGKILL", i, p.Cmd.Process.Pid)
	}
	c.lb.Remove(i)
}

// markStopped records that replica i is stopped on purpose, so that its
// exit is no failure.
func (c *cluster) markStopped(i int) {
	c.mu.Lock()
	c.killed[i] = true
	c.mu.Unlock()
}

func (c *cluster) wasKilled(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.killed[i]
}

// token returns an access token of an IdP client for the gateways.
func (c *cluster) token(t *testing.T, client string) string {
	t.Helper()
	return c.idp.Token(t, client, c.endpoint, "mcp")
}

// connect opens a go-sdk client session through the load balancer as the
// IdP client acme-app.
func (c *cluster) connect(t *testing.T, opts *testkit.ConnectOptions) *mcp.ClientSession {
	t.Helper()
	if opts == nil {
		opts = &testkit.ConnectOptions{}
	}
	opts.Header = http.Header{"Authorization": {"Bearer " + c.token(t, "acme-app")}}
	return testkit.Connect(t, c.endpoint, opts)
}

// assertAlive fails the test if any replica not killed has exited.
func (c *cluster) assertAlive(t *testing.T) {
	t.Helper()
	for i, p := range c.replicas {
		if c.wasKilled(i) {
			continue
		}
		select {
		case <-p.Exited():
			t.Errorf("replica %d (%s) has exited:\n%s", i, p.URL, p.Output())
		default:
		}
	}
}

// sessionKeys returns the session keys in the private Redis.
func (c *cluster) sessionKeys(t *testing.T) []string {
	t.Helper()
	v, err := c.redis.Do("KEYS", keyPrefix+"session:*")
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	var keys []string
	for _, k := range v.([]any) {
		keys = append(keys, k.(string))
	}
	return keys
}

// readyz returns the status of a replica's /readyz.
func readyz(t *testing.T, p *testkit.Process) int {
	t.Helper()
	resp, err := httpClient.Get("http://" + p.AdminAddr + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz of %s: %v", p.URL, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// waitReadyz polls every replica's /readyz until all answer want.
func (c *cluster) waitReadyz(t *testing.T, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for i, p := range c.replicas {
		if c.wasKilled(i) {
			continue
		}
		for {
			got := readyz(t, p)
			if got == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d /readyz = %d, want %d within %v", i, got, want, within)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// httpClient sends the tests' raw requests. Each request is bounded, so a
// hang fails the test instead of stalling it.
var httpClient = &http.Client{Timeout: 10 * time.Second}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}`

// reply is a raw HTTP response, read whole.
type reply struct {
	status int
	header http.Header
	body   string
	took   time.Duration
}

// send sends one raw request to an MCP endpoint with the headers a
// conforming client sends; token and sid may be "". It fails the test if
// there is no response, so it must run on the test's goroutine (see do).
func send(t *testing.T, method, url, token, sid, body string) reply {
	t.Helper()
	r, err := do(method, url, token, sid, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// do is send for any goroutine: it returns the failure instead.
func do(method, url, token, sid, body string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	start := time.Now()
	resp, err := httpClient.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: reading the body: %w", method, url, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b), took: time.Since(start)}, nil
}

// initialize opens a session on one endpoint with raw HTTP and returns its
// id.
func initialize(t *testing.T, url, token string) string {
	t.Helper()
	r := send(t, http.MethodPost, url, token, "", initBody)
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || sid == "" {
		t.Fatalf("initialize at %s: %d %s (session id %q)", url, r.status, r.body, sid)
	}
	if r := send(t, http.MethodPost, url, token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized at %s: %d %s", url, r.status, r.body)
	}
	return sid
}

func echoCall(id int, tool, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":%q}}}`, id, tool, text)
}

// rpcError decodes a JSON-RPC error response, failing the test unless body
// is one.
func rpcError(t *testing.T, body string) (code int64, message string) {
	t.Helper()
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.JSONRPC != "2.0" || msg.Error == nil || msg.ID == nil {
		t.Fatalf("not a JSON-RPC error response (%v): %q", err, body)
	}
	return msg.Error.Code, msg.Error.Message
}

// callText calls a tool through cs and returns its first text content.
func callText(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) == 0 {
		return "", fmt.Errorf("%s: tool error or no content: %+v", tool, res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("%s: content[0] is %T", tool, res.Content[0])
	}
	return tc.Text, nil
}

// mustEcho calls <upstream>__echo through cs and checks the answer.
func mustEcho(t *testing.T, cs *mcp.ClientSession, upstream, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := callText(ctx, cs, upstream+"__echo", map[string]any{"text": text})
	if err != nil {
		t.Fatalf("%s__echo %q: %v", upstream, text, err)
	}
	if want := upstream + ":" + text; got != want {
		t.Fatalf("%s__echo = %q, want %q", upstream, got, want)
	}
}

// initializes counts the initialize requests an upstream received.
func initializes(u *testkit.Upstream) int {
	n := 0
	for _, r := range u.Requests() {
		if r.RPCMethod == "initialize" {
			n++
		}
	}
	return n
}

// callsSince returns the LB log entries from index from on that are
// tools/call requests.
func callsSince(lb *testkit.LB, from int) []testkit.LBRequest {
	log := lb.Log()
	return slices.DeleteFunc(log[from:], func(e testkit.LBRequest) bool { return e.RPCMethod != "tools/call" })
}
