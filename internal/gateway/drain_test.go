package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

// runDrained starts Run with the config yaml (the upstream, the listeners
// and the audit output are added) and returns the MCP endpoint, the admin
// base URL, the function that sends SIGTERM (cancels Run's context), and
// Run's result.
func runDrained(t *testing.T, a *testkit.Upstream, server string) (url, admin string, term func(), done <-chan error) {
	t.Helper()
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t))
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := "server:\n  admin_listen: " + adminAddr + "\n" + server +
		"auth:\n  anonymous: true\nupstreams:\n  - name: alpha\n    url: " + a.URL + "\n    watch: false\ntelemetry:\n  audit:\n    output: \"off\"\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.PublicURL = "http://" + ln.Addr().String() + "/mcp"
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		errc <- gateway.Run(ctx, cfg, gateway.Options{Listener: ln, Logger: testLogger(t), Getenv: func(string) string { return "" }},
			func(addr string) { ready <- addr })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return in 30s")
		}
	})
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run not ready in 10s")
	}
	return cfg.Server.PublicURL, "http://" + adminAddr, cancel, errc
}

// readyzStatus returns the status of GET /readyz, 0 if it cannot be had.
func readyzStatus(admin string) int {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(admin + "/readyz")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// openStreamLines opens the session's GET stream and returns its lines, closed
// at the stream's end.
func openStreamLines(t *testing.T, url, sid string) <-chan string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// openListenLines opens a 2026-07-28 subscriptions/listen stream and
// returns its lines, closed at the stream's end, once acknowledged.
func openListenLines(t *testing.T, url string) <-chan string {
	t.Helper()
	resp, err := http.DefaultClient.Do(post2026(t, url, 9, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("subscriptions/listen: %d", resp.StatusCode)
	}
	lines := make(chan string, 64)
	acked := make(chan struct{})
	go func() {
		defer close(lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		once := sync.OnceFunc(func() { close(acked) })
		defer once()
		for sc.Scan() {
			if strings.Contains(sc.Text(), "notifications/subscriptions/acknowledged") {
				once()
			}
			lines <- sc.Text()
		}
	}()
	select {
	case <-acked:
	case <-time.After(5 * time.Second):
		t.Fatal("subscriptions/listen not acknowledged in 5s")
	}
	return lines
}

// TestRunDrain: on SIGTERM /readyz answers 503 at once and to the end, the
// MCP listener serves new requests for server.drain_delay (closing their
// connections), then the GET stream gets a retry field and ends, the
// listener closes, and a call in flight finishes before Run returns.
func TestRunDrain(t *testing.T) {
	const delay = 800 * time.Millisecond
	a := testkit.NewUpstream(t, "alpha")
	url, admin, term, done := runDrained(t, a, "  drain_delay: 800ms\n  shutdown_grace: 10s\n")
	if got := readyzStatus(admin); got != http.StatusOK {
		t.Fatalf("/readyz before SIGTERM = %d, want 200", got)
	}
	sid := initialize(t, url)
	stream := openStreamLines(t, url, sid)
	listen := openListenLines(t, url)

	// A call in flight across the whole drain: it waits at the gate, which
	// opens after the listener has closed.
	inflight := make(chan string, 1)
	go func() {
		resp, err := http.DefaultClient.Do(post(t, url, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha__gate"}}`))
		if err != nil {
			inflight <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		inflight <- string(b)
	}()
	waitGateCall(t, a)

	start := time.Now()
	term()
	if !testkit.Poll(delay/2, func() bool { return readyzStatus(admin) == http.StatusServiceUnavailable }) {
		t.Fatalf("/readyz still not 503 %v after SIGTERM", time.Since(start))
	}
	// Still served during the delay, on a new connection, which the
	// response closes.
	resp, body := do(t, post(t, url, sid, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"late"}}}`))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "alpha:late") {
		t.Fatalf("call during the drain delay: %d %s", resp.StatusCode, body)
	}
	if !resp.Close {
		t.Error("a response during the drain delay keeps its connection: want Connection: close")
	}
	if d := time.Since(start); d >= delay {
		t.Fatalf("the checks above took %v, longer than the drain delay: the test proves nothing", d)
	}

	// The GET stream ends with a retry field when the delay is over.
	var last []string
	for l := range stream {
		last = append(last, l)
	}
	ended := time.Since(start)
	if ended < delay {
		t.Errorf("GET stream ended %v after SIGTERM, before the drain delay (%v)", ended, delay)
	}
	if len(last) < 2 || last[len(last)-2] != "retry: 1000" || last[len(last)-1] != "" {
		t.Errorf("GET stream's last lines = %q, want a retry field and a blank line", last)
	}
	// So does a subscriptions/listen stream, without the graceful closure
	// (a response to listen), so that the client listens again elsewhere.
	last = nil
	for l := range listen {
		last = append(last, l)
	}
	if len(last) < 2 || last[len(last)-2] != "retry: 1000" || last[len(last)-1] != "" {
		t.Errorf("listen stream's last lines = %q, want a retry field and a blank line", last)
	}
	for _, l := range last {
		if strings.Contains(l, `"resultType"`) {
			t.Errorf("listen stream got a graceful closure on drain: %s", l)
		}
	}

	// The listener is closed now, and /readyz still answers 503.
	// A closed listener says so only by refusing a dial.
	if !testkit.Poll(2*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	}) {
		t.Fatal("the MCP listener still accepts 2s after the drain delay")
	}
	if got := readyzStatus(admin); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz while a call is in flight = %d, want 503", got)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned with a call in flight: %v", err)
	default:
	}

	a.Release()
	if got := <-inflight; !strings.Contains(got, "released") {
		t.Errorf("the call in flight: %s", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return 5s after the last call ended")
	}
	if got := readyzStatus(admin); got != 0 {
		t.Errorf("/readyz after Run returned = %d, want no listener", got)
	}
}

// TestRunDrainGrace: a call still in flight when server.shutdown_grace
// (counted from SIGTERM) is over is cut, and Run returns.
func TestRunDrainGrace(t *testing.T) {
	const grace = time.Second
	a := testkit.NewUpstream(t, "alpha")
	url, _, term, done := runDrained(t, a, "  drain_delay: 300ms\n  shutdown_grace: 1s\n")
	sid := initialize(t, url)
	inflight := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(post(t, url, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha__gate"}}`))
		if err == nil {
			defer resp.Body.Close()
			_, err = io.ReadAll(resp.Body)
		}
		inflight <- err
	}()
	waitGateCall(t, a)
	start := time.Now()
	term()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(grace + 5*time.Second):
		t.Fatal("Run did not return 5s after the grace")
	}
	if took := time.Since(start); took < grace || took > grace+2*time.Second {
		t.Errorf("Run returned %v after SIGTERM, want about the grace (%v)", took, grace)
	}
	select {
	case err := <-inflight:
		if err == nil {
			t.Error("the call in flight past the grace was not cut")
		}
	case <-time.After(5 * time.Second):
		t.Error("the call in flight past the grace still runs")
	}
	a.Release()
}

// waitGateCall waits until the upstream's gate call has taken the gate.
func waitGateCall(t *testing.T, a *testkit.Upstream) {
	t.Helper()
	select {
	case <-a.Gated():
	case <-time.After(5 * time.Second):
		t.Fatal("the gate call did not reach the upstream in 5s")
	}
}
