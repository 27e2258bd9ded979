package testkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeGatewayEnv makes the test binary act as a gateway for TestStartGateway.
const fakeGatewayEnv = "TESTKIT_FAKE_GATEWAY"

func TestMain(m *testing.M) {
	if os.Getenv(fakeGatewayEnv) == "1" {
		fakeGateway()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeGateway listens like the gateway does, logs its address, and exits 0 on
// SIGTERM.
func fakeGateway() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "fake")
	})}
	go srv.Serve(l)
	fmt.Println("starting")
	// Like the gateway's slog text lines; the admin one comes first.
	fmt.Fprintf(os.Stderr, "time=2026-01-01T00:00:00Z level=INFO msg=\"admin listening on http://127.0.0.1:1\"\n")
	fmt.Fprintf(os.Stderr, "time=2026-01-01T00:00:00Z level=INFO msg=\"listening on http://%s/mcp\" upstreams=1\n", l.Addr())
	<-ctx.Done()
	srv.Close()
	fmt.Println("stopped")
}

const waitTimeout = 5 * time.Second

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("got %d content blocks, want 1: %+v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want *mcp.TextContent", res.Content[0])
	}
	return tc.Text
}

// asJSONMap round-trips v through JSON, to compare it as the wire has it.
func asJSONMap(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return m
}

func call(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatalf("CallTool %s: %v", params.Name, err)
	}
	return res
}

// progressRecorder collects progress messages, for ConnectOptions.ProgressHandler.
type progressRecorder struct {
	mu   sync.Mutex
	msgs []string
	ch   chan string
}

func newProgressRecorder() *progressRecorder { return &progressRecorder{ch: make(chan string, 100)} }

func (r *progressRecorder) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	r.mu.Lock()
	r.msgs = append(r.msgs, fmt.Sprintf("%s %v/%v", req.Params.Message, req.Params.Progress, req.Params.Total))
	r.mu.Unlock()
	r.ch <- req.Params.Message
}

// waitFor waits until every message in msgs has arrived on ch, in any
// order, dropping the others.
func waitFor(t *testing.T, ch <-chan string, msgs ...string) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for len(msgs) > 0 {
		select {
		case got := <-ch:
			msgs = slices.DeleteFunc(msgs, func(m string) bool { return m == got })
		case <-timeout:
			t.Fatalf("timed out waiting for %q", msgs)
		}
	}
}

func TestUpstreamTools(t *testing.T) {
	ctx := t.Context()
	u := NewUpstream(t, "up1")
	progress := newProgressRecorder()
	logs := make(chan string, 100)
	cs := Connect(t, u.URL, &ConnectOptions{
		Header:          http.Header{"X-Test": {"yes"}},
		ProgressHandler: progress.handle,
		LoggingHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			logs <- fmt.Sprint(req.Params.Logger, " ", req.Params.Data)
		},
	})

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if diff := cmp.Diff(UpstreamTools, names); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}

	t.Run("echo", func(t *testing.T) {
		res := call(t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if got := textOf(t, res); got != "up1:hi" {
			t.Errorf("text = %q, want %q", got, "up1:hi")
		}
		if diff := cmp.Diff(map[string]any{"text": "hi", "upstream": "up1"}, asJSONMap(t, res.StructuredContent)); diff != "" {
			t.Errorf("structuredContent mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]any{"testkit/upstream": "up1"}, map[string]any(res.Meta)); diff != "" {
			t.Errorf("_meta mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("headers", func(t *testing.T) {
		res := call(t, cs, &mcp.CallToolParams{Name: "headers"})
		var h http.Header
		if err := json.Unmarshal([]byte(textOf(t, res)), &h); err != nil {
			t.Fatal(err)
		}
		if got := h.Get("X-Test"); got != "yes" {
			t.Errorf("X-Test = %q, want yes", got)
		}
		if h.Get("Mcp-Session-Id") != cs.ID() {
			t.Errorf("Mcp-Session-Id = %q, want %q", h.Get("Mcp-Session-Id"), cs.ID())
		}
	})

	t.Run("meta", func(t *testing.T) {
		res := call(t, cs, &mcp.CallToolParams{Name: "meta", Meta: mcp.Meta{"k": "v", "n": 1}})
		want := map[string]any{"meta": map[string]any{"k": "v", "n": 1.0}}
		if diff := cmp.Diff(want, asJSONMap(t, res.StructuredContent)); diff != "" {
			t.Errorf("structuredContent mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("fail", func(t *testing.T) {
		res := call(t, cs, &mcp.CallToolParams{Name: "fail"})
		if !res.IsError || textOf(t, res) != "fail from up1" {
			t.Errorf("got %+v, want an error result \"fail from up1\"", res)
		}
	})

	t.Run("progress", func(t *testing.T) {
		//lint:ignore SA1019 logging is deprecated only from 2026-07-28; the 2025-11-25 sessions the gateway serves still use it
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
		params := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 3}}
		params.SetProgressToken("p1")
		if got := textOf(t, call(t, cs, params)); got != "done" {
			t.Errorf("text = %q, want done", got)
		}
		// The SDK may run the handlers after CallTool returns.
		waitFor(t, progress.ch, "step 3")
		progress.mu.Lock()
		got := slices.Clone(progress.msgs)
		progress.mu.Unlock()
		if diff := cmp.Diff([]string{"step 1 1/3", "step 2 2/3", "step 3 3/3"}, got); diff != "" {
			t.Errorf("progress mismatch (-want +got):\n%s", diff)
		}
		waitFor(t, logs, "up1 step 3")
	})

	t.Run("resources", func(t *testing.T) {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://up1/readme"})
		if err != nil {
			t.Fatal(err)
		}
		if c := res.Contents; len(c) != 1 || c[0].Text != "readme of up1" || c[0].MIMEType != "text/plain" {
			t.Errorf("readme = %+v", c)
		}
		res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://up1/items/42"})
		if err != nil {
			t.Fatal(err)
		}
		if c := res.Contents; len(c) != 1 || c[0].Text != "item 42 of up1" {
			t.Errorf("item = %+v", c)
		}
		templates, err := cs.ListResourceTemplates(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rt := templates.ResourceTemplates; len(rt) != 1 || rt[0].URITemplate != "test://up1/items/{id}" {
			t.Errorf("templates = %+v", rt)
		}
	})

	t.Run("prompt", func(t *testing.T) {
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "ann"}})
		if err != nil {
			t.Fatal(err)
		}
		if m := res.Messages; len(m) != 1 || m[0].Role != "user" || m[0].Content.(*mcp.TextContent).Text != "hello ann from up1" {
			t.Errorf("messages = %+v", m)
		}
	})

	t.Run("completion", func(t *testing.T) {
		res, err := cs.Complete(ctx, &mcp.CompleteParams{
			Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
			Argument: mcp.CompleteParamsArgument{Name: "who", Value: "a"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"alpha", "beta"}, res.Completion.Values); diff != "" {
			t.Errorf("completion mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestUpstreamGate(t *testing.T) {
	u := NewUpstream(t, "up")
	progress := newProgressRecorder()
	cs := Connect(t, u.URL, &ConnectOptions{ProgressHandler: progress.handle})

	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	params := &mcp.CallToolParams{Name: "gate"}
	params.SetProgressToken("g")
	go func() {
		res, err := cs.CallTool(t.Context(), params)
		done <- result{res, err}
	}()
	waitFor(t, progress.ch, "waiting")
	select {
	case r := <-done:
		t.Fatalf("gate returned before Release: %+v, %v", r.res, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	u.Release()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := textOf(t, r.res); got != "released" {
			t.Errorf("text = %q, want released", got)
		}
	case <-time.After(waitTimeout):
		t.Fatal("gate not released")
	}
}

func TestUpstreamBlockCancel(t *testing.T) {
	u := NewUpstream(t, "up")
	progress := newProgressRecorder()
	cs := Connect(t, u.URL, &ConnectOptions{ProgressHandler: progress.handle})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	params := &mcp.CallToolParams{Name: "block"}
	params.SetProgressToken("b")
	go func() {
		_, err := cs.CallTool(ctx, params)
		done <- err
	}()
	waitFor(t, progress.ch, "blocked")
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("CallTool error = %v, want context.Canceled", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("CallTool did not return after cancel")
	}
	select {
	case name := <-u.Cancelled():
		if name != "block" {
			t.Errorf("Cancelled() = %q, want block", name)
		}
	case <-time.After(waitTimeout):
		t.Fatal("upstream handler was not cancelled")
	}
	// The session still works.
	if got := textOf(t, call(t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})); got != "up:x" {
		t.Errorf("echo = %q", got)
	}
}

func TestUpstreamRestart(t *testing.T) {
	u := NewUpstream(t, "up")
	cs := Connect(t, u.URL, nil)
	echo := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}
	call(t, cs, echo)

	u.Restart()
	if _, err := cs.CallTool(t.Context(), echo); err == nil {
		t.Fatal("CallTool on a session from before Restart: got nil error")
	}
	// The SDK answers 404 for the forgotten session id.
	req, _ := http.NewRequest(http.MethodPost, u.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status for old session = %d, want 404", resp.StatusCode)
	}
	// A new session works.
	cs2 := Connect(t, u.URL, nil)
	call(t, cs2, echo)
}

func TestUpstreamClose(t *testing.T) {
	u := NewUpstream(t, "up")
	cs := Connect(t, u.URL, nil)
	u.Close()
	_, err := http.Post(u.URL, "application/json", strings.NewReader("{}"))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("POST after Close: err = %v, want connection refused", err)
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo"}); err == nil {
		t.Error("CallTool after Close: got nil error")
	}
	u.Close() // idempotent
}

// TestUpstreamStopWithCallsInFlight checks that Restart and Close end blocked
// calls instead of waiting for them.
func TestUpstreamStopWithCallsInFlight(t *testing.T) {
	for _, stop := range []string{"Restart", "Close"} {
		t.Run(stop, func(t *testing.T) {
			u := NewUpstream(t, "up")
			progress := newProgressRecorder()
			cs := Connect(t, u.URL, &ConnectOptions{ProgressHandler: progress.handle})
			done := make(chan error, 2)
			for _, tool := range []string{"gate", "block"} {
				params := &mcp.CallToolParams{Name: tool}
				params.SetProgressToken(tool)
				go func() {
					_, err := cs.CallTool(t.Context(), params)
					done <- err
				}()
			}
			waitFor(t, progress.ch, "waiting", "blocked")
			stopped := make(chan struct{})
			go func() {
				if stop == "Restart" {
					u.Restart()
				} else {
					u.Close()
				}
				close(stopped)
			}()
			select {
			case <-stopped:
			case <-time.After(waitTimeout):
				t.Fatalf("%s hangs with calls in flight", stop)
			}
			for range 2 {
				select {
				case err := <-done:
					if err == nil {
						t.Errorf("in-flight call: got nil error")
					}
				case <-time.After(waitTimeout):
					t.Fatalf("in-flight call did not end after %s", stop)
				}
			}
		})
	}
}

func TestUpstreamOptions(t *testing.T) {
	u := NewUpstreamWith(t, "small", UpstreamOptions{Tools: []string{"echo"}, ExtraTools: 3})
	cs := Connect(t, u.URL, nil)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"echo", "t000", "t001", "t002"}, names); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}
	if got := textOf(t, call(t, cs, &mcp.CallToolParams{Name: "t001"})); got != "t001" {
		t.Errorf("t001 = %q", got)
	}

	var rpcMethods []string
	for _, r := range u.Requests() {
		if r.Method == http.MethodPost {
			rpcMethods = append(rpcMethods, r.RPCMethod)
		}
	}
	if diff := cmp.Diff([]string{"initialize", "notifications/initialized", "tools/list", "tools/call"}, rpcMethods); diff != "" {
		t.Errorf("recorded POSTs mismatch (-want +got):\n%s", diff)
	}
}

// postInitialize sends an initialize request and returns the response.
func postInitialize(t *testing.T, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestUpstreamJSONResponse(t *testing.T) {
	u := NewUpstreamWith(t, "j", UpstreamOptions{JSONResponse: true})
	if ct := postInitialize(t, u.URL).Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	u.SetJSONResponse(false)
	if ct := postInitialize(t, u.URL).Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("after SetJSONResponse(false): Content-Type = %q, want text/event-stream", ct)
	}
	cs := Connect(t, u.URL, nil)
	call(t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
}

func TestRawUpstream(t *testing.T) {
	u := NewRawUpstream(t)
	post := func(body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, u.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Probe", body[:10])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, data
	}

	resp := postInitialize(t, u.URL)
	if got := resp.Header.Get("Mcp-Session-Id"); got != RawSessionID {
		t.Errorf("Mcp-Session-Id = %q, want %q", got, RawSessionID)
	}
	var init struct {
		Result struct {
			ProtocolVersion string         `json:"protocolVersion"`
			Capabilities    map[string]any `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&init); err != nil {
		t.Fatal(err)
	}
	if init.Result.ProtocolVersion != "2025-06-18" {
		t.Errorf("protocolVersion = %q, want the client's 2025-06-18", init.Result.ProtocolVersion)
	}
	if diff := cmp.Diff(map[string]any{"tools": map[string]any{}, "resources": map[string]any{}, "prompts": map[string]any{}}, init.Result.Capabilities); diff != "" {
		t.Errorf("capabilities mismatch (-want +got):\n%s", diff)
	}

	if resp, _ := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("notification: status %d, want 202", resp.StatusCode)
	}

	_, data := post(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
	if want := `{"jsonrpc":"2.0","id":"l","result":{"tools":[` + RawToolJSON + `]}}`; string(data) != want {
		t.Errorf("tools/list = %s, want %s", data, want)
	}

	params := `{ "name":"raw", "arguments":{"q":"z"},"_meta":{"progressToken":7, "x":[1,2]} }`
	callBody := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":` + params + `}`
	resp, data = post(callBody)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var res struct {
		ID     int `json:"id"`
		Result struct {
			Content []map[string]any `json:"content"`
			Unknown json.RawMessage  `json:"x-unknown-result-field"`
			Meta    json.RawMessage  `json:"_meta"`
			Echo    json.RawMessage  `json:"echo"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if res.ID != 9 {
		t.Errorf("id = %d, want 9", res.ID)
	}
	if string(res.Result.Echo) != params {
		t.Errorf("echo = %s, want the params byte for byte: %s", res.Result.Echo, params)
	}
	if string(res.Result.Unknown) != `{"nested":[1,"two",null]}` || string(res.Result.Meta) != `{"vendor/x":1}` {
		t.Errorf("unknown fields: %s", data)
	}
	if len(res.Result.Content) != 1 || res.Result.Content[0]["x-block-extra"] != true {
		t.Errorf("content = %v", res.Result.Content)
	}
	if got := string(u.LastBody("tools/call")); got != callBody {
		t.Errorf("LastBody(tools/call) = %s, want %s", got, callBody)
	}
	if got := u.LastHeader("tools/call").Get("X-Probe"); got != callBody[:10] {
		t.Errorf("LastHeader(tools/call) X-Probe = %q", got)
	}
	if u.LastBody("resources/read") != nil {
		t.Error("LastBody of a method never sent is not nil")
	}

	// The SDK client accepts it too.
	cs := Connect(t, u.URL, nil)
	out, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "raw", Arguments: map[string]any{"q": "z"}})
	if err != nil {
		t.Fatal(err)
	}
	if textOf(t, out) != "ok" {
		t.Errorf("raw call via SDK = %+v", out)
	}
}

func TestStartGateway(t *testing.T) {
	// GORACE: a race-enabled binary otherwise sleeps 1s on exit.
	p := StartGateway(t, os.Args[0], nil, []string{fakeGatewayEnv + "=1", "GORACE=atexit_sleep_ms=0"})
	resp, err := http.Get(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "fake" {
		t.Errorf("GET %s = %q", p.URL, body)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v\n%s", err, p.Output())
	}
	if got := p.Stdout(); got != "starting\nstopped\n" {
		t.Errorf("stdout = %q", got)
	}
	if p.Endpoint != p.URL+"/mcp" || p.AdminAddr != "127.0.0.1:1" {
		t.Errorf("Endpoint = %q, AdminAddr = %q; want %q, 127.0.0.1:1", p.Endpoint, p.AdminAddr, p.URL+"/mcp")
	}
	if !strings.Contains(p.Stderr(), "listening on http://"+p.Addr) {
		t.Errorf("stderr = %q", p.Stderr())
	}
}

func TestFreePortAndWriteFile(t *testing.T) {
	if port := FreePort(t); port <= 0 {
		t.Errorf("FreePort = %d", port)
	}
	a := WriteFile(t, "a.yaml", "a: 1\n")
	b := WriteFile(t, "sub/b.txt", "b")
	if filepath.Dir(a) != filepath.Dir(filepath.Dir(b)) {
		t.Errorf("files in different directories: %s, %s", a, b)
	}
	if data, err := os.ReadFile(b); err != nil || string(data) != "b" {
		t.Errorf("ReadFile(%s) = %q, %v", b, data, err)
	}
}
