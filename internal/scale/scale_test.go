// Package scale measures what issue 7 asks of one gateway replica beyond
// the cost of a single call: how much memory idle sessions and open
// client streams hold, how much CPU open streams burn while nothing
// happens, and whether the per-call cost grows with the size of the
// configuration. bench/README.md ("Scale and configuration size") lists
// the targets, the figures and the commands that reproduce them.
//
// Every test here is bounded in time and talks only to 127.0.0.1. The
// process-level tests (TestIdleSessions, TestIdleStreams) build the
// gateway binary and read its resident memory and CPU time from /proc, so
// they run on Linux only. They are skipped under -short; TestIdleSessions
// is also skipped under the race detector unless MCPGW_SCALE=1 (see there).
//
// Environment:
//
//	MCPGW_SCALE=1         run TestIdleSessions under -race too
//	MCPGW_SCALE_SESSIONS  sessions TestIdleSessions creates [100000]
//	MCPGW_SCALE_STREAMS   streams TestIdleStreams opens [10000], and
//	                      TestIdleStreamsSubscribed [10000, or what the
//	                      descriptors allow; 2000 under -race]
//	MCPGW_SCALE_IDLE      how long TestIdleStreams measures idle CPU [5s];
//	                      30s or more includes one heartbeat per stream
//	MCPGW_SCALE_PROFILE   a directory: the tests save the gateway's heap
//	                      profiles there (with its goroutines, grouped by
//	                      stack, beside each), and TestIdleSessions a 5s CPU
//	                      profile taken while it opens sessions (pprof on
//	                      the gateway's admin listener)
//
// The limits stay the same whatever the counts are set to: a smaller count
// only makes a test easier to pass.
package scale

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/testkit"
)

const (
	mib = 1 << 20

	protocolVersion = "2025-11-25"
	initializeBody  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"scale-test","version":"0.0.1"}}}`
)

// envInt returns the integer in environment variable name, or def.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// envDuration returns the duration in environment variable name, or def.
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, s)
	}
	return d
}

// needProc skips the process-level tests where they cannot measure
// anything, and under -short, where they are too slow.
func needProc(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the scale tests start a gateway and load it for several seconds")
	}
	if runtime.GOOS != "linux" {
		t.Skipf("reads /proc: Linux only, not %s", runtime.GOOS)
	}
}

// raiseNoFile raises this process's soft RLIMIT_NOFILE to its hard limit,
// so the gateway child inherits it too, and fails the test if that leaves
// fewer than need descriptors. (The Go runtime raises the soft limit at
// start-up already; this makes the requirement explicit.)
func raiseNoFile(t *testing.T, need uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatalf("setrlimit: %v", err)
		}
	}
	if lim.Cur < need {
		t.Fatalf("RLIMIT_NOFILE is %d (hard limit %d), this test needs %d: raise it (ulimit -Hn) or lower the count", lim.Cur, lim.Max, need)
	}
}

// --- the gateway process ----------------------------------------------------

// gatewayProc is a gateway binary under test.
type gatewayProc struct {
	cmd       *exec.Cmd
	pid       int
	host      string // 127.0.0.1:PORT of the MCP listener
	path      string // the MCP endpoint's path
	adminAddr string // 127.0.0.1:PORT of the admin listener
	out       syncBuffer
	exited    chan struct{}
}

// syncBuffer is the gateway's output: warnings and errors only.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startGateway builds the gateway (once per test binary) and runs it with
// the config gatewayConfig makes, logging at warn: at info it logs a line
// per session, and the test would measure the log. That also hides the
// "listening on" line testkit.StartGateway waits for, so the listeners
// get ports chosen here, and the gateway is ready when its admin /healthz
// answers and its MCP port accepts connections. It is stopped by its PID
// at the end of the test.
func startGateway(t *testing.T, upstreamURL string, maxSessions int) *gatewayProc {
	t.Helper()
	bin := testkit.BuildGateway(t)
	g := &gatewayProc{
		host:      fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)),
		adminAddr: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)),
		path:      "/mcp",
		exited:    make(chan struct{}),
	}
	path := testkit.WriteFile(t, "gateway.yaml", gatewayConfig(g.host, g.adminAddr, upstreamURL, maxSessions))
	g.cmd = exec.Command(bin, "serve", "-config", path, "-log-level", "warn")
	g.cmd.Stdout, g.cmd.Stderr = &g.out, &g.out
	g.cmd.WaitDelay = 5 * time.Second
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.pid = g.cmd.Process.Pid
	go func() {
		g.cmd.Wait()
		close(g.exited)
	}()
	t.Cleanup(func() {
		g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.exited:
		case <-time.After(5 * time.Second):
			g.cmd.Process.Kill()
			<-g.exited
		}
		if out := g.out.String(); t.Failed() || (testing.Verbose() && out != "") {
			t.Logf("gateway (pid %d) output:\n%s", g.pid, out)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-g.exited:
			t.Fatalf("the gateway exited before it was ready: %v\n%s", g.cmd.ProcessState, g.out.String())
		default:
		}
		if g.ready() {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway was not ready within 15s:\n%s", g.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ready reports whether the admin listener answers /healthz and the MCP
// listener accepts connections.
func (g *gatewayProc) ready() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + g.adminAddr + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	conn, err := net.DialTimeout("tcp", g.host, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// gatewayConfig is the YAML of a gateway with the memory store, anonymous
// auth and one upstream, with pprof on its admin listener.
func gatewayConfig(listen, admin, upstreamURL string, maxSessions int) string {
	return fmt.Sprintf(`# Written by internal/scale.
server:
  listen: %q
  admin_listen: %q
  drain_delay: 0s # stopped at the end of the test: no load balancer to tell
sessions:
  store: memory
  idle_ttl: 30m
  max_sessions: %d
  # One anonymous principal opens every session and stream: the caps per
  # principal and tenant would be the limits measured, not the gateway.
  max_per_principal: %[3]d
  max_per_tenant: %[3]d
limits:
  streams_per_principal: %[3]d
  streams_per_tenant: %[3]d
  upstream_streams_per_principal: %[3]d
  upstream_streams_per_tenant: %[3]d
upstreams:
  - name: up
    url: %q
    watch: false # the tests count upstream sessions: one per gateway session
auth:
  anonymous: true
telemetry:
  audit: { output: "off" }
  pprof: true
`, listen, admin, maxSessions, upstreamURL)
}

// procStatus returns a field of /proc/PID/status in bytes (VmRSS, VmHWM).
func procStatus(t testing.TB, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		v, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(v) // "123456", "kB"
		if len(f) != 2 || f[1] != "kB" {
			t.Fatalf("/proc/%d/status: unexpected %s line %q", pid, field, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return kb << 10
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

func rss(t testing.TB, pid int) int64 { return procStatus(t, pid, "VmRSS") }

// clockTick is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports (the kernel ABI fixes it).
const clockTick = 10 * time.Millisecond

// cpuTime returns the user plus system CPU time the process (all its
// threads) has used, from /proc/PID/stat, at a 10ms resolution.
func cpuTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after its closing parenthesis start at field 3 (state).
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		t.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	var ticks int64
	for _, s := range f[11:13] { // fields 14 (utime) and 15 (stime)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}

// metric returns the value of an unlabelled sample on the gateway's admin
// /metrics, or -1 if it is missing.
func (g *gatewayProc) metric(t testing.TB, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + g.adminAddr + "/metrics")
	if err != nil {
		t.Logf("admin /metrics: %v", err)
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// startCPUProfile starts fetching a CPU profile of the gateway over the
// next d, saved as name in the directory MCPGW_SCALE_PROFILE, if it is set.
// The returned function waits for it.
func (g *gatewayProc) startCPUProfile(t testing.TB, name string, d time.Duration) (wait func()) {
	t.Helper()
	dir := os.Getenv("MCPGW_SCALE_PROFILE")
	if dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", g.adminAddr, int(d.Seconds())))
		if err != nil {
			t.Errorf("CPU profile: %v", err)
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("CPU profile: %v %s", err, resp.Status)
			return
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Error(err)
			return
		}
		t.Logf("CPU profile: go tool pprof -top %s", path)
	}()
	return func() { <-done }
}

// liveHeap forces a garbage collection in the gateway (pprof's heap
// endpoint with gc=1) and returns the bytes its heap then holds: what is
// reachable, without the garbage a collection has not reclaimed yet. Call
// it after reading the RSS: it changes what the process holds.
func (g *gatewayProc) liveHeap(t testing.TB) int64 {
	t.Helper()
	resp, err := http.Get("http://" + g.adminAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Logf("forcing a GC: %v", err)
		return -1
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return int64(g.metric(t, "go_memstats_heap_alloc_bytes"))
}

// saveHeapProfile saves the gateway's heap profile as name in the
// directory MCPGW_SCALE_PROFILE, if it is set, and its goroutines, grouped
// by stack, as name.goroutines.txt.
func (g *gatewayProc) saveHeapProfile(t testing.TB, name string) {
	t.Helper()
	dir := os.Getenv("MCPGW_SCALE_PROFILE")
	if dir == "" {
		return
	}
	for _, p := range []struct{ url, file, how string }{
		{"/debug/pprof/heap", name, "heap profile: go tool pprof -sample_index=inuse_space -top "},
		{"/debug/pprof/goroutine?debug=1", name + ".goroutines.txt", "goroutines by stack: "},
	} {
		resp, err := http.Get("http://" + g.adminAddr + p.url)
		if err != nil {
			t.Errorf("%s: %v", p.url, err)
			return
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %v %s", p.url, err, resp.Status)
			return
		}
		path := filepath.Join(dir, p.file)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Error(err)
			return
		}
		t.Logf("%s%s", p.how, path)
	}
}

// --- a fast, stateless upstream ---------------------------------------------

// fastUpstream is a hand-written Streamable HTTP MCP server that keeps no
// state, so that what is measured is the gateway, not the test's upstream:
//
//   - initialize: an InitializeResult with the tools capability
//     (listChanged) and, if sessionIDs, a fresh 32-character Mcp-Session-Id
//     it does not remember (as long as a real one, so the gateway's
//     records are as big as they would be);
//   - notifications, responses: 202;
//   - tools/list: "echo" and tools t000, t001, … (tools in all);
//   - tools/call: text "ok";
//   - DELETE: 204; anything else: 405 or a JSON-RPC error.
//
// It counts requests by JSON-RPC method (DELETE counts as "DELETE").
type fastUpstream struct {
	URL        string
	sessionIDs bool
	toolsList  []byte // the tools/list result

	ids    atomic.Uint64
	mu     sync.Mutex
	counts map[string]int
}

func newFastUpstream(t testing.TB, tools int, sessionIDs bool) *fastUpstream {
	t.Helper()
	u := &fastUpstream{sessionIDs: sessionIDs, counts: make(map[string]int)}
	var b bytes.Buffer
	b.WriteString(`{"tools":[{"name":"echo","description":"Answers ok.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`)
	for i := range tools - 1 {
		fmt.Fprintf(&b, `,{"name":"t%03d","description":"A trivial tool.","inputSchema":{"type":"object"}}`, i)
	}
	b.WriteString(`]}`)
	u.toolsList = b.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(u.serveHTTP))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	u.URL = srv.URL + "/mcp"
	return u
}

// count returns how many requests of a method the upstream has received.
func (u *fastUpstream) count(method string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts[method]
}

// totalRequests returns how many requests the upstream has received.
func (u *fastUpstream) totalRequests() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, c := range u.counts {
		n += c
	}
	return n
}

func (u *fastUpstream) note(method string) {
	u.mu.Lock()
	u.counts[method]++
	u.mu.Unlock()
}

func (u *fastUpstream) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		u.note("DELETE")
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &msg) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	u.note(msg.Method)
	if len(msg.ID) == 0 || msg.Method == "" {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	out := make([]byte, 0, 128+len(u.toolsList))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, msg.ID...)
	switch msg.Method {
	case "initialize":
		if u.sessionIDs {
			h.Set("Mcp-Session-Id", fmt.Sprintf("up-%029x", u.ids.Add(1)))
		}
		out = append(out, `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"fast","version":"0.0.1"}}}`...)
	case "tools/list":
		out = append(out, `,"result":`...)
		out = append(out, u.toolsList...)
		out = append(out, '}')
	case "tools/call":
		out = append(out, `,"result":{"content":[{"type":"text","text":"ok"}]}}`...)
	case "ping":
		out = append(out, `,"result":{}}`...)
	default:
		out = append(out, `,"error":{"code":-32601,"message":"method not found"}}`...)
	}
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.Write(out)
}

// --- a minimal HTTP/1.1 client ----------------------------------------------

// clientConn is one keep-alive connection to the gateway, speaking just
// enough HTTP/1.1 for these tests. It costs the test process far less than
// net/http's client (no goroutines per connection, small buffers), which
// matters with 10,000 open streams and under the race detector.
type clientConn struct {
	c    net.Conn
	br   *bufio.Reader
	host string
	path string
	buf  []byte
}

func dialGateway(ctx context.Context, host, path string) (*clientConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	return &clientConn{c: c, br: bufio.NewReaderSize(c, 1024), host: host, path: path}, nil
}

func (c *clientConn) Close() error { return c.c.Close() }

// do sends one request and reads the response's status and headers; the
// caller reads or discards the body.
func (c *clientConn) do(method, sessionID string, body []byte) (*http.Response, error) {
	b := c.buf[:0]
	b = fmt.Appendf(b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, c.path, c.host)
	if method == http.MethodGet {
		b = append(b, "Accept: text/event-stream\r\n"...)
	} else {
		b = append(b, "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"...)
	}
	if sessionID != "" {
		b = fmt.Appendf(b, "Mcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\n", sessionID, protocolVersion)
	}
	if body != nil {
		b = fmt.Appendf(b, "Content-Length: %d\r\n", len(body))
	}
	b = append(b, "\r\n"...)
	b = append(b, body...)
	c.buf = b
	if _, err := c.c.Write(b); err != nil {
		return nil, err
	}
	return http.ReadResponse(c.br, nil)
}

// initialize opens a gateway session and returns its id.
func (c *clientConn) initialize() (string, error) {
	resp, err := c.do(http.MethodPost, "", []byte(initializeBody))
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", err
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" || !bytes.Contains(body, []byte(`"result"`)) {
		return "", fmt.Errorf("initialize: %s, session %q: %.200s", resp.Status, id, body)
	}
	return id, nil
}

// openSessions opens n sessions on the gateway from workers keep-alive
// connections at once and returns their ids. It stops at the first error.
func openSessions(ctx context.Context, host, path string, n, workers int) ([]string, error) {
	ids := make([]string, n)
	err := onWorkers(ctx, host, path, n, workers, func(c *clientConn, i int) (err error) {
		if ids[i], err = c.initialize(); err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("opening %d sessions: %w", n, err)
	}
	return ids, nil
}

// onWorkers runs do for i from 0 to n-1, on workers keep-alive connections
// to the gateway at once. It stops at the first error, which it returns
// (or ctx's).
func onWorkers(ctx context.Context, host, path string, n, workers int, do func(c *clientConn, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			c, err := dialGateway(ctx, host, path)
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(c, i); err != nil {
					errc <- err
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	return ctx.Err()
}

// isTimeout tells a read that timed out (the stream is open and idle)
// from one that failed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func formatMiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/mib) }
