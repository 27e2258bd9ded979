package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/bench/echoserver"
)

// testConfig returns a short run against url.
func testConfig(url string) *config {
	return &config{
		URL: url, Clients: 4, Duration: time.Second, Warmup: 100 * time.Millisecond, Timeout: 5 * time.Second,
		Mode: modeCall, ListRatio: 0.1, Tool: "echo", Payload: 100, Protocol: "2025-11-25",
		Header: http.Header{"X-Test": {"yes"}}, CheckEcho: true,
	}
}

func runTest(t *testing.T, cfg *config) *report {
	t.Helper()
	tr := newTransport(cfg.Clients, false)
	t.Cleanup(tr.CloseIdleConnections)
	rep, err := runLoad(t.Context(), cfg, newHTTPClient(tr, cfg.Timeout))
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := rep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	return rep
}

// TestLoadEchoServer runs the load loop in-process against the benchmark
// upstream: every request must pass its checks.
func TestLoadEchoServer(t *testing.T) {
	t.Run("sse call", func(t *testing.T) {
		ts := httptest.NewServer(echoserver.NewHandler(echoserver.Options{}))
		defer ts.Close()
		rep := runTest(t, testConfig(ts.URL+echoserver.Path))
		if rep.Errors != 0 || rep.Sessions != 4 || rep.OK == 0 || rep.OK != rep.Requests || rep.RPS <= 0 || rep.Calls != rep.Requests {
			t.Errorf("report: %+v", rep)
		}
		if l := rep.Latency; l.P50 <= 0 || l.P50 > l.P90 || l.P90 > l.P99 || l.P99 > l.Max {
			t.Errorf("latency: %+v", l)
		}
		if rep.DurationS < 0.9 || rep.DurationS > 1.01 {
			t.Errorf("measured %vs, want 1s", rep.DurationS)
		}
	})
	t.Run("json mix 10KB", func(t *testing.T) {
		ts := httptest.NewServer(echoserver.NewHandler(echoserver.Options{JSONResponse: true, ExtraTools: 20}))
		defer ts.Close()
		cfg := testConfig(ts.URL + echoserver.Path)
		cfg.Mode, cfg.ListRatio, cfg.ExpectTools, cfg.Payload, cfg.Duration = modeMix, 0.25, 21, 10<<10, 500*time.Millisecond
		rep := runTest(t, cfg)
		if rep.Errors != 0 || rep.OK == 0 || rep.Calls == 0 {
			t.Errorf("report: %+v", rep)
		}
		// A client's every fourth request is a list: on a loaded machine
		// half a second may hold fewer.
		if rep.Requests >= 4*int64(rep.Clients)+int64(rep.Clients) && (rep.Lists == 0 || rep.ToolsListed != 21) {
			t.Errorf("report: %+v", rep)
		}
	})
}

// TestLoadCountsFailures runs against a server that answers initialize
// properly and every call wrongly, one way per request.
func TestLoadCountsFailures(t *testing.T) {
	var calls int
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &req)
		switch req.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"protocolVersion":"2025-06-18"}}`)
			return
		case "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if got := r.Header.Get("Mcp-Protocol-Version"); got != "2025-06-18" {
			http.Error(w, "protocol version "+got, http.StatusBadRequest)
			return
		}
		calls++
		switch calls % 4 {
		case 0:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"content":[{"type":"text","text":"not what was sent"}]}}`)
		case 1:
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+string(req.ID)+",\"result\":{}") // cut short
		case 2:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{}}`)
		case 3:
			http.Error(w, "nope", http.StatusBadGateway)
		}
	}))
	defer ts.Close()
	cfg := testConfig(ts.URL)
	cfg.Clients, cfg.Duration, cfg.Warmup = 1, 200*time.Millisecond, 0
	rep := runTest(t, cfg)
	if rep.OK != 0 || rep.RPS != 0 || rep.Errors != rep.Requests || rep.Requests < 4 {
		t.Errorf("report: %+v", rep)
	}
	for _, kind := range []string{errEcho, errNoResponse, errID, errStatus} {
		if rep.ErrorKinds[kind] == 0 {
			t.Errorf("no %s errors: %v", kind, rep.ErrorKinds)
		}
	}
	if !strings.Contains(rep.ErrorSamples[errStatus], "502") {
		t.Errorf("status sample: %q", rep.ErrorSamples[errStatus])
	}
}

func TestLoadNoSession(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	defer ts.Close()
	cfg := testConfig(ts.URL)
	tr := newTransport(cfg.Clients, false)
	defer tr.CloseIdleConnections()
	_, err := runLoad(t.Context(), cfg, newHTTPClient(tr, cfg.Timeout))
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("runLoad against a 404 server: %v, want an error naming the status", err)
	}
}

func TestParseFlags(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(*testing.T, *config)
	}{
		{name: "defaults", check: func(t *testing.T, c *config) {
			if c.URL != "http://127.0.0.1:8080/mcp" || c.Clients != 1 || c.Mode != modeCall || c.Tool != "echo" || !c.CheckEcho || c.Payload != 100 || c.Protocol != "2025-11-25" {
				t.Errorf("config: %+v", c)
			}
		}},
		{name: "gateway echo", args: []string{"-tool", "up__echo", "-c", "32", "-H", "X-A: 1", "-H", "X-A: 2", "-token", "tok"}, check: func(t *testing.T, c *config) {
			if !c.CheckEcho || c.Clients != 32 || len(c.Header["X-A"]) != 2 || c.Header.Get("Authorization") != "Bearer tok" {
				t.Errorf("config: %+v", c)
			}
		}},
		{name: "token from env", env: map[string]string{"MCPLOAD_TOKEN": "envtok"}, check: func(t *testing.T, c *config) {
			if c.Header.Get("Authorization") != "Bearer envtok" {
				t.Errorf("header: %v", c.Header)
			}
		}},
		{name: "other tool, no echo check", args: []string{"-tool", "up__add"}, check: func(t *testing.T, c *config) {
			if c.CheckEcho {
				t.Error("echo check on for up__add")
			}
		}},
		{name: "localhost", args: []string{"-url", "http://localhost:1/mcp"}},
		{name: "ipv6 loopback", args: []string{"-url", "http://[::1]:1/mcp"}},
		{name: "remote refused", args: []string{"-url", "http://192.0.2.1/mcp"}, wantErr: "-allow-remote"},
		{name: "remote name refused", args: []string{"-url", "https://example.com/mcp"}, wantErr: "-allow-remote"},
		{name: "remote allowed", args: []string{"-url", "https://example.com/mcp", "-allow-remote"}},
		{name: "bad header", args: []string{"-H", "nocolon"}, wantErr: "Name: value"},
		{name: "token twice", args: []string{"-H", "Authorization: Bearer a", "-token", "b"}, wantErr: "both"},
		{name: "bad mode", args: []string{"-mode", "stream"}, wantErr: "-mode"},
		{name: "every problem at once", args: []string{"-c", "0", "-d", "0s", "-payload", "-1"}, wantErr: "-payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := parseFlags(tt.args, env(tt.env), io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, cfg)
			}
		})
	}
}

// TestDialerRefusesRemote checks the dialer's own guard, which catches a
// name that resolves to a remote address. It fails before connecting.
func TestDialerRefusesRemote(t *testing.T) {
	tr := newTransport(1, false)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := tr.DialContext(ctx, "tcp", "192.0.2.1:80")
	if !errors.Is(err, errNotLoopback) {
		t.Errorf("dial 192.0.2.1: %v, want errNotLoopback", err)
	}
}

func TestRunJSON(t *testing.T) {
	ts := httptest.NewServer(echoserver.NewHandler(echoserver.Options{JSONResponse: true}))
	defer ts.Close()
	var out bytes.Buffer
	err := run(t.Context(), []string{"-url", ts.URL + echoserver.Path, "-c", "2", "-d", "200ms", "-warmup", "0s", "-json", "-tag", "target=direct"},
		func(string) string { return "" }, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(out.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("output is not one line: %q", out.String())
	}
	var rep map[string]any
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep["errors"] != 0.0 || rep["rps"].(float64) <= 0 || rep["tags"].(map[string]any)["target"] != "direct" {
		t.Errorf("report: %s", out.String())
	}
}
