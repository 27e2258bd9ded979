package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
)

func TestInitialize(t *testing.T) {
	u := newTestUpstream(t, mcp.StreamableHTTPOptions{})
	c := newTestClient(t, u.srv.URL, 5*time.Second, nil, Options{
		ClientInfo:   json.RawMessage(`{"name":"gw-test","version":"9"}`),
		Capabilities: json.RawMessage(`{"roots":{}}`),
	})
	res, err := c.Initialize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Session.SessionID == "" {
		t.Error("no session id")
	}
	if res.Session.ProtocolVersion != "2025-11-25" {
		t.Errorf("protocol version %q, want 2025-11-25", res.Session.ProtocolVersion)
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(res.Session.Capabilities, &caps); err != nil || caps["tools"] == nil {
		t.Errorf("capabilities %s lack tools (%v)", res.Session.Capabilities, err)
	}
	if !strings.Contains(string(res.ServerInfo), `"test-upstream"`) {
		t.Errorf("server info %s", res.ServerInfo)
	}
	if res.Instructions != "be nice" {
		t.Errorf("instructions %q", res.Instructions)
	}

	reqs := u.requests()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want initialize and initialized", len(reqs))
	}
	var init struct {
		Params struct {
			ProtocolVersion string          `json:"protocolVersion"`
			ClientInfo      json.RawMessage `json:"clientInfo"`
			Capabilities    json.RawMessage `json:"capabilities"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(reqs[0].Body), &init); err != nil {
		t.Fatal(err)
	}
	if init.Params.ProtocolVersion != "2025-11-25" || string(init.Params.ClientInfo) != `{"name":"gw-test","version":"9"}` || string(init.Params.Capabilities) != `{"roots":{}}` {
		t.Errorf("initialize body %s", reqs[0].Body)
	}
	if h := reqs[0].Header; h.Get("Mcp-Session-Id") != "" || h.Get("Mcp-Protocol-Version") != "" {
		t.Errorf("initialize carried session headers: %v", h)
	}
	if !strings.Contains(reqs[1].Body, `"notifications/initialized"`) ||
		reqs[1].Header.Get("Mcp-Session-Id") != res.Session.SessionID ||
		reqs[1].Header.Get("Mcp-Protocol-Version") != "2025-11-25" {
		t.Errorf("initialized notification: %s %v", reqs[1].Body, reqs[1].Header)
	}
}

func TestInitializeVersions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		wantErr bool
	}{
		{name: "2025-06-18", version: "2025-06-18"},
		{name: "2025-03-26", version: "2025-03-26"},
		{name: "too old", version: "2024-11-05", wantErr: true},
		{name: "unknown", version: "2099-01-01", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var deleted atomic.Bool
			srv := rawUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodDelete:
					deleted.Store(true)
				case r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "":
					rawInit(w, tc.version)
				default:
					w.WriteHeader(http.StatusAccepted)
				}
			})
			c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{})
			res, err := c.Initialize(context.Background())
			if tc.wantErr {
				var e *Error
				if !errors.As(err, &e) || !strings.Contains(err.Error(), "unsupported protocol version") {
					t.Fatalf("got %v, want an unsupported version *Error", err)
				}
				c.Close() // waits for the DELETE of the useless session
				if !deleted.Load() {
					t.Error("the session of an unsupported upstream was not terminated")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Session.ProtocolVersion != tc.version || res.Session.SessionID != "sess-1" {
				t.Errorf("session %+v", res.Session)
			}
		})
	}
}

func TestInitializeErrorResponse(t *testing.T) {
	srv := rawUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":0,"error":{"code":-32602,"message":"bad version"}}`)
	})
	c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{})
	_, err := c.Initialize(context.Background())
	if !errors.Is(err, jsonrpc.ErrInvalidParams) {
		t.Fatalf("got %v, want the upstream's invalid params error", err)
	}
}

func TestCall(t *testing.T) {
	for _, tc := range []struct {
		name      string
		json      bool
		streaming bool
	}{
		{name: "sse", streaming: true},
		{name: "json", json: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newTestUpstream(t, mcp.StreamableHTTPOptions{JSONResponse: tc.json})
			c := newTestClient(t, u.srv.URL, 5*time.Second, nil, Options{})
			s := initialize(t, c)
			ctx := context.Background()

			r, err := c.Call(ctx, s, jsonrpc.StringID("list-1"), "tools/list", nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Streaming() != tc.streaming {
				t.Errorf("Streaming() = %v, want %v", r.Streaming(), tc.streaming)
			}
			msgs, err := readAll(t, r)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 1 {
				t.Fatalf("got %d messages, want 1", len(msgs))
			}
			m := msgs[0]
			if m.msg.Kind != jsonrpc.KindResponse || m.msg.ID.String() != `"list-1"` {
				t.Fatalf("got %+v", m.msg)
			}
			var list struct {
				Tools []struct{ Name string } `json:"tools"`
			}
			if err := json.Unmarshal(m.msg.Result, &list); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			if diff := cmp.Diff([]string{"big", "block", "echo", "gate"}, names); diff != "" {
				t.Errorf("tools mismatch (-want +got):\n%s", diff)
			}
			// raw is the upstream's bytes: decoding it gives the same message.
			again, err := jsonrpc.Decode([]byte(m.raw))
			if err != nil || string(again.Result) != string(m.msg.Result) {
				t.Errorf("raw bytes %q do not decode to the message (%v)", m.raw, err)
			}

			r, err = callTool(ctx, c, s, jsonrpc.IntID(42), "echo", toolArgs{Text: "hello"})
			if err != nil {
				t.Fatal(err)
			}
			msgs, err = readAll(t, r)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 1 || msgs[0].msg.ID.String() != "42" {
				t.Fatalf("got %+v", msgs)
			}
			if got := resultText(t, msgs[0].msg); got != "hello" {
				t.Errorf("echo returned %q", got)
			}
			if !strings.Contains(msgs[0].raw, `"id":42`) {
				t.Errorf("raw %q lacks the id", msgs[0].raw)
			}
			// After the response, Next keeps returning io.EOF, and Close is
			// idempotent.
			if _, _, err := r.Next(); err == nil {
				t.Error("Next after Close succeeded")
			}
			if err := r.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestProgressStreaming checks that notifications reach the caller as soon as
// the upstream sends them, not when the response arrives.
func TestProgressStreaming(t *testing.T) {
	u := newTestUpstream(t, mcp.StreamableHTTPOptions{})
	c := newTestClient(t, u.srv.URL, 5*time.Second, nil, Options{})
	s := initialize(t, c)

	r, err := callTool(context.Background(), c, s, jsonrpc.IntID(7), "gate", toolArgs{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	released := false
	defer func() {
		if !released {
			close(u.release)
		}
	}()

	type next struct {
		msg *jsonrpc.Message
		err error
	}
	nextAsync := func() <-chan next {
		ch := make(chan next, 1)
		go func() {
			msg, _, err := r.Next()
			ch <- next{msg, err}
		}()
		return ch
	}
	// The tool is blocked on release: the first progress must arrive anyway.
	n := waitFor(t, nextAsync(), 3*time.Second, "the first progress notification")
	if n.err != nil || n.msg.Kind != jsonrpc.KindNotification || n.msg.Method != "notifications/progress" || !strings.Contains(string(n.msg.Params), `"progress":1`) {
		t.Fatalf("got %+v, %v; want progress 1", n.msg, n.err)
	}
	close(u.release)
	released = true
	n = waitFor(t, nextAsync(), 3*time.Second, "the second progress notification")
	if n.err != nil || n.msg.Method != "notifications/progress" || !strings.Contains(string(n.msg.Params), `"progress":2`) {
		t.Fatalf("got %+v, %v; want progress 2", n.msg, n.err)
	}
	n = waitFor(t, nextAsync(), 3*time.Second, "the response")
	if n.err != nil || n.msg.ID.String() != "7" {
		t.Fatalf("got %+v, %v; want the response", n.msg, n.err)
	}
	if got := resultText(t, n.msg); got != "done" {
		t.Errorf("result %q", got)
	}
	n = waitFor(t, nextAsync(), 3*time.Second, "io.EOF")
	if n.err != io.EOF {
		t.Errorf("after the response Next returned %v, want io.EOF", n.err)
	}
}

func TestHeaders(t *testing.T) {
	// Headers a request may carry: the config's and the protocol's (and
	// Content-Length, which net/http derives from the body).
	protocol := []string{"Accept", "Content-Type", "Content-Length", "Mcp-Session-Id", "Mcp-Protocol-Version"}
	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{name: "configured", headers: map[string]string{"Authorization": "Bearer s3cret", "x-tenant": "acme"}},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newTestUpstream(t, mcp.StreamableHTTPOptions{})
			c := newTestClient(t, u.srv.URL, 5*time.Second, tc.headers, Options{})
			s := initialize(t, c)
			r, err := callTool(context.Background(), c, s, jsonrpc.IntID(1), "echo", toolArgs{Text: "x"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := readAll(t, r); err != nil {
				t.Fatal(err)
			}
			if err := c.Terminate(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			reqs := u.requests()
			if len(reqs) != 4 {
				t.Fatalf("got %d requests, want 4", len(reqs))
			}
			for i, req := range reqs {
				for k := range req.Header {
					if !slices.Contains(protocol, k) && !containsFold(tc.headers, k) {
						t.Errorf("request %d (%s) carries header %s", i, req.Method, k)
					}
				}
				for k, v := range tc.headers {
					if got := req.Header.Get(k); got != v {
						t.Errorf("request %d (%s): header %s = %q, want %q", i, req.Method, k, got, v)
					}
				}
				if tc.headers == nil && req.Header.Get("Authorization") != "" {
					t.Errorf("request %d carries Authorization without config", i)
				}
				if req.Method == http.MethodPost {
					if req.Header.Get("Content-Type") != "application/json" ||
						req.Header.Get("Accept") != "application/json, text/event-stream" ||
						req.Header.Get("Content-Length") == "" {
						t.Errorf("request %d: POST headers %v", i, req.Header)
					}
				}
			}
			if reqs[3].Method != http.MethodDelete || reqs[3].Header.Get("Mcp-Session-Id") != s.SessionID {
				t.Errorf("last request %s %v, want DELETE of the session", reqs[3].Method, reqs[3].Header)
			}
		})
	}
}

func containsFold(m map[string]string, k string) bool {
	for mk := range m {
		if strings.EqualFold(mk, k) {
			return true
		}
	}
	return false
}

func TestSessionExpired(t *testing.T) {
	u := newTestUpstream(t, mcp.StreamableHTTPOptions{})
	c := newTestClient(t, u.srv.URL, 5*time.Second, nil, Options{})
	s := initialize(t, c)
	u.restart() // the upstream forgets every session

	_, err := c.Call(context.Background(), s, jsonrpc.IntID(1), "tools/list", nil)
	if !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("Call: got %v, want ErrSessionExpired", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Upstream != "up1" {
		t.Errorf("got %#v", err)
	}
	if err := c.Notify(context.Background(), s, "notifications/roots/list_changed", nil); !errors.Is(err, ErrSessionExpired) {
		t.Errorf("Notify: got %v, want ErrSessionExpired", err)
	}
	// A new session works.
	s = initialize(t, c)
	r, err := c.Call(context.Background(), s, jsonrpc.IntID(2), "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, r); err != nil {
		t.Fatal(err)
	}
}

func TestTerminate(t *testing.T) {
	u := newTestUpstream(t, mcp.StreamableHTTPOptions{})
	c := newTestClient(t, u.srv.URL, 5*time.Second, nil, Options{})
	s := initialize(t, c)
	if err := c.Terminate(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), s, jsonrpc.IntID(1), "tools/list", nil); !errors.Is(err, ErrSessionExpired) {
		t.Errorf("Call after Terminate: got %v, want ErrSessionExpired", err)
	}
	n := len(u.requests())
	if err := c.Terminate(context.Background(), session.Upstream{}); err != nil {
		t.Error(err)
	}
	if len(u.requests()) != n {
		t.Error("Terminate without a session id sent a request")
	}
}

// TestStatuses covers how non-2xx statuses and odd bodies become errors, on
// a hand-written upstream.
func TestStatuses(t *testing.T) {
	long := strings.Repeat("y", 5000)
	for _, tc := range []struct {
		name        string
		status      int
		contentType string
		body        string
		op          func(*Client, session.Upstream) error
		wantExpired bool
		wantStatus  int
		wantMsg     string
	}{
		{name: "404 with session", status: 404, body: "gone", wantExpired: true, wantStatus: 404},
		{name: "400 mentioning the session (TypeScript SDK)", status: 400, contentType: "application/json",
			body: `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid Session ID provided"},"id":null}`, wantExpired: true, wantStatus: 400},
		{name: "other 400", status: 400, body: "bad protocol version", wantStatus: 400, wantMsg: "HTTP 400: bad protocol version"},
		{name: "500 with a long body", status: 500, body: long, wantStatus: 500, wantMsg: "HTTP 500: " + long[:200]},
		{name: "redirect not followed", status: 307, body: "", wantStatus: 307, wantMsg: "HTTP 307"},
		{name: "unexpected content type", status: 200, contentType: "text/html", body: "<html>", wantStatus: 200, wantMsg: `unexpected content type "text/html"`},
		{name: "202 to a request", status: 202, wantStatus: 202, wantMsg: "without answering"},
		{name: "JSON with another id", status: 200, contentType: "application/json", body: `{"jsonrpc":"2.0","id":99,"result":{}}`, wantMsg: "not the response"},
		{name: "JSON not JSON-RPC", status: 200, contentType: "application/json", body: `{"hello":1}`, wantMsg: "invalid JSON-RPC message"},
		{name: "JSON error with null id", status: 200, contentType: "application/json", body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, wantMsg: "parse error"},
		{name: "SSE not JSON-RPC", status: 200, contentType: "text/event-stream", body: "data: [1,2]\n\n", wantMsg: "invalid JSON-RPC message"},
		{name: "SSE ends early", status: 200, contentType: "text/event-stream", body: "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n", wantMsg: "stream ended before the response"},
		{name: "notify 500", status: 500, body: "oops", wantStatus: 500, wantMsg: "HTTP 500: oops",
			op: func(c *Client, s session.Upstream) error {
				return c.Notify(context.Background(), s, "notifications/initialized", nil)
			}},
		{name: "terminate 405", status: 405,
			op: func(c *Client, s session.Upstream) error { return c.Terminate(context.Background(), s) }},
		{name: "terminate 500", status: 500, wantStatus: 500, wantMsg: "HTTP 500",
			op: func(c *Client, s session.Upstream) error { return c.Terminate(context.Background(), s) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := rawUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.status == 307 {
					w.Header().Set("Location", "http://example.invalid/")
				}
				if tc.contentType != "" {
					w.Header().Set("Content-Type", tc.contentType)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{})
			s := session.Upstream{SessionID: "sess-1", ProtocolVersion: "2025-11-25"}
			op := tc.op
			if op == nil {
				op = func(c *Client, s session.Upstream) error {
					r, err := c.Call(context.Background(), s, jsonrpc.IntID(1), "tools/list", nil)
					if err != nil {
						return err
					}
					_, err = readAll(t, r)
					return err
				}
			}
			err := op(c, s)
			if tc.wantMsg == "" && !tc.wantExpired {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %T %v, want *Error", err, err)
			}
			if got := errors.Is(err, ErrSessionExpired); got != tc.wantExpired {
				t.Errorf("errors.Is(%v, ErrSessionExpired) = %v", err, got)
			}
			if e.Status != tc.wantStatus {
				t.Errorf("Status %d, want %d", e.Status, tc.wantStatus)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
			if len(err.Error()) > 300 {
				t.Errorf("error message is %d bytes long", len(err.Error()))
			}
			if strings.Contains(err.Error(), srv.URL) || strings.Contains(err.Error(), srv.Listener.Addr().String()) {
				t.Errorf("error %q names the URL", err)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	// The go-sdk sends no headers before the first event: a silent tool
	// times out in Call, a tool that sent progress times out in Next.
	for _, tc := range []struct {
		name     string
		progress int
	}{{name: "in Call"}, {name: "in Next", progress: 1}} {
		t.Run(tc.name, func(t *testing.T) {
			u := newTestUpstream(t, mcp.StreamableHTTPOptions{})
			const timeout = 300 * time.Millisecond
			c := newTestClient(t, u.srv.URL, timeout, nil, Options{})
			// Initialize with a patient client: under -race on a loaded
			// machine, initialize alone can take longer than the timeout.
			s := initialize(t, newTestClient(t, u.srv.URL, 5*time.Second, nil, Options{}))

			start := time.Now()
			r, err := callTool(context.Background(), c, s, jsonrpc.IntID(5), "block", toolArgs{N: tc.progress})
			if err == nil {
				if tc.progress == 0 {
					t.Error("Call returned before the upstream answered")
				}
				var msgs []message
				msgs, err = readAll(t, r)
				if len(msgs) != tc.progress {
					t.Errorf("got %d messages before the timeout, want %d", len(msgs), tc.progress)
				}
			}
			elapsed := time.Since(start)
			var e *Error
			if !errors.As(err, &e) || err.Error() != "upstream up1: tools/call: timed out after 300ms" {
				t.Fatalf("got %v, want a timeout *Error", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", err)
			}
			if elapsed < timeout || elapsed > timeout+time.Second {
				t.Errorf("timed out after %v, want about %v", elapsed, timeout)
			}
			// The upstream is told to stop.
			waitFor(t, u.cancelled, 3*time.Second, "the tool's cancellation")
			c.Close()
			for _, req := range u.requests() {
				if strings.Contains(req.Body, "notifications/cancelled") && !strings.Contains(req.Body, `"reason":"gateway timed out after 300ms"`) {
					t.Errorf("cancellation %s", req.Body)
				}
			}
		})
	}
}

func TestInitializeTimeout(t *testing.T) {
	var cancels atomic.Int32
	release := make(chan struct{})
	defer close(release)
	srv := rawUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "notifications/cancelled") {
			cancels.Add(1)
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c := newTestClient(t, srv.URL, 200*time.Millisecond, nil, Options{})
	_, err := c.Initialize(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Fatalf("got %v, want a timeout", err)
	}
	c.Close()
	if n := cancels.Load(); n != 0 {
		t.Errorf("initialize was cancelled upstream %d times; it must not be", n)
	}
}

func TestCancellation(t *testing.T) {
	for _, tc := range []struct {
		name string
		// progress makes the tool send a notification before blocking, so
		// that Call returns.
		progress int
		// abandon ends the call after the tool started; r is nil when the
		// call is still in Call.
		abandon    func(cancel context.CancelFunc, r *Response) error
		wantReason string
	}{
		{name: "during Call", wantReason: "cancelled by the client", abandon: func(cancel context.CancelFunc, r *Response) error {
			cancel()
			return nil
		}},
		{name: "Next notices", progress: 1, wantReason: "cancelled by the client", abandon: func(cancel context.CancelFunc, r *Response) error {
			if msg, _, err := r.Next(); err != nil || msg.Method != "notifications/progress" {
				return fmt.Errorf("first message: %v, %v", msg, err)
			}
			done := make(chan error, 1)
			go func() {
				_, _, err := r.Next()
				done <- err
			}()
			if err := waitBlockedIn("upstream.(*Response).Next"); err != nil {
				return err
			}
			cancel()
			err := <-done
			r.Close()
			if !errors.Is(err, context.Canceled) {
				return fmt.Errorf("Next returned %v, want context.Canceled", err)
			}
			return nil
		}},
		{name: "Close first", progress: 1, wantReason: "cancelled by the client", abandon: func(cancel context.CancelFunc, r *Response) error {
			cancel()
			return r.Close()
		}},
		{name: "Close without cancelling", progress: 1, wantReason: "request abandoned by the gateway", abandon: func(cancel context.CancelFunc, r *Response) error {
			return r.Close()
		}},
		{name: "Close during Next", progress: 1, wantReason: "request abandoned by the gateway", abandon: func(cancel context.CancelFunc, r *Response) error {
			r.Next() // the progress
			done := make(chan error, 1)
			go func() {
				_, _, err := r.Next()
				done <- err
			}()
			if err := waitBlockedIn("upstream.(*Response).Next"); err != nil {
				return err
			}
			r.Close()
			if err := <-done; !strings.Contains(fmt.Sprint(err), "response closed") {
				return fmt.Errorf("Next returned %v, want response closed", err)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newTestUpstream(t, mcp.StreamableHTTPOptions{})
			c := newTestClient(t, u.srv.URL, 5*time.Second, nil, Options{})
			s := initialize(t, c)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				r   *Response
				err error
			}
			called := make(chan result, 1)
			go func() {
				r, err := callTool(ctx, c, s, jsonrpc.StringID("c-1"), "block", toolArgs{N: tc.progress})
				called <- result{r, err}
			}()
			waitFor(t, u.started, 3*time.Second, "the tool to start")
			var r *Response
			if tc.progress > 0 {
				res := waitFor(t, called, 3*time.Second, "Call")
				if res.err != nil {
					t.Fatal(res.err)
				}
				r = res.r
			}
			start := time.Now()
			if err := tc.abandon(cancel, r); err != nil {
				t.Error(err)
			}
			if tc.progress == 0 {
				res := waitFor(t, called, 3*time.Second, "Call")
				if !errors.Is(res.err, context.Canceled) {
					t.Errorf("Call returned %v, want context.Canceled", res.err)
				}
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("abandoning took %v", d)
			}
			waitFor(t, u.cancelled, 3*time.Second, "the tool's cancellation")
			c.Close()
			var sent []string
			for _, req := range u.requests() {
				if strings.Contains(req.Body, "notifications/cancelled") {
					sent = append(sent, req.Body)
					if req.Header.Get("Mcp-Session-Id") != s.SessionID {
						t.Errorf("cancellation sent on session %q", req.Header.Get("Mcp-Session-Id"))
					}
				}
			}
			want := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-1","reason":"` + tc.wantReason + `"}}`
			if diff := cmp.Diff([]string{want}, sent); diff != "" {
				t.Errorf("cancellations mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNoCancelAfterResponse checks that a completed request is not cancelled
// even when the caller's context ends right after.
func TestNoCancelAfterResponse(t *testing.T) {
	u := newTestUpstream(t, mcp.StreamableHTTPOptions{})
	c := newTestClient(t, u.srv.URL, 5*time.Second, nil, Options{})
	s := initialize(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	r, err := callTool(ctx, c, s, jsonrpc.IntID(1), "echo", toolArgs{Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if msg, _, err := r.Next(); err != nil || msg.Kind != jsonrpc.KindResponse {
		t.Fatalf("Next: %v %v", msg, err)
	}
	cancel()
	r.Close()
	c.Close()
	for _, req := range u.requests() {
		if strings.Contains(req.Body, "notifications/cancelled") {
			t.Errorf("sent %s", req.Body)
		}
	}
}

func TestUpstreamDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	url := "http://" + addr + "/mcp?key=topsecret"
	c := newTestClient(t, url, 2*time.Second, nil, Options{})
	_, err = c.Initialize(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Upstream != "up1" {
		t.Fatalf("got %#v, want an *Error for up1", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "upstream up1: initialize: ") {
		t.Errorf("message %q does not name the upstream", msg)
	}
	for _, leak := range []string{url, addr, "topsecret", "127.0.0.1"} {
		if strings.Contains(msg, leak) {
			t.Errorf("message %q contains %q", msg, leak)
		}
	}
	if _, err := c.Call(context.Background(), session.Upstream{SessionID: "x"}, jsonrpc.IntID(1), "tools/list", nil); err == nil || strings.Contains(err.Error(), addr) {
		t.Errorf("Call: %v", err)
	}
}

func TestOversized(t *testing.T) {
	for _, tc := range []struct {
		name string
		json bool
	}{{name: "sse"}, {name: "json", json: true}} {
		t.Run(tc.name, func(t *testing.T) {
			u := newTestUpstream(t, mcp.StreamableHTTPOptions{JSONResponse: tc.json})
			c := newTestClient(t, u.srv.URL, 5*time.Second, nil, Options{MaxMessageBytes: 4096})
			s := initialize(t, c)
			// Just under the bound is fine.
			r, err := callTool(context.Background(), c, s, jsonrpc.IntID(1), "big", toolArgs{N: 3000})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := readAll(t, r); err != nil {
				t.Fatal(err)
			}
			r, err = callTool(context.Background(), c, s, jsonrpc.IntID(2), "big", toolArgs{N: 100_000})
			if err != nil {
				t.Fatal(err)
			}
			_, err = readAll(t, r)
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), "4096") {
				t.Fatalf("got %v, want a size *Error", err)
			}
		})
	}
}

// TestEndlessEvent checks that an upstream streaming one endless line is cut
// off at the bound.
func TestEndlessEvent(t *testing.T) {
	srv := rawUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		writeSSE(w, "data: ")
		chunk := strings.Repeat("x", 64<<10)
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{MaxMessageBytes: 1 << 20})
	r, err := c.Call(context.Background(), session.Upstream{}, jsonrpc.IntID(1), "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(t, r)
	if !errors.Is(err, errEventTooLarge) {
		t.Fatalf("got %v, want errEventTooLarge", err)
	}
}

// TestUnrelatedMessages checks that responses to other ids are dropped and
// server-to-client requests are passed on, on a hand-written upstream.
func TestUnrelatedMessages(t *testing.T) {
	srv := rawUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		writeSSE(w,
			": keep-alive\n\n",
			"event: prime\nid: p\ndata:\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"id\":\"other\",\"result\":{}}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"sampling/createMessage\",\"params\":{}}\r\n\r\n",
			"event: custom\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\n",
			"data:  \"id\":1,\"result\":{\"ok\":true}}\n\n",
		)
	})
	c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{})
	r, err := c.Call(context.Background(), session.Upstream{}, jsonrpc.IntID(1), "tools/call", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := readAll(t, r)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.raw)
	}
	want := []string{
		`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`,
		"{\"jsonrpc\":\"2.0\",\n \"id\":1,\"result\":{\"ok\":true}}",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
}

// resumableUpstream is a hand-written upstream whose POST stream sends one
// event with an id and then drops the connection; a GET with Last-Event-ID
// gets the rest.
type resumableUpstream struct {
	mu   sync.Mutex
	gets []http.Header
	// getStatus, if not 0, is the status of every GET.
	getStatus int
	// closeWithoutID sends the first event without an id.
	closeWithoutID bool
	postAt, getAt  time.Time
}

func (u *resumableUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "notifications/") {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		id := "id: 1\nretry: 50\n"
		if u.closeWithoutID {
			id = ""
		}
		writeSSE(w, "id: 0\ndata:\n\n",
			id+`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`+"\n\n")
		u.postAt = time.Now()
		// Returning ends the response: the stream is cut before the
		// response.
	case http.MethodGet:
		u.gets = append(u.gets, r.Header.Clone())
		u.getAt = time.Now()
		if u.getStatus != 0 {
			w.WriteHeader(u.getStatus)
			return
		}
		if r.Header.Get("Last-Event-Id") != "1" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		writeSSE(w, "id: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"resumed\"}]}}\n\n")
	}
}

func TestResumption(t *testing.T) {
	u := &resumableUpstream{}
	srv := rawUpstream(t, u.ServeHTTP)
	c := newTestClient(t, srv.URL, 5*time.Second, map[string]string{"X-Key": "k"}, Options{})
	s := session.Upstream{SessionID: "sess-9", ProtocolVersion: "2025-11-25"}
	r, err := callTool(context.Background(), c, s, jsonrpc.IntID(3), "slow", toolArgs{})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := readAll(t, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].msg.Method != "notifications/progress" || resultText(t, msgs[1].msg) != "resumed" {
		t.Fatalf("got %+v", msgs)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.gets) != 1 {
		t.Fatalf("%d GETs, want 1", len(u.gets))
	}
	h := u.gets[0]
	want := map[string]string{
		"Accept": "text/event-stream", "Mcp-Session-Id": "sess-9", "Mcp-Protocol-Version": "2025-11-25",
		"Last-Event-Id": "1", "X-Key": "k",
	}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("GET header %s = %q, want %q", k, h.Get(k), v)
		}
	}
	if d := u.getAt.Sub(u.postAt); d < 50*time.Millisecond {
		t.Errorf("reconnected after %v, want at least the 50ms retry", d)
	}
}

func TestResumptionFails(t *testing.T) {
	for _, tc := range []struct {
		name     string
		u        *resumableUpstream
		wantGets int
		wantMsg  string
	}{
		{name: "no event id", u: &resumableUpstream{closeWithoutID: true}, wantGets: 1 /* the priming event has an id */, wantMsg: "stream ended before the response"},
		{name: "GET not allowed", u: &resumableUpstream{getStatus: 405}, wantGets: 1, wantMsg: "HTTP 405"},
		{name: "GET keeps failing", u: &resumableUpstream{getStatus: 503}, wantGets: maxReconnects, wantMsg: "HTTP 503"},
		{name: "session gone", u: &resumableUpstream{getStatus: 404}, wantGets: 1, wantMsg: "session expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := rawUpstream(t, tc.u.ServeHTTP)
			c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{})
			s := session.Upstream{SessionID: "sess-9", ProtocolVersion: "2025-11-25"}
			r, err := callTool(context.Background(), c, s, jsonrpc.IntID(3), "slow", toolArgs{})
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := readAll(t, r)
			if len(msgs) != 1 {
				t.Errorf("got %d messages before the error, want the progress", len(msgs))
			}
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("got %v, want an *Error containing %q", err, tc.wantMsg)
			}
			tc.u.mu.Lock()
			defer tc.u.mu.Unlock()
			if len(tc.u.gets) != tc.wantGets {
				t.Errorf("%d GETs, want %d", len(tc.u.gets), tc.wantGets)
			}
		})
	}
}

func TestStreamWithoutIDNotResumed(t *testing.T) {
	var gets atomic.Int32
	srv := rawUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		writeSSE(w, `data: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}`+"\n\n")
	})
	c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{})
	r, err := c.Call(context.Background(), session.Upstream{SessionID: "s"}, jsonrpc.IntID(1), "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(t, r)
	if err == nil || err.Error() != "upstream up1: tools/list: stream ended before the response" {
		t.Errorf("got %v", err)
	}
	if gets.Load() != 0 {
		t.Errorf("sent %d GETs for a stream without ids", gets.Load())
	}
}

// TestConfigCannotSetProtocolHeaders checks that the protocol's headers win
// over the config's.
func TestConfigCannotSetProtocolHeaders(t *testing.T) {
	var got http.Header
	srv := rawUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusAccepted)
	})
	c := newTestClient(t, srv.URL, 5*time.Second, map[string]string{
		"content-type": "text/plain", "Accept": "*/*", "Mcp-Session-Id": "forged", "MCP-Protocol-Version": "1999-01-01",
		"User-Agent": "gw/1",
	}, Options{})
	if err := c.Notify(context.Background(), session.Upstream{}, "notifications/x", nil); err != nil {
		t.Fatal(err)
	}
	want := http.Header{
		"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Content-Length": {"44"}, "User-Agent": {"gw/1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers mismatch (-want +got):\n%s", diff)
	}
}

func TestCallCancelledBeforeSending(t *testing.T) {
	var n atomic.Int32
	srv := rawUpstream(t, func(w http.ResponseWriter, r *http.Request) { n.Add(1) })
	c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Call(ctx, session.Upstream{SessionID: "s"}, jsonrpc.IntID(1), "tools/list", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	if _, err := c.Call(context.Background(), session.Upstream{}, jsonrpc.ID{}, "tools/list", nil); err == nil {
		t.Error("Call without an id succeeded")
	}
	c.Close()
	if n.Load() != 0 {
		t.Errorf("%d requests sent", n.Load())
	}
}

func TestInvalidURL(t *testing.T) {
	c := newTestClient(t, "ftp://user:pw@host/x", time.Second, nil, Options{})
	_, err := c.Initialize(context.Background())
	if err == nil || strings.Contains(err.Error(), "pw") || !strings.Contains(err.Error(), "invalid upstream URL") {
		t.Errorf("got %v", err)
	}
}
