package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/testkit"
)

type tenantKey struct{}

func withTenant(ctx context.Context, t string) context.Context {
	return context.WithValue(ctx, tenantKey{}, t)
}

// newStdioClient returns a client of the stdio test server, closed at the
// end of the test.
func newStdioClient(t *testing.T, st config.UpstreamStdio, env map[string]string, opts Options) (*Client, *testkit.SyncBuffer) {
	t.Helper()
	cfg := config.Upstream{Name: "fs", Command: []string{testkit.StdioServer(t)}, Env: env, Stdio: &st,
		Timeout: config.Duration(10 * time.Second)}
	if st.StopGrace == 0 {
		st.StopGrace = config.Duration(time.Second)
	}
	logs := &testkit.SyncBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	opts.Tenant = func(ctx context.Context) string { s, _ := ctx.Value(tenantKey{}).(string); return s }
	c := New(cfg, opts)
	t.Cleanup(func() { c.Close() })
	return c, logs
}

// callText calls tool with args on s and returns the text of its result,
// or its error.
func callText(ctx context.Context, c *Client, s session.Upstream, tool string, args any) (string, error) {
	a, _ := json.Marshal(args)
	params, _ := json.Marshal(map[string]any{"name": tool, "arguments": json.RawMessage(a)})
	r, err := c.Call(ctx, s, jsonrpc.IntID(7), "tools/call", params)
	if err != nil {
		return "", err
	}
	defer r.Close()
	for {
		m, _, err := r.Next()
		if err != nil {
			return "", err
		}
		switch m.Kind {
		case jsonrpc.KindErrorResponse:
			return "", m.Error
		case jsonrpc.KindResponse:
			var res struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			if err := json.Unmarshal(m.Result, &res); err != nil || len(res.Content) == 0 {
				return "", errors.New("bad result: " + string(m.Result))
			}
			return res.Content[0].Text, nil
		}
	}
}

func TestStdioCallAndLists(t *testing.T) {
	c, logs := newStdioClient(t, config.UpstreamStdio{}, map[string]string{"STDIOSERVER_GARBAGE": "1"}, Options{})
	ctx := context.Background()
	res, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Session.SessionID == "" || res.Session.ProtocolVersion == "" {
		t.Fatalf("session = %+v", res.Session)
	}
	r, err := c.Call(ctx, res.Session, jsonrpc.IntID(1), "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := r.Next()
	r.Close()
	if err != nil || m.Kind != jsonrpc.KindResponse || !bytes.Contains(m.Result, []byte(`"echo"`)) {
		t.Fatalf("tools/list = %v, %v", m, err)
	}
	got, err := callText(ctx, c, res.Session, "echo", map[string]string{"text": "hi"})
	if err != nil || got != "hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	got, err = callText(ctx, c, res.Session, "garbage", nil)
	if err != nil || got != "after garbage" {
		t.Fatalf("garbage = %q, %v", got, err)
	}
	if _, err := callText(ctx, c, res.Session, "stderr", map[string]string{"text": "hello from stderr"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return strings.Contains(logs.String(), "hello from stderr") })
	for _, want := range []string{"this is not JSON-RPC", "garbage in the middle", "stdioserver starting", "upstream=fs"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, cond, "condition not met")
}

func TestStdioTenantEnv(t *testing.T) {
	c, logs := newStdioClient(t, config.UpstreamStdio{Isolation: config.IsolationTenant},
		map[string]string{"TOKEN": "default-token"},
		Options{TenantEnv: map[string]map[string]string{"acme": {"TOKEN": "acme-token"}, "globex": {"TOKEN": "globex-token"}}})
	pids := map[string]string{}
	for _, tenant := range []string{"acme", "globex", "acme"} {
		ctx := withTenant(context.Background(), tenant)
		res, err := c.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := callText(ctx, c, res.Session, "env", map[string]string{"name": "TOKEN"})
		if err != nil || got != tenant+"-token" {
			t.Errorf("%s: TOKEN = %q, %v", tenant, got, err)
		}
		pid, err := callText(ctx, c, res.Session, "pid", nil)
		if err != nil {
			t.Fatal(err)
		}
		if old, ok := pids[tenant]; ok && old != pid {
			t.Errorf("%s: second session in process %s, first in %s", tenant, pid, old)
		}
		pids[tenant] = pid
		// The gateway's own environment is not the server's.
		if got, _ := callText(ctx, c, res.Session, "env", map[string]string{"name": "GOFLAGS_NOT_SET_ANYWHERE"}); got != "" {
			t.Errorf("unexpected env %q", got)
		}
	}
	if pids["acme"] == pids["globex"] {
		t.Errorf("two tenants share process %s", pids["acme"])
	}
	if c.pipe.Conns() != 2 {
		t.Errorf("%d processes, want 2", c.pipe.Conns())
	}
	// A secret of the env printed on stderr is scrubbed from the log.
	ctx := withTenant(context.Background(), "acme")
	res, _ := c.Open(ctx)
	if _, err := callText(ctx, c, res.Session, "stderr", map[string]string{"text": "my token is acme-token"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return strings.Contains(logs.String(), "my token is") })
	if strings.Contains(logs.String(), "acme-token") {
		t.Errorf("secret in the log:\n%s", logs.String())
	}
}

func TestStdioCrashAndRestart(t *testing.T) {
	c, _ := newStdioClient(t, config.UpstreamStdio{}, nil, Options{})
	ctx := context.Background()
	res, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid1, _ := callText(ctx, c, res.Session, "pid", nil)
	_, err = callText(ctx, c, res.Session, "crash", nil)
	var re *jsonrpc.Error
	if !errors.As(err, &re) || !strings.Contains(re.Message, "upstream fs") || !strings.Contains(re.Message, "exit status 3") {
		t.Fatalf("crash call: %v, want an error naming the upstream and the exit status", err)
	}
	// The session is gone with the process: the client is told so, and a
	// new session starts a new process (after a backoff: it lived briefly).
	_, err = callText(ctx, c, res.Session, "pid", nil)
	if !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("call on the dead session: %v, want ErrSessionExpired", err)
	}
	res, err = c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid2, err := callText(ctx, c, res.Session, "pid", nil)
	if err != nil || pid2 == pid1 {
		t.Fatalf("after restart: pid %q (was %q), %v", pid2, pid1, err)
	}
}

func TestStdioProgressAndCancel(t *testing.T) {
	c, logs := newStdioClient(t, config.UpstreamStdio{Isolation: config.IsolationShared}, nil, Options{})
	ctx := context.Background()
	a, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two sessions on one process, with the same progress token: each
	// gets its own progress.
	var wg sync.WaitGroup
	for _, s := range []session.Upstream{a.Session, b.Session} {
		wg.Go(func() {
			r, err := c.Call(ctx, s, jsonrpc.IntID(1), "tools/call", json.RawMessage(`{"name":"progress","arguments":{"steps":3},"_meta":{"progressToken":"tok"}}`))
			if err != nil {
				t.Error(err)
				return
			}
			defer r.Close()
			n := 0
			for {
				m, raw, err := r.Next()
				if err != nil {
					t.Error(err)
					return
				}
				if m.Method == "notifications/progress" {
					if !bytes.Contains(raw, []byte(`"progressToken":"tok"`)) {
						t.Errorf("progress with another token: %s", raw)
					}
					n++
				}
				if m.Kind == jsonrpc.KindResponse {
					break
				}
			}
			if n != 3 {
				t.Errorf("%d progress notifications, want 3", n)
			}
		})
	}
	wg.Wait()

	// Cancellation: the caller gives up, the server hears of it.
	cctx, cancel := context.WithCancel(ctx)
	r, err := c.Call(cctx, a.Session, jsonrpc.IntID(2), "tools/call", json.RawMessage(`{"name":"block","arguments":{},"_meta":{"progressToken":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if m, _, err := r.Next(); err != nil || m.Method != "notifications/progress" {
		t.Fatalf("first message = %v, %v", m, err)
	}
	cancel()
	r.Close()
	eventually(t, func() bool { return strings.Contains(logs.String(), "line=cancelled") })
}

func TestStdioIdleAndShutdown(t *testing.T) {
	c, _ := newStdioClient(t, config.UpstreamStdio{IdleTimeout: config.Duration(300 * time.Millisecond)},
		map[string]string{"STDIOSERVER_CHILD": "1"}, Options{})
	ctx := context.Background()
	res, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := callText(ctx, c, res.Session, "pid", nil)
	if !testkit.ProcessRunning(pid) {
		t.Fatalf("server %s not running", pid)
	}
	eventually(t, func() bool { return c.pipe.Conns() == 0 })
	if testkit.ProcessRunning(pid) {
		t.Errorf("idle server %s still running", pid)
	}
	if _, err := callText(ctx, c, res.Session, "pid", nil); !errors.Is(err, ErrSessionExpired) {
		t.Errorf("call after idle stop: %v, want ErrSessionExpired", err)
	}
	// Shutdown: Close stops the process and its child.
	res, err = c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ = callText(ctx, c, res.Session, "pid", nil)
	children := testkit.ChildPids(pid)
	if len(children) == 0 {
		t.Fatalf("server %s started no child", pid)
	}
	c.Close()
	// SIGKILL is delivered asynchronously: give it a moment.
	for _, p := range append(children, pid) {
		eventually(t, func() bool { return !testkit.ProcessRunning(p) })
	}
}

// TestStdioQueueBound: a caller that does not read while the server sends
// many notifications gets some dropped (queueLen bounds what waits for
// it), never its response.
func TestStdioQueueBound(t *testing.T) {
	c, logs := newStdioClient(t, config.UpstreamStdio{}, nil, Options{})
	ctx := context.Background()
	res, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Call(ctx, res.Session, jsonrpc.IntID(1), "tools/call", json.RawMessage(`{"name":"progress","arguments":{"steps":2000},"_meta":{"progressToken":"t"}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The server says on stderr when it has sent every notification: all
	// but what the stdout pipe holds (64 KiB, a few hundred) have reached
	// the queue or been dropped.
	eventually(t, func() bool { return strings.Contains(logs.String(), "progress: 2000 sent") })
	n := 0
	for {
		m, _, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind == jsonrpc.KindResponse {
			break
		}
		n++
	}
	if n >= 2000 || n == 0 {
		t.Errorf("%d progress notifications of 2000 reached a caller that did not read", n)
	}
	t.Logf("%d of 2000 progress notifications kept", n)
}

// TestStdioCrashLoopBacksOff: a server that exits at once fails each
// session's initialize with its exit status, and is started again only
// after a growing backoff.
func TestStdioCrashLoopBacksOff(t *testing.T) {
	cfg := config.Upstream{Name: "bad", Command: []string{"sh", "-c", "echo starting >&2; exit 7"}, Timeout: config.Duration(10 * time.Second),
		Stdio: &config.UpstreamStdio{StopGrace: config.Duration(time.Second)}}
	c := New(cfg, Options{})
	defer c.Close()
	ctx := context.Background()
	start := time.Now()
	for i := range 3 {
		_, err := c.Open(ctx)
		if err == nil || !strings.Contains(err.Error(), "exit status 7") {
			t.Fatalf("open %d: %v, want the exit status", i, err)
		}
	}
	// 250ms before the second start, 500ms before the third.
	if d := time.Since(start); d < 700*time.Millisecond {
		t.Errorf("three starts of a crashing server in %v: no backoff", d)
	}
	eventually(t, func() bool { return c.pipe.Conns() == 0 })
}

// TestStdioSessionIsolation: with isolation session, each session has its
// process, and ending the session stops it.
func TestStdioSessionIsolation(t *testing.T) {
	c, _ := newStdioClient(t, config.UpstreamStdio{Isolation: config.IsolationSession}, nil, Options{})
	ctx := context.Background()
	a, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := callText(ctx, c, a.Session, "pid", nil)
	pb, _ := callText(ctx, c, b.Session, "pid", nil)
	if pa == pb || pa == "" {
		t.Fatalf("sessions in processes %q and %q", pa, pb)
	}
	if err := c.Terminate(ctx, a.Session); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return !testkit.ProcessRunning(pa) })
	if !testkit.ProcessRunning(pb) {
		t.Error("the other session's process stopped")
	}
	if got, err := callText(ctx, c, b.Session, "echo", map[string]string{"text": "still"}); err != nil || got != "still" {
		t.Errorf("other session: %q, %v", got, err)
	}
}
