package pipe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/protocol"
)

// TestStats: a Handler counts the Conns it started, those that exited by
// themselves, and the restarts, one per exit, for the tenant whose Conn
// exited; Conns it stops itself are not exits.
func TestStats(t *testing.T) {
	var mu sync.Mutex
	var conns []*fakeConn
	ended := make(chan bool, 8) // OnConn's exited, when a Conn ends
	h := NewHandler(Options{
		Name:   "fake",
		Tenant: func(r *http.Request) string { return r.Header.Get("X-Tenant") },
		Dial: func(context.Context, *http.Request, string) (Conn, error) {
			c := newFakeConn()
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			return c, nil
		},
		OnConn: func(delta int, exited bool) {
			if delta < 0 {
				ended <- exited
			}
		},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	open := func(tenant string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("X-Tenant", tenant)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get(protocol.HeaderSessionID) == "" {
			t.Fatalf("initialize: %s", resp.Status)
		}
	}
	check := func(when string, want Stats) {
		t.Helper()
		if got := h.Stats(); got != want {
			t.Errorf("%s: %+v, want %+v", when, got, want)
		}
	}
	check("new", Stats{})
	open("acme")
	open("acme") // the same Conn
	check("acme's", Stats{Running: 1, Started: 1})

	mu.Lock()
	conns[0].Close() // the process exits
	mu.Unlock()
	select {
	case exited := <-ended:
		if !exited {
			t.Fatal("an exit counted as stopped")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Conn did not end")
	}
	check("after the exit", Stats{Started: 1, Exited: 1})

	open("acme") // after the backoff
	check("acme's again", Stats{Running: 1, Started: 2, Exited: 1, Restarts: 1})
	open("globex")
	check("globex's", Stats{Running: 2, Started: 3, Exited: 1, Restarts: 1})

	h.Close()
	for range 2 {
		if exited := <-ended; exited {
			t.Error("a Conn the Handler stopped counted as exited")
		}
	}
	check("closed", Stats{Started: 3, Exited: 1, Restarts: 1})
}
