package backend

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/testkit"
	"github.com/mcpgw/gateway/internal/vault"
)

func configOf(t *testing.T, edit func(*config.Config)) *config.Config {
	t.Helper()
	cfg := &config.Config{Auth: config.Auth{Anonymous: true}, Upstreams: []config.Upstream{{Name: "u", URL: "http://127.0.0.1:1/mcp"}}}
	if edit != nil {
		edit(cfg)
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestMemory: the default backend is this process's, every part of it,
// with nothing to ping; Close closes it once.
func TestMemory(t *testing.T) {
	b, err := New(configOf(t, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Sessions.(*session.Memory); !ok || b.Events == nil || b.Tasks == nil || b.Mailbox == nil || b.Bus == nil {
		t.Fatalf("sessions %T, events %T, tasks %T, mailbox %T, bus %T", b.Sessions, b.Events, b.Tasks, b.Mailbox, b.Bus)
	}
	if _, ok := b.Budgets.(*budget.Memory); !ok {
		t.Errorf("budgets %T", b.Budgets)
	}
	if _, ok := b.Vault.(*vault.Memory); !ok {
		t.Errorf("vault %T", b.Vault)
	}
	if b.Ping != nil {
		t.Error("a memory backend has a ping")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestRedis: with sessions.store redis, every part is Redis's, one
// server's; budgets.redis gives the budgets a server of their own.
func TestRedis(t *testing.T) {
	sessions, budgets := testkit.StartRedis(t), testkit.StartRedis(t)
	cfg := configOf(t, func(c *config.Config) {
		c.Sessions.Store = config.StoreRedis
		c.Sessions.Redis = config.Redis{Addrs: []string{sessions.Addr}}
		c.Budgets.Redis = &config.Redis{Addrs: []string{budgets.Addr}}
	})
	b, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, ok := b.Sessions.(*session.Redis); !ok {
		t.Fatalf("sessions %T", b.Sessions)
	}
	if _, ok := b.Vault.(*vault.Redis); !ok {
		t.Errorf("vault %T", b.Vault)
	}
	if b.Ping == nil || b.Ping(context.Background()) != nil {
		t.Fatal("no ping of the session Redis")
	}
	if _, ok := b.Budgets.(*budget.Redis); !ok {
		t.Fatalf("budgets %T", b.Budgets)
	}
	// A budget counted lands in the budgets' own server.
	if _, _, err := b.Budgets.Count(context.Background(), "k", 10, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	n, err := budgets.Do("DBSIZE")
	if err != nil || n.(int64) == 0 {
		t.Errorf("the budgets' server holds %v keys (%v)", n, err)
	}
	if n, _ := sessions.Do("DBSIZE"); n.(int64) != 0 {
		t.Errorf("the session server holds %v keys of budgets", n)
	}
}
