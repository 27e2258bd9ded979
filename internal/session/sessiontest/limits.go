package sessiontest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/gateway/internal/session"
)

// Limited is a store under test for [RunLimits].
type Limited struct {
	Store session.Store
	// Expire makes the records with these ids expire, as if idle for the
	// store's whole idle TTL, by the store's own means (a clock, Redis's
	// PEXPIRE); it may make other records expire too.
	Expire func(t *testing.T, ids ...string)
}

// RunLimits runs the conformance suite for the per-principal and per-tenant
// bounds of [session.Store.Create]. newStore must return a new, empty store
// with those bounds (0 meaning none).
func RunLimits(t *testing.T, newStore func(t *testing.T, perPrincipal, perTenant int) Limited) {
	tests := []struct {
		name                    string
		perPrincipal, perTenant int
		f                       func(t *testing.T, l Limited)
	}{
		{"PerPrincipal", 3, 0, testLimitPerPrincipal},
		{"PerTenant", 0, 4, testLimitPerTenant},
		{"Both", 2, 3, testLimitBoth},
		{"ExpiredDoNotCount", 3, 3, testLimitExpired},
		{"Concurrent", 5, 0, testLimitConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f(t, newStore(t, tt.perPrincipal, tt.perTenant))
		})
	}
}

func principal(sub, tenant string) session.Principal {
	return session.Principal{Issuer: "https://issuer.example", Subject: sub, Tenant: tenant}
}

// createFor creates a new record of p and returns its id.
func createFor(t *testing.T, s session.Store, p session.Principal) string {
	t.Helper()
	r := newRecord()
	r.Principal = p
	create(t, s, r)
	return r.ID
}

// wantLimit checks that a new record of p is refused with limit (max n),
// and that the refused record is not stored.
func wantLimit(t *testing.T, s session.Store, p session.Principal, limit string, n int64) {
	t.Helper()
	r := newRecord()
	r.Principal = p
	err := s.Create(t.Context(), r)
	var le *session.LimitError
	if !errors.As(err, &le) || !errors.Is(err, session.ErrLimit) || le.Limit != limit || le.Max != n {
		t.Fatalf("Create for %v: got %v, want a %s (%d) *LimitError", p, err, limit, n)
	}
	if _, err := s.Get(t.Context(), r.ID); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Get of a refused record: got %v, want %v", err, session.ErrNotFound)
	}
}

func testLimitPerPrincipal(t *testing.T, l Limited) {
	s := l.Store
	alice := principal("alice", "acme")
	ids := []string{createFor(t, s, alice), createFor(t, s, alice), createFor(t, s, alice)}
	wantLimit(t, s, alice, "max_per_principal", 3)

	// Other principals are not held up: another subject, the same subject
	// from another issuer or in another tenant.
	createFor(t, s, principal("bob", "acme"))
	createFor(t, s, session.Principal{Issuer: "https://other.example", Subject: "alice", Tenant: "acme"})
	createFor(t, s, principal("alice", "globex"))

	// A duplicate id is refused as such, and counted once.
	dup := newRecord()
	dup.ID, dup.Principal = ids[0], alice
	if err := s.Create(t.Context(), dup); !errors.Is(err, session.ErrExists) {
		t.Fatalf("Create of a duplicate id at the bound: got %v, want %v", err, session.ErrExists)
	}
	wantLimit(t, s, alice, "max_per_principal", 3)
	get(t, s, ids[0])

	// A deleted session frees its place, once.
	if err := s.Delete(t.Context(), ids[1]); err != nil {
		t.Fatal(err)
	}
	createFor(t, s, alice)
	wantLimit(t, s, alice, "max_per_principal", 3)
}

func testLimitPerTenant(t *testing.T, l Limited) {
	s := l.Store
	var ids []string
	for i := range 4 {
		ids = append(ids, createFor(t, s, principal(fmt.Sprint("user-", i), "acme")))
	}
	wantLimit(t, s, principal("newcomer", "acme"), "max_per_tenant", 4)
	wantLimit(t, s, principal("user-0", "acme"), "max_per_tenant", 4)
	createFor(t, s, principal("user-0", "globex"))
	if err := s.Delete(t.Context(), ids[2]); err != nil {
		t.Fatal(err)
	}
	createFor(t, s, principal("newcomer", "acme"))
	wantLimit(t, s, principal("user-2", "acme"), "max_per_tenant", 4)
}

func testLimitBoth(t *testing.T, l Limited) {
	s := l.Store
	alice, bob, carol := principal("alice", "acme"), principal("bob", "acme"), principal("carol", "acme")
	createFor(t, s, alice)
	createFor(t, s, alice)
	wantLimit(t, s, alice, "max_per_principal", 2)
	// The refusal for alice took no place from her tenant.
	createFor(t, s, bob)
	wantLimit(t, s, carol, "max_per_tenant", 3)
	wantLimit(t, s, alice, "max_per_principal", 2)
}

func testLimitExpired(t *testing.T, l Limited) {
	s := l.Store
	alice := principal("alice", "acme")
	ids := []string{createFor(t, s, alice), createFor(t, s, alice), createFor(t, s, alice)}
	wantLimit(t, s, alice, "max_per_principal", 3)
	l.Expire(t, ids...)
	for _, id := range ids {
		if _, err := s.Get(t.Context(), id); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("Get(%q) after Expire: got %v, want %v", id, err, session.ErrNotFound)
		}
	}
	// Expired sessions count against neither bound.
	live := []string{createFor(t, s, alice), createFor(t, s, alice), createFor(t, s, alice)}
	wantLimit(t, s, alice, "max_per_principal", 3)
	wantLimit(t, s, principal("bob", "acme"), "max_per_tenant", 3)
	for _, id := range live {
		get(t, s, id)
	}
}

func testLimitConcurrent(t *testing.T, l Limited) {
	const n = 20
	s := l.Store
	alice := principal("alice", "acme")
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := newRecord()
			r.Principal = alice
			<-start
			errs[i] = s.Create(t.Context(), r)
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, session.ErrLimit):
			t.Errorf("Create: unexpected error %v", err)
		}
	}
	if ok != 5 {
		t.Errorf("%d of %d concurrent Creates succeeded, want exactly 5 (the bound)", ok, n)
	}
}

// RunMailboxLimits runs the conformance suite for the bounds of
// [session.Mailbox.Post]. newMailbox must return a new, empty mailbox store
// whose mailboxes hold at most messages messages and bytes bytes each.
func RunMailboxLimits(t *testing.T, newMailbox func(t *testing.T, messages int, bytes int64) session.Mailbox) {
	t.Run("Messages", func(t *testing.T) { testMailboxLimitMessages(t, newMailbox(t, 3, 1<<20)) })
	t.Run("Bytes", func(t *testing.T) { testMailboxLimitBytes(t, newMailbox(t, 64, 10)) })
	t.Run("BytesFreedByWaitingTake", func(t *testing.T) { testMailboxLimitWaitingTake(t, newMailbox(t, 64, 10)) })
	t.Run("Defaults", func(t *testing.T) { testMailboxLimitDefaults(t, newMailbox(t, 0, 0)) })
}

// wantPostLimit checks that posting msg to key is refused with limit (max n).
func wantPostLimit(t *testing.T, mb session.Mailbox, key, msg, limit string, n int64) {
	t.Helper()
	err := mb.Post(t.Context(), key, []byte(msg), mailboxTTL)
	var le *session.LimitError
	if !errors.As(err, &le) || !errors.Is(err, session.ErrLimit) || le.Limit != limit || le.Max != n {
		t.Fatalf("Post(%q, %d bytes): got %v, want a %s (%d) *LimitError", key, len(msg), err, limit, n)
	}
}

func testMailboxLimitMessages(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	for _, m := range []string{"one", "two", "three"} {
		post(t, mb, key, m)
	}
	wantPostLimit(t, mb, key, "four", "mailbox_messages", 3)
	post(t, mb, mailboxKey(), "elsewhere") // a bound per mailbox
	if got := take(t, mb, key); got != "one" {
		t.Fatalf("Take = %q, want %q", got, "one")
	}
	post(t, mb, key, "four")
	wantPostLimit(t, mb, key, "five", "mailbox_messages", 3)
	// Refusals changed nothing.
	for _, want := range []string{"two", "three", "four"} {
		if got := take(t, mb, key); got != want {
			t.Fatalf("Take = %q, want %q", got, want)
		}
	}
	wantEmpty(t, mb, key)
}

func testMailboxLimitBytes(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	wantPostLimit(t, mb, key, "01234567890", "mailbox_bytes", 10)
	wantEmpty(t, mb, key)
	post(t, mb, key, "abcde")
	wantPostLimit(t, mb, key, "abcdef", "mailbox_bytes", 10)
	post(t, mb, key, "fghij") // exactly at the bound
	wantPostLimit(t, mb, key, "k", "mailbox_bytes", 10)
	post(t, mb, key, "") // an empty message takes no byte
	if got := take(t, mb, key); got != "abcde" {
		t.Fatalf("Take = %q, want %q", got, "abcde")
	}
	post(t, mb, key, "klmno")
	wantPostLimit(t, mb, key, "p", "mailbox_bytes", 10)
	for _, want := range []string{"fghij", "", "klmno"} {
		if got := take(t, mb, key); got != want {
			t.Fatalf("Take = %q, want %q", got, want)
		}
	}
	wantEmpty(t, mb, key)
	// Emptied, the mailbox takes its full size again.
	post(t, mb, key, "0123456789")
}

func testMailboxLimitWaitingTake(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	for range 5 {
		post(t, mb, key, "0123456789")
		// A Take that may wait (a blocking pop in Redis) frees the bytes
		// too.
		msg, err := mb.Take(t.Context(), key, longWait)
		if err != nil || string(msg) != "0123456789" {
			t.Fatalf("Take = %q, %v", msg, err)
		}
	}
	post(t, mb, key, "01234")
	post(t, mb, key, "56789")
	wantPostLimit(t, mb, key, "x", "mailbox_bytes", 10)
}

func testMailboxLimitDefaults(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	for range session.DefaultMailboxMessages {
		post(t, mb, key, "m")
	}
	wantPostLimit(t, mb, key, "m", "mailbox_messages", session.DefaultMailboxMessages)

	key = mailboxKey()
	half := strings.Repeat("x", int(session.DefaultMailboxBytes/2))
	post(t, mb, key, half)
	post(t, mb, key, half)
	wantPostLimit(t, mb, key, "x", "mailbox_bytes", session.DefaultMailboxBytes)
	if got := take(t, mb, key); !bytes.Equal([]byte(got), []byte(half)) {
		t.Fatalf("Take returned %d bytes, want %d", len(got), len(half))
	}
	post(t, mb, key, "x")
}
