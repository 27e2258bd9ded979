package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/vault"
)

// TestTokensCommand: list shows the vault's tokens without their values;
// revoke deletes a tenant's, or a user's.
func TestTokensCommand(t *testing.T) {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	prefix := "tokenstest-" + vault.NewID() + ":"
	yaml := `auth:
  anonymous: true
server:
  drain_delay: 0s
sessions:
  store: redis
  redis:
    key_prefix: "` + prefix + `"
upstreams:
  - name: saas
    url: http://127.0.0.1:1/mcp
    auth:
      mode: user_oauth
      client_id: gw
vault:
  keys:
    - id: k1
      secret: ` + base64.StdEncoding.EncodeToString(secret) + "\n"
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() {
		keys, _ := rc.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rc.Del(context.Background(), keys...)
		}
		rc.Close()
	})
	c, err := credentials.VaultCipher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := vault.New(vault.NewRedis(rc, prefix, time.Second, credentials.VaultLimits(cfg)), c)
	for _, u := range []struct{ sub, tenant string }{{"alice", "acme"}, {"bob", "acme"}, {"carol", "globex"}} {
		k := vault.Key{Principal: vault.Principal{Issuer: "https://idp", Subject: u.sub, Tenant: u.tenant}, Upstream: "saas"}
		if err := v.Save(context.Background(), k, &vault.Token{AccessToken: "AT-" + u.sub, RefreshToken: "RT-" + u.sub, Expiry: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"tokens"}, args...), func(string) string { return "" }, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	out, err := cmd("list", "-config", path)
	if err != nil || strings.Count(out, "saas") != 3 || strings.Contains(out, "AT-") || strings.Contains(out, "RT-") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if out, err := cmd("revoke", "-config", path); err == nil {
		t.Fatalf("revoke without a tenant or subject: %s", out)
	}
	if out, err := cmd("revoke", "-config", path, "-tenant", "acme", "-subject", "bob"); err != nil || !strings.Contains(out, "revoked 1 tokens") {
		t.Fatalf("revoke bob: %v %s", err, out)
	}
	if out, err := cmd("revoke", "-config", path, "-tenant", "globex"); err != nil || !strings.Contains(out, "revoked 1 tokens") {
		t.Fatalf("revoke globex: %v %s", err, out)
	}
	out, err = cmd("list", "-config", path)
	if err != nil || !strings.Contains(out, "alice") || strings.Contains(out, "bob") || strings.Contains(out, "carol") {
		t.Fatalf("list after: %v\n%s", err, out)
	}
}
