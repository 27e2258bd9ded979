package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/backend"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/dispatch"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/tenant"
)

// cappedStore refuses every Create with err, as a store at a cap does.
type cappedStore struct {
	*session.Memory
	err error
}

func (s cappedStore) Create(context.Context, *session.Record) error { return s.err }

// limitHandler is an endpoint with one upstream that counts what it is sent,
// behind the anonymous principal.
func limitHandler(t *testing.T, store session.Store) (http.Handler, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(up.Close)
	cfg := &config.Config{Auth: config.Auth{Anonymous: true}, Upstreams: []config.Upstream{{Name: "alpha", URL: up.URL + "/mcp", Watch: new(bool)}}}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := telemetry.NewMetrics(prometheus.NewRegistry())
	b, err := backend.New(cfg, backend.Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	b.Sessions = store
	srv, err := dispatch.New(dispatch.Options{Config: cfg, Backend: b, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return auth.Anonymous(tenant.DefaultID)(New(srv, Options{Metrics: m})), &hits
}

func postTo(h http.Handler, body string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestSessionCapsAnswer429: a store's per-principal or per-tenant refusal
// is a 429 with Retry-After naming the limit, for an initialize and for a
// 2026-07-28 caller's first request alike, and no upstream is contacted.
func TestSessionCapsAnswer429(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&session.LimitError{Limit: "max_per_principal", Max: 100}, "Too Many Requests: session limit sessions_per_principal (100) reached"},
		{fmt.Errorf("redis: %w", &session.LimitError{Limit: "max_per_tenant", Max: 7}), "Too Many Requests: session limit sessions_per_tenant (7) reached"},
	} {
		mem := session.NewMemory(session.MemoryOptions{})
		t.Cleanup(func() { mem.Close() })
		h, hits := limitHandler(t, cappedStore{mem, tc.err})
		for _, r := range []*httptest.ResponseRecorder{
			postTo(h, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, nil),
			postTo(h, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
				map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}),
		} {
			var m struct {
				Error struct {
					Code    int64  `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			_ = json.Unmarshal(r.Body.Bytes(), &m)
			if r.Code != http.StatusTooManyRequests || r.Header().Get("Retry-After") != "10" || m.Error.Message != tc.want || r.Header().Get("Mcp-Session-Id") != "" {
				t.Errorf("got %d Retry-After %q %s; want 429, %q", r.Code, r.Header().Get("Retry-After"), r.Body, tc.want)
			}
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("refused requests reached the upstream %d times", n)
		}
	}
}

// TestReadBody reads bodies of every size around readBody's growth steps,
// with and without a Content-Length, and refuses those over the limit.
func TestReadBody(t *testing.T) {
	const limit = 1 << 20
	for _, size := range []int{0, 1, 511, 512, 513, 10_000, bodyChunk - 1, bodyChunk, bodyChunk + 1, 200_000, limit} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte('a' + i%26)
		}
		for _, known := range []bool{true, false} {
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(string(body)))
			if !known {
				req.ContentLength = -1
			}
			got, err := readBody(httptest.NewRecorder(), req, limit)
			if err != nil || string(got) != string(body) {
				t.Errorf("size %d, length known %v: %d bytes, %v", size, known, len(got), err)
			}
			if known && cap(got) != size {
				t.Errorf("size %d: a buffer of %d", size, cap(got))
			}
		}
	}
	for _, known := range []bool{true, false} {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(strings.Repeat("x", limit+1)))
		if !known {
			req.ContentLength = -1
		}
		var tooBig *http.MaxBytesError
		if _, err := readBody(httptest.NewRecorder(), req, limit); !errors.As(err, &tooBig) {
			t.Errorf("over the limit, length known %v: %v", known, err)
		}
	}
}
