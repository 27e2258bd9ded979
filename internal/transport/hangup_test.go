package transport

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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

// failingStore fails every lookup and creation with err.
type failingStore struct {
	*session.Memory
	err error
}

func (s failingStore) Create(context.Context, *session.Record) error { return s.err }
func (s failingStore) Get(context.Context, string) (*session.Record, error) {
	return nil, s.err
}

// TestStoreErrorOfAHangUpIsNoError: a store operation that fails because
// the client hung up (its request's context is cancelled) is logged at
// Debug; one that fails for the store's own reasons is an error.
func TestStoreErrorOfAHangUpIsNoError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		hangUp bool
		errors int
	}{
		{"client hung up", context.Canceled, true, 0},
		{"store down", errors.New("dial tcp 127.0.0.1:6379: connection refused"), false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := &config.Config{Auth: config.Auth{Anonymous: true}, Upstreams: []config.Upstream{{Name: "alpha", URL: "http://127.0.0.1:1/mcp", Watch: new(bool)}}}
			cfg.ApplyDefaults()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			store := failingStore{session.NewMemory(session.MemoryOptions{}), tc.err}
			t.Cleanup(func() { store.Close() })
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
			log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			h := auth.Anonymous(tenant.DefaultID)(New(srv, Options{Metrics: m, Logger: log}))
			for _, rq := range []struct {
				body   string
				header map[string]string
			}{
				{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`, nil},
				{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Mcp-Session-Id": "0123456789abcdef0123456789abcdef", "Mcp-Protocol-Version": "2025-11-25"}},
				{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
					map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}},
			} {
				req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(rq.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				for k, v := range rq.header {
					req.Header.Set(k, v)
				}
				if tc.hangUp {
					ctx, cancel := context.WithCancel(req.Context())
					cancel()
					req = req.WithContext(ctx)
				}
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
			if got := strings.Count(logs.String(), `"level":"ERROR"`); got != tc.errors {
				t.Errorf("%d errors logged, want %d:\n%s", got, tc.errors, logs.String())
			}
			if tc.hangUp && strings.Count(logs.String(), "client gone") != 3 {
				t.Errorf("the hang-ups were not logged at debug:\n%s", logs.String())
			}
		})
	}
}
