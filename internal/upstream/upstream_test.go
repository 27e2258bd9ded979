package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
)

// This file holds the test harness: a go-sdk upstream behind an
// httptest.Server that records what it received, and helpers.

// toolArgs are the arguments of the test tools.
type toolArgs struct {
	Text string `json:"text,omitempty"`
	N    int    `json:"n,omitempty"`
}

// recorded is one HTTP request the upstream received.
type recorded struct {
	Method string
	Header http.Header
	Body   string
}

// testUpstream is a go-sdk MCP server behind an httptest.Server. Its
// handler can be swapped (a "restart" that forgets every session).
type testUpstream struct {
	t    *testing.T
	srv  *httptest.Server
	opts mcp.StreamableHTTPOptions

	handler atomic.Pointer[http.Handler]

	mu      sync.Mutex
	reqs    []recorded
	servers []*mcp.Server

	// started receives the name of a tool when its handler starts.
	started chan string
	// release unblocks the "gate" tool.
	release chan struct{}
	// cancelled receives the name of a blocking tool whose context ended.
	cancelled chan string
}

func newTestUpstream(t *testing.T, opts mcp.StreamableHTTPOptions) *testUpstream {
	t.Helper()
	u := &testUpstream{
		t:         t,
		opts:      opts,
		started:   make(chan string, 16),
		release:   make(chan struct{}),
		cancelled: make(chan string, 16),
	}
	u.restart()
	u.srv = httptest.NewServer(http.HandlerFunc(u.serveHTTP))
	// Cleanups run last-in first-out: close the go-sdk sessions (so their
	// goroutines end and no request hangs), then the server.
	t.Cleanup(u.srv.Close)
	t.Cleanup(func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		for _, s := range u.servers {
			for ss := range s.Sessions() {
				ss.Close()
			}
		}
	})
	return u
}

// restart replaces the handler with a new one that knows no session.
func (u *testUpstream) restart() {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1.0.0"}, &mcp.ServerOptions{Instructions: "be nice"})
	u.addTools(s)
	opts := u.opts
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &opts)
	u.mu.Lock()
	u.servers = append(u.servers, s)
	u.mu.Unlock()
	u.handler.Store(&h)
}

func (u *testUpstream) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	u.mu.Lock()
	u.reqs = append(u.reqs, recorded{Method: r.Method, Header: r.Header.Clone(), Body: string(body)})
	u.mu.Unlock()
	(*u.handler.Load()).ServeHTTP(w, r)
}

// requests returns the requests received so far.
func (u *testUpstream) requests() []recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]recorded(nil), u.reqs...)
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func (u *testUpstream) addTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in toolArgs) (*mcp.CallToolResult, any, error) {
		return textResult(in.Text), nil, nil
	})
	// big returns a text of N bytes.
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(ctx context.Context, req *mcp.CallToolRequest, in toolArgs) (*mcp.CallToolResult, any, error) {
		return textResult(strings.Repeat("x", in.N)), nil, nil
	})
	// gate sends progress 1, waits for release, sends progress 2, returns.
	mcp.AddTool(s, &mcp.Tool{Name: "gate"}, func(ctx context.Context, req *mcp.CallToolRequest, in toolArgs) (*mcp.CallToolResult, any, error) {
		tok := req.Params.GetProgressToken()
		u.started <- "gate"
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2}); err != nil {
			return nil, nil, err
		}
		select {
		case <-u.release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 2, Total: 2}); err != nil {
			return nil, nil, err
		}
		return textResult("done"), nil, nil
	})
	// block runs until its context ends, and reports that. With N > 0 it
	// first sends a progress notification, so that the HTTP response starts
	// (the go-sdk sends its headers with the first event).
	mcp.AddTool(s, &mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.CallToolRequest, in toolArgs) (*mcp.CallToolResult, any, error) {
		u.started <- "block"
		if in.N > 0 {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1}); err != nil {
				return nil, nil, err
			}
		}
		select {
		case <-ctx.Done():
			u.cancelled <- "block"
			return nil, nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return textResult("not cancelled"), nil, nil
		}
	})
}

// newTestClient returns a client for url with the given timeout and
// options, closed (waiting for its background work) when the test ends.
func newTestClient(t *testing.T, url string, timeout time.Duration, headers map[string]string, opts Options) *Client {
	t.Helper()
	c := New(config.Upstream{Name: "up1", URL: url, Timeout: config.Duration(timeout), Headers: headers}, opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// initialize opens a session or fails the test.
func initialize(t *testing.T, c *Client) session.Upstream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := c.Initialize(ctx)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	return res.Session
}

// message is one message Next returned.
type message struct {
	msg *jsonrpc.Message
	raw string
}

// readAll calls Next until io.EOF or an error, and closes r.
func readAll(t *testing.T, r *Response) ([]message, error) {
	t.Helper()
	defer r.Close()
	var out []message
	for {
		msg, raw, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, message{msg, string(raw)})
		if len(out) > 1000 {
			t.Fatal("too many messages")
		}
	}
}

// callTool calls tools/call on tool name with args and the given id.
func callTool(ctx context.Context, c *Client, s session.Upstream, id jsonrpc.ID, name string, args any) (*Response, error) {
	params, _ := json.Marshal(map[string]any{"name": name, "arguments": args, "_meta": map[string]any{"progressToken": "tok"}})
	return c.Call(ctx, s, id, "tools/call", params)
}

// resultText returns the text of the first content item of a tools/call
// result.
func resultText(t *testing.T, m *jsonrpc.Message) string {
	t.Helper()
	if m.Kind != jsonrpc.KindResponse {
		t.Fatalf("message kind %d, want a response (error %v)", m.Kind, m.Error)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("bad result %s: %v", m.Result, err)
	}
	if res.IsError {
		t.Fatalf("tool error: %s", res.Content[0].Text)
	}
	return res.Content[0].Text
}

// waitFor receives from ch within d, or fails the test.
func waitFor[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// rawUpstream serves h on an httptest.Server closed when the test ends.
func rawUpstream(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// writeSSE writes events and flushes.
func writeSSE(w http.ResponseWriter, events ...string) {
	for _, e := range events {
		fmt.Fprint(w, e)
	}
	http.NewResponseController(w).Flush()
}

// rawInit answers an initialize request on a hand-written upstream.
func rawInit(w http.ResponseWriter, version string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Mcp-Session-Id", "sess-1")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}}`, version)
}
