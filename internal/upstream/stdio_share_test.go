package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/pipe"
	"github.com/mcpgw/gateway/internal/session"
)

// limitHits records what OnProcessLimit is told.
type limitHits struct {
	mu   sync.Mutex
	hits []string
}

func (l *limitHits) add(limit, _ string) {
	l.mu.Lock()
	l.hits = append(l.hits, limit)
	l.mu.Unlock()
}

func (l *limitHits) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.hits, " ")
}

// busy keeps a call in flight on s (the process is not idle) until the
// returned func is called.
func busy(t *testing.T, c *Client, s session.Upstream) (done func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := c.Call(ctx, s, jsonrpc.IntID(99), "tools/call", json.RawMessage(`{"name":"block","arguments":{},"_meta":{"progressToken":1}}`))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if m, _, err := r.Next(); err != nil || m.Method != "notifications/progress" {
		cancel()
		t.Fatalf("first message = %v, %v", m, err)
	}
	return func() {
		cancel()
		r.Close()
	}
}

func as(subject, tenant string) context.Context {
	ctx := credentials.With(context.Background(), &credentials.Caller{Issuer: "lab", Subject: subject, Tenant: tenant})
	return withTenant(ctx, tenant)
}

func want503(t *testing.T, err error, what string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Status != 503 {
		t.Fatalf("%s: %v, want 503", what, err)
	}
}

// TestStdioLimits: a session that needs a process beyond a bound, with
// every process busy, fails with 503 and the bound named: the gateway's
// (limits.stdio_processes), then the upstream's (max_processes).
func TestStdioLimits(t *testing.T) {
	limit := pipe.NewLimit(1)
	limit.SetShares(0, 0)
	zero := 0
	var hits limitHits
	c, _ := newStdioClient(t, config.UpstreamStdio{Isolation: config.IsolationSession, MaxProcesses: 2,
		MaxProcessesPerPrincipal: &zero, MaxProcessesPerTenant: &zero}, nil, Options{ProcessLimit: limit, OnProcessLimit: hits.add})
	ctx := context.Background()
	a, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer busy(t, c, a.Session)()
	_, err = c.Open(ctx)
	want503(t, err, "second process beyond the global limit")
	limit.SetMax(10)
	b, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer busy(t, c, b.Session)()
	_, err = c.Open(ctx)
	want503(t, err, "third process beyond max_processes")
	if !strings.Contains(err.Error(), "maximum of 2") {
		t.Errorf("error %q does not name the bound", err)
	}
	if got := hits.String(); got != pipe.LimitTotal+" "+pipe.LimitMaxConns {
		t.Errorf("limits reported %q", got)
	}
}

// TestStdioShares: one principal holds at most its share of an upstream's
// processes; at its share it makes room by stopping its own idle one, and
// is refused only when none is idle; a full pool makes room by stopping
// the heaviest holder's oldest idle process, not by refusing the newcomer.
func TestStdioShares(t *testing.T) {
	one := 1
	var hits limitHits
	c, _ := newStdioClient(t, config.UpstreamStdio{Isolation: config.IsolationSession, MaxProcesses: 4, MaxProcessesPerPrincipal: &one},
		nil, Options{OnProcessLimit: hits.add})
	alice, bob := as("alice", "acme"), as("bob", "acme")
	a1, err := c.Open(alice)
	if err != nil {
		t.Fatal(err)
	}
	done := busy(t, c, a1.Session)
	_, err = c.Open(alice)
	want503(t, err, "alice beyond her share, nothing idle")
	if got := hits.String(); got != pipe.LimitPrincipalConns {
		t.Errorf("limits reported %q, want %s", got, pipe.LimitPrincipalConns)
	}
	if _, err := c.Open(bob); err != nil {
		t.Fatalf("bob, below his share: %v", err)
	}
	// Alice's call ends: her process is idle, and her next session takes
	// its place.
	done()
	var a2 *InitResult
	eventually(t, func() bool {
		a2, err = c.Open(alice)
		return err == nil
	})
	if _, err := callText(alice, c, a1.Session, "echo", map[string]any{"text": "x"}); err == nil {
		t.Error("alice's first session still has its process")
	}
	if got, err := callText(alice, c, a2.Session, "echo", map[string]any{"text": "x"}); err != nil || got != "x" {
		t.Errorf("alice's new session: %q, %v", got, err)
	}
	if n := c.pipe.Conns(); n != 2 {
		t.Errorf("%d processes, want 2", n)
	}

}

// TestStdioPoolFullEvictsHeaviest: with the pool full, a newcomer gets a
// process by stopping the oldest idle one of the principal holding the
// most; the others keep theirs.
func TestStdioPoolFullEvictsHeaviest(t *testing.T) {
	zero := 0
	var hits limitHits
	c, _ := newStdioClient(t, config.UpstreamStdio{Isolation: config.IsolationSession, MaxProcesses: 3,
		MaxProcessesPerPrincipal: &zero, MaxProcessesPerTenant: &zero}, nil, Options{OnProcessLimit: hits.add})
	alice, bob, carol := as("alice", "acme"), as("bob", "acme"), as("carol", "globex")
	var sessions []session.Upstream
	for _, ctx := range []context.Context{alice, alice, bob} {
		r, err := c.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, r.Session)
	}
	if _, err := c.Open(carol); err != nil {
		t.Fatalf("carol with the pool full and processes idle: %v", err)
	}
	if _, err := callText(alice, c, sessions[0], "echo", map[string]any{"text": "x"}); err == nil {
		t.Error("alice's oldest session still has its process")
	}
	for i, ctx := range []context.Context{alice, bob} {
		if got, err := callText(ctx, c, sessions[i+1], "echo", map[string]any{"text": "x"}); err != nil || got != "x" {
			t.Errorf("session %d lost its process: %q, %v", i+1, got, err)
		}
	}
	if n := c.pipe.Conns(); n != 3 {
		t.Errorf("%d processes, want 3", n)
	}
	if got := hits.String(); got != "" {
		t.Errorf("limits reported %q, want none", got)
	}
}
