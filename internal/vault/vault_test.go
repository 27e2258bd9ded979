package vault_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/gateway/internal/testkit"
	"github.com/mcpgw/gateway/internal/vault"
)

func key(id string) vault.KeyMaterial {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return vault.KeyMaterial{ID: id, Secret: b}
}

func mustCipher(t *testing.T, keys ...vault.KeyMaterial) *vault.Cipher {
	t.Helper()
	c, err := vault.NewCipher(keys)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCipherRotation(t *testing.T) {
	k1, k2 := key("k1"), key("k2")
	old := mustCipher(t, k1)
	sealed := old.Seal([]byte("secret"), []byte("aad"))
	if bytes.Contains(sealed, []byte("secret")) {
		t.Fatal("plaintext in the sealed value")
	}
	rotated := mustCipher(t, k2, k1)
	if got, err := rotated.Open(sealed, []byte("aad")); err != nil || string(got) != "secret" {
		t.Fatalf("old key after rotation: %q %v", got, err)
	}
	fresh := rotated.Seal([]byte("secret"), []byte("aad"))
	if _, err := old.Open(fresh, []byte("aad")); err == nil {
		t.Fatal("a cipher without k2 opened what k2 sealed")
	}
	if _, err := rotated.Open(sealed, []byte("other")); err == nil {
		t.Fatal("opened with another aad")
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := rotated.Open(sealed, []byte("aad")); err == nil {
		t.Fatal("opened a tampered value")
	}
	if _, err := rotated.Open(nil, nil); err == nil {
		t.Fatal("opened nothing")
	}
}

func alice(up string) vault.Key {
	return vault.Key{Principal: vault.Principal{Issuer: "https://idp", Subject: "alice", Tenant: "acme"}, Upstream: up}
}

// stores runs fn on a memory store and a Redis store, both bounded by lim.
func stores(t *testing.T, lim vault.Limits, fn func(t *testing.T, s vault.Store, raw func() []string)) {
	t.Run("memory", func(t *testing.T) { fn(t, vault.NewMemory(lim), nil) })
	t.Run("redis", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
		t.Cleanup(func() { _ = c.Close() })
		prefix := "vaulttest:" + vault.NewID() + ":"
		t.Cleanup(func() {
			keys, _ := c.Keys(context.Background(), prefix+"*").Result()
			if len(keys) > 0 {
				c.Del(context.Background(), keys...)
			}
		})
		raw := func() []string {
			keys, err := c.Keys(context.Background(), prefix+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			var vals []string
			for _, k := range keys {
				if typ, _ := c.Type(context.Background(), k).Result(); typ == "string" {
					v, _ := c.Get(context.Background(), k).Result()
					vals = append(vals, k+"="+v)
				}
			}
			return vals
		}
		fn(t, vault.NewRedis(c, prefix, time.Second, lim), raw)
	})
}

func TestTokens(t *testing.T) {
	lim := vault.Limits{TokensPerTenant: 2, Tokens: 3, PendingPerPrincipal: 2, Pending: 3}
	stores(t, lim, func(t *testing.T, s vault.Store, raw func() []string) {
		ctx := context.Background()
		v := vault.New(s, mustCipher(t, key("k1")))
		tok := &vault.Token{AccessToken: "AT-secret", RefreshToken: "RT-secret", Expiry: time.Now().Add(time.Hour), Issuer: "https://as"}
		if err := v.Save(ctx, alice("gh"), tok); err != nil {
			t.Fatal(err)
		}
		got, err := v.Token(ctx, alice("gh"))
		if err != nil || got == nil || got.AccessToken != "AT-secret" || got.RefreshToken != "RT-secret" {
			t.Fatalf("Token: %+v %v", got, err)
		}
		if s := fmt.Sprintf("%v %+v %s", got, got, got); strings.Contains(s, "secret") {
			t.Fatalf("a token prints its values: %s", s)
		}
		if raw != nil {
			for _, r := range raw() {
				if strings.Contains(r, "secret") {
					t.Fatalf("readable in Redis: %s", r)
				}
			}
		}
		// Another key does not decrypt: unreadable without the key.
		other := vault.New(s, mustCipher(t, key("k1")))
		if got, _ := other.Token(ctx, alice("gh")); got != nil {
			t.Fatal("decrypted with another key")
		}
		// Bounds: the tenant's, then the store's.
		if err := v.Save(ctx, alice("jira"), tok); err != nil {
			t.Fatal(err)
		}
		if err := v.Save(ctx, alice("slack"), tok); !errors.Is(err, vault.ErrFull) {
			t.Fatalf("third token of a tenant of 2: %v", err)
		}
		if err := v.Save(ctx, alice("gh"), tok); err != nil {
			t.Fatalf("replacing a token at the bound: %v", err)
		}
		bob := vault.Key{Principal: vault.Principal{Issuer: "https://idp", Subject: "bob", Tenant: "beta"}, Upstream: "gh"}
		if err := v.Save(ctx, bob, tok); err != nil {
			t.Fatal(err)
		}
		carol := bob
		carol.Subject, carol.Tenant = "carol", "gamma"
		if err := v.Save(ctx, carol, tok); !errors.Is(err, vault.ErrFull) {
			t.Fatalf("fourth token of a store of 3: %v", err)
		}
		infos, err := v.List(ctx, vault.Filter{Tenant: "acme"})
		if err != nil || len(infos) != 2 || !infos[0].Refresh {
			t.Fatalf("List: %+v %v", infos, err)
		}
		if ok, err := v.Delete(ctx, alice("gh")); !ok || err != nil {
			t.Fatalf("Delete: %v %v", ok, err)
		}
		if err := v.Save(ctx, carol, tok); err != nil {
			t.Fatalf("after a delete: %v", err)
		}
		if got, _ := v.Token(ctx, alice("gh")); got != nil {
			t.Fatal("deleted token still there")
		}
	})
}

func TestPending(t *testing.T) {
	lim := vault.Limits{TokensPerTenant: 2, Tokens: 3, PendingPerPrincipal: 2, Pending: 3}
	stores(t, lim, func(t *testing.T, s vault.Store, _ func() []string) {
		ctx := context.Background()
		v := vault.New(s, mustCipher(t, key("k1")))
		// Each consent expires 2 ms after the one made before it: the
		// Redis store orders consents by their expiry in milliseconds, and
		// two in the same millisecond are as old as each other.
		var made time.Duration
		p := func(sub string, ttl time.Duration) *vault.Pending {
			made += 2 * time.Millisecond
			return &vault.Pending{Principal: vault.Principal{Issuer: "i", Subject: sub, Tenant: "t"}, Upstream: "gh",
				Verifier: "verifier-secret", Expires: time.Now().Add(ttl + made)}
		}
		a1, err := v.Begin(ctx, p("alice", time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Peek(ctx, a1)
		if err != nil || got.Subject != "alice" || got.Verifier != "verifier-secret" {
			t.Fatalf("Peek: %+v %v", got, err)
		}
		// Per principal: the third of alice's evicts her first.
		a2, _ := v.Begin(ctx, p("alice", time.Minute))
		a3, err := v.Begin(ctx, p("alice", time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Peek(ctx, a1); !errors.Is(err, vault.ErrNotFound) {
			t.Fatalf("alice's oldest consent survived her third: %v", err)
		}
		// In all: 3; bob's first fits, carol's ends the oldest of the
		// tenant holding the most (all are of one here): alice's a2.
		if _, err := v.Begin(ctx, p("bob", time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Begin(ctx, p("carol", time.Minute)); err != nil {
			t.Fatalf("fourth pending of 3: %v", err)
		}
		if _, err := v.Peek(ctx, a2); !errors.Is(err, vault.ErrNotFound) {
			t.Fatalf("the oldest consent survived a full store: %v", err)
		}
		a2, _ = v.Begin(ctx, p("alice", time.Minute))
		// Single use.
		if got, err := v.Take(ctx, a2); err != nil || got.ID != a2 {
			t.Fatalf("Take: %+v %v", got, err)
		}
		if _, err := v.Take(ctx, a2); !errors.Is(err, vault.ErrNotFound) {
			t.Fatalf("taken twice: %v", err)
		}
		if _, err := v.Begin(ctx, p("carol", time.Minute)); err != nil {
			t.Fatalf("after a take: %v", err)
		}
		_, _ = v.Take(ctx, a3)
		// Expiry.
		e, err := v.Begin(ctx, p("dave", 50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		// Peek, unlike Take, uses nothing up.
		testkit.Eventually(t, 5*time.Second, func() bool {
			_, err := v.Peek(ctx, e)
			return errors.Is(err, vault.ErrNotFound)
		}, "the consent has not expired")
		if _, err := v.Take(ctx, e); !errors.Is(err, vault.ErrNotFound) {
			t.Fatalf("expired consent taken: %v", err)
		}
		if _, err := v.Take(ctx, "not-an-id"); !errors.Is(err, vault.ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
	})
}

// TestPendingTenantShare: a tenant's principals hold at most the tenant's
// share of the pending consents (the tenant's oldest goes), and when the
// store is full the tenant that holds the most loses its oldest: a
// newcomer of a light tenant is never refused, nor takes a light tenant's.
func TestPendingTenantShare(t *testing.T) {
	lim := vault.Limits{TokensPerTenant: 2, Tokens: 3, PendingPerPrincipal: 2, PendingPerTenant: 3, Pending: 5}
	stores(t, lim, func(t *testing.T, s vault.Store, _ func() []string) {
		ctx := context.Background()
		v := vault.New(s, mustCipher(t, key("k1")))
		n := 0
		begin := func(sub, tenant string) string {
			t.Helper()
			n++ // one millisecond apart: each is older than the next
			id, err := v.Begin(ctx, &vault.Pending{Principal: vault.Principal{Issuer: "i", Subject: sub, Tenant: tenant}, Upstream: "gh",
				Expires: time.Now().Add(time.Minute + time.Duration(n)*time.Millisecond)})
			if err != nil {
				t.Fatalf("Begin %s/%s: %v", tenant, sub, err)
			}
			return id
		}
		live := func(id string) bool {
			_, err := v.Peek(ctx, id)
			return err == nil
		}
		// Tenant acme, three principals: its share is 3; the fourth
		// ends acme's oldest, whoever's it was.
		a1, b1, c1 := begin("alice", "acme"), begin("bob", "acme"), begin("carol", "acme")
		d1 := begin("dave", "acme")
		if live(a1) || !live(b1) || !live(c1) || !live(d1) {
			t.Fatalf("acme past its share of 3: %v %v %v %v, want only the oldest ended", live(a1), live(b1), live(c1), live(d1))
		}
		// Globex takes the two left: the store is full (5).
		g1, g2 := begin("gina", "globex"), begin("hank", "globex")
		// Initech's newcomer is not refused: acme, the heaviest (3),
		// loses its oldest (b1); globex keeps both.
		i1 := begin("ivan", "initech")
		if live(b1) || !live(c1) || !live(d1) || !live(g1) || !live(g2) || !live(i1) {
			t.Fatalf("full store: b1 %v c1 %v d1 %v g1 %v g2 %v i1 %v, want only acme's oldest ended", live(b1), live(c1), live(d1), live(g1), live(g2), live(i1))
		}
		// Now acme and globex hold 2 each: of two as heavy, the one whose
		// oldest is older (acme's c1) loses it.
		i2 := begin("ivan", "initech")
		if live(c1) || !live(g1) || !live(i2) {
			t.Fatalf("tie: c1 %v g1 %v i2 %v, want the older of the heaviest ended", live(c1), live(g1), live(i2))
		}
		// What is taken frees its place in every count.
		if _, err := v.Take(ctx, g1); err != nil {
			t.Fatal(err)
		}
		j1 := begin("jo", "jade")
		for _, id := range []string{d1, g2, i1, i2, j1} {
			if !live(id) {
				t.Fatalf("a consent ended although a place was free")
			}
		}
	})
}

// TestRedisPendingKeys: the Redis store's lists of pending consents (by
// principal, by tenant, in all, their owners and the tenants' counts)
// hold nothing once every consent is taken, ended or expired.
func TestRedisPendingKeys(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	prefix := "vaulttest:" + vault.NewID() + ":"
	t.Cleanup(func() {
		if keys, _ := c.Keys(ctx, prefix+"*").Result(); len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	v := vault.New(vault.NewRedis(c, prefix, time.Second, vault.Limits{PendingPerPrincipal: 2, PendingPerTenant: 3, Pending: 4}), mustCipher(t, key("k1")))
	var ids []string
	for i := range 12 {
		id, err := v.Begin(ctx, &vault.Pending{Principal: vault.Principal{Issuer: "i", Subject: fmt.Sprint("s", i%5), Tenant: fmt.Sprint("t", i%3)},
			Upstream: "gh", Expires: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	brief, err := v.Begin(ctx, &vault.Pending{Principal: vault.Principal{Issuer: "i", Subject: "x", Tenant: "t9"}, Upstream: "gh", Expires: time.Now().Add(20 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	base := prefix + "vault:{vault}:"
	if n := c.ZCard(ctx, base+"pall").Val(); n != 4 {
		t.Fatalf("%d pending in all, want the bound 4", n)
	}
	for _, id := range ids {
		_, _ = v.Take(ctx, id)
	}
	// The brief one expires; the next Begin drops it from every list.
	testkit.Eventually(t, 5*time.Second, func() bool {
		_, err := v.Peek(ctx, brief)
		return errors.Is(err, vault.ErrNotFound)
	}, "the brief consent did not expire")
	last, err := v.Begin(ctx, &vault.Pending{Principal: vault.Principal{Issuer: "i", Subject: "y", Tenant: "t0"}, Upstream: "gh", Expires: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Take(ctx, last); err != nil {
		t.Fatal(err)
	}
	if n, m, k := c.ZCard(ctx, base+"pall").Val(), c.HLen(ctx, base+"pmeta").Val(), c.ZCard(ctx, base+"ptc").Val(); n+m+k != 0 {
		t.Fatalf("left behind: pall %d, pmeta %d, ptc %d", n, m, k)
	}
	// Empty zsets do not exist: no key of a pending consent is left.
	for _, pattern := range []string{base + "pp:*", base + "pt:*", base + "p:*"} {
		if keys := c.Keys(ctx, pattern).Val(); len(keys) != 0 {
			t.Errorf("left behind: %v", keys)
		}
	}
}
