package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/session/sessiontest"
)

func TestMemory(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) session.Store {
		return newMemory(t, session.MemoryOptions{})
	})
}

// newMemory returns a Memory closed when the test ends. Inside a synctest
// bubble, the cleanup runs in the bubble, so the sweeper is gone before the
// bubble checks for leftover goroutines.
func newMemory(t *testing.T, opts session.MemoryOptions) *session.Memory {
	t.Helper()
	m := session.NewMemory(opts)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// fakeClock is a MemoryOptions.Now that moves only when told, for tests that
// must see expired records before the sweeper does.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// expiredLog is an OnExpire that remembers the ids it was called with.
type expiredLog struct {
	mu  sync.Mutex
	ids []string
}

func (l *expiredLog) OnExpire(r *session.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, r.ID)
}

func (l *expiredLog) IDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

func newRecord(id string) *session.Record {
	return &session.Record{
		ID:                 id,
		ProtocolVersion:    "2025-06-18",
		ClientInfo:         json.RawMessage(`{"name":"c","version":"1"}`),
		ClientCapabilities: json.RawMessage(`{"roots":{}}`),
		Principal:          session.Principal{Subject: "alice", Tenant: "acme"},
		Upstreams: map[string]session.Upstream{
			"github": {SessionID: "gh-1", Capabilities: json.RawMessage(`{"tools":{}}`)},
		},
	}
}

func mustCreate(t *testing.T, s session.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := s.Create(t.Context(), newRecord(id)); err != nil {
			t.Fatalf("Create(%q): %v", id, err)
		}
	}
}

func wantLive(t *testing.T, s session.Store, id string) *session.Record {
	t.Helper()
	r, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("at %v: Get(%q): %v, want live record", time.Now(), id, err)
	}
	return r
}

func wantGone(t *testing.T, s session.Store, id string) {
	t.Helper()
	if _, err := s.Get(t.Context(), id); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("at %v: Get(%q): got %v, want %v", time.Now(), id, err, session.ErrNotFound)
	}
}

func TestMemoryIdleExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Minute
		m := newMemory(t, session.MemoryOptions{IdleTTL: ttl})
		mustCreate(t, m, "a", "b")

		time.Sleep(ttl - time.Second)
		wantLive(t, m, "a")

		time.Sleep(time.Second) // b has now been idle for exactly ttl
		wantGone(t, m, "b")
		if _, err := m.SetUpstream(t.Context(), "b", "x", "", session.Upstream{}); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("SetUpstream on expired record: got %v, want %v", err, session.ErrNotFound)
		}
		wantLive(t, m, "a")
	})
}

func TestMemoryDefaultIdleTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory(t, session.MemoryOptions{})
		mustCreate(t, m, "a", "b")
		time.Sleep(session.DefaultIdleTTL - time.Nanosecond)
		wantLive(t, m, "a")
		time.Sleep(time.Nanosecond)
		wantGone(t, m, "b")
	})
}

// TestMemoryExpiredInvisible checks that an expired record is hidden before
// the sweeper removes it: the fake clock expires it, while the sweeper's real
// timer does not fire during the test.
func TestMemoryExpiredInvisible(t *testing.T) {
	clock := newFakeClock()
	var log expiredLog
	m := newMemory(t, session.MemoryOptions{IdleTTL: time.Hour, Now: clock.Now, OnExpire: log.OnExpire})
	mustCreate(t, m, "a")
	clock.Advance(time.Hour)
	wantGone(t, m, "a")
	if _, err := m.SetUpstream(t.Context(), "a", "x", "", session.Upstream{}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("SetUpstream on expired record: got %v, want %v", err, session.ErrNotFound)
	}
	if got := m.Len(); got != 1 {
		t.Errorf("Len = %d, want 1 (expired but not swept)", got)
	}
	if got := log.IDs(); len(got) != 0 {
		t.Errorf("OnExpire called for %v before any sweep", got)
	}
}

func TestMemoryGetRefreshes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Minute
		m := newMemory(t, session.MemoryOptions{IdleTTL: ttl})
		mustCreate(t, m, "a")
		start := time.Now()
		for range 5 {
			time.Sleep(ttl - time.Minute)
			r := wantLive(t, m, "a")
			if !r.LastSeen.Equal(time.Now()) {
				t.Errorf("LastSeen = %v, want now (%v)", r.LastSeen, time.Now())
			}
			if !r.Created.Equal(start) {
				t.Errorf("Created = %v, want %v", r.Created, start)
			}
		}
		// Five refreshes kept it alive for 45m, well past ttl; idle, it goes.
		time.Sleep(ttl)
		wantGone(t, m, "a")
	})
}

func TestMemoryOnExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Minute // sweeps every minute
		var (
			m       *session.Memory
			mu      sync.Mutex
			expired []*session.Record
		)
		m = newMemory(t, session.MemoryOptions{
			IdleTTL: ttl,
			OnExpire: func(r *session.Record) {
				// Would deadlock if the store's lock were held.
				_ = m.Len()
				mu.Lock()
				defer mu.Unlock()
				expired = append(expired, r)
			},
		})
		created := time.Now()
		mustCreate(t, m, "a", "b", "c")

		time.Sleep(6 * time.Minute)
		wantLive(t, m, "c") // c now expires at 16m

		time.Sleep(5 * time.Minute) // 11m: a and b expired at 10m
		synctest.Wait()
		mu.Lock()
		got := expired
		mu.Unlock()
		var want []*session.Record
		for _, id := range []string{"a", "b"} {
			r := newRecord(id)
			r.Created, r.LastSeen = created, created
			want = append(want, r)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("OnExpire records mismatch (-want +got):\n%s", diff)
		}
		if n := m.Len(); n != 1 {
			t.Errorf("Len = %d after sweep, want 1", n)
		}

		// Delete does not report to OnExpire.
		if err := m.Delete(t.Context(), "c"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(expired) != 2 {
			t.Errorf("OnExpire called %d times, want 2 (not for Delete)", len(expired))
		}
	})
}

// TestMemoryFull: a Create in a full store evicts the least recently seen
// record (here all are one principal's, the heaviest holder), reports it
// to OnExpire, and the evicted id is unknown from then on.
func TestMemoryFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Minute
		var log expiredLog
		m := newMemory(t, session.MemoryOptions{IdleTTL: ttl, MaxSessions: 2, OnExpire: log.OnExpire})
		mustCreate(t, m, "a", "b")
		wantLive(t, m, "a") // b is now the least recently seen
		mustCreate(t, m, "c")
		wantGone(t, m, "b")
		wantLive(t, m, "a")
		wantLive(t, m, "c")
		if diff := cmp.Diff([]string{"b"}, log.IDs()); diff != "" {
			t.Errorf("OnExpire ids mismatch (-want +got):\n%s", diff)
		}
		if n := m.Len(); n != 2 {
			t.Errorf("Len = %d, want 2", n)
		}

		// Delete makes room: nothing is evicted.
		if err := m.Delete(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, m, "d")
		wantLive(t, m, "c")

		// So does expiry.
		time.Sleep(ttl)
		mustCreate(t, m, "e", "f")
		if n := m.Len(); n != 2 {
			t.Errorf("Len = %d, want 2", n)
		}
	})
}

// TestMemoryCreateSweeps checks that a full Create removes expired records
// itself, without waiting for the sweeper, and reports them to OnExpire;
// with none expired, it evicts the least recently seen.
func TestMemoryCreateSweeps(t *testing.T) {
	clock := newFakeClock()
	var log expiredLog
	m := newMemory(t, session.MemoryOptions{IdleTTL: time.Hour, MaxSessions: 3, Now: clock.Now, OnExpire: log.OnExpire})
	mustCreate(t, m, "a", "b")
	clock.Advance(30 * time.Minute)
	mustCreate(t, m, "c")
	wantLive(t, m, "a")
	clock.Advance(30 * time.Minute) // b expired; a and c live

	mustCreate(t, m, "d")
	if diff := cmp.Diff([]string{"b"}, log.IDs()); diff != "" {
		t.Errorf("OnExpire ids mismatch (-want +got):\n%s", diff)
	}
	mustCreate(t, m, "e") // c is the least recently seen live record
	if diff := cmp.Diff([]string{"b", "c"}, log.IDs()); diff != "" {
		t.Errorf("OnExpire ids mismatch (-want +got):\n%s", diff)
	}
	for _, id := range []string{"a", "d", "e"} {
		wantLive(t, m, id)
	}
}

// recordOf returns a new record of subject sub in tenant ten.
func recordOf(id, sub, ten string) *session.Record {
	r := newRecord(id)
	r.Principal = session.Principal{Issuer: "https://issuer.example", Subject: sub, Tenant: ten}
	return r
}

// TestMemoryFullFair: a full store makes room for a newcomer under its
// shares by evicting the least recently seen record of the heaviest
// holder: the tenant holding the most, then its principal holding the
// most; never a record of a holder no heavier than the newcomer, and a
// holder at its share is refused, not served by eviction.
func TestMemoryFullFair(t *testing.T) {
	clock := newFakeClock()
	var log expiredLog
	var evicted []string
	m := newMemory(t, session.MemoryOptions{MaxSessions: 10, MaxPerPrincipal: 4, MaxPerTenant: 6, Now: clock.Now, OnExpire: log.OnExpire,
		OnEvict: func(p session.Principal) { evicted = append(evicted, p.Subject) }})
	create := func(r *session.Record) {
		t.Helper()
		clock.Advance(time.Second)
		if err := m.Create(t.Context(), r); err != nil {
			t.Fatalf("Create(%s of %s/%s): %v", r.ID, r.Principal.Tenant, r.Principal.Subject, err)
		}
	}
	// Tenant acme: alice 4 (her share), bob 2 (the tenant's share, 6);
	// tenant globex: carol 3. One place left.
	for i := range 4 {
		create(recordOf("alice"+strconv.Itoa(i), "alice", "acme"))
	}
	create(recordOf("bob0", "bob", "acme"))
	create(recordOf("bob1", "bob", "acme"))
	for i := range 3 {
		create(recordOf("carol"+strconv.Itoa(i), "carol", "globex"))
	}
	var le *session.LimitError
	if err := m.Create(t.Context(), recordOf("alice4", "alice", "acme")); !errors.As(err, &le) || le.Limit != session.LimitMaxPerPrincipal || le.Max != 4 {
		t.Fatalf("alice over her share: %v, want max_per_principal (4)", err)
	}
	if err := m.Create(t.Context(), recordOf("bob2", "bob", "acme")); !errors.As(err, &le) || le.Limit != session.LimitMaxPerTenant || le.Max != 6 {
		t.Fatalf("bob over his tenant's share: %v, want max_per_tenant (6)", err)
	}
	if err := m.Delete(t.Context(), "bob1"); err != nil {
		t.Fatal(err)
	}
	create(recordOf("dave0", "dave", "initech"))
	create(recordOf("dave1", "dave", "initech")) // the last free place
	if len(log.IDs()) != 0 {
		t.Fatalf("evicted %v with room left", log.IDs())
	}
	// Full: acme 5 (alice 4, bob 1), globex 3, initech 2. alice's oldest
	// was just used: her next oldest goes, then the next.
	wantLive(t, m, "alice0")
	create(recordOf("erin0", "erin", "umbrella"))
	if diff := cmp.Diff([]string{"alice1"}, log.IDs()); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	create(recordOf("erin1", "erin", "umbrella"))
	if diff := cmp.Diff([]string{"alice1", "alice2"}, log.IDs()); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	// acme 3, globex 3: carol's tenant holds as much as the heaviest,
	// and carol the most in it: she takes from herself.
	create(recordOf("carol3", "carol", "globex"))
	if diff := cmp.Diff([]string{"alice1", "alice2", "carol0"}, log.IDs()); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	for _, id := range []string{"alice0", "alice3", "bob0", "carol1", "carol2", "carol3", "dave0", "dave1", "erin0", "erin1"} {
		wantLive(t, m, id)
	}
	if diff := cmp.Diff([]string{"alice", "alice", "carol"}, evicted); diff != "" {
		t.Errorf("OnEvict (-want +got):\n%s", diff)
	}
	if n := m.Len(); n != 10 {
		t.Errorf("Len = %d, want 10", n)
	}
}

func TestMemoryCreateReplacesExpired(t *testing.T) {
	clock := newFakeClock()
	var log expiredLog
	m := newMemory(t, session.MemoryOptions{IdleTTL: time.Hour, Now: clock.Now, OnExpire: log.OnExpire})
	mustCreate(t, m, "a")
	clock.Advance(time.Hour)

	r := newRecord("a")
	r.Principal.Subject = "bob"
	if err := m.Create(t.Context(), r); err != nil {
		t.Fatalf("Create over an expired record: %v", err)
	}
	if got := wantLive(t, m, "a").Principal.Subject; got != "bob" {
		t.Errorf("Principal.Subject = %q, want the new record's %q", got, "bob")
	}
	if diff := cmp.Diff([]string{"a"}, log.IDs()); diff != "" {
		t.Errorf("OnExpire ids mismatch (-want +got):\n%s", diff)
	}
	if n := m.Len(); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}
}

func TestMemoryCreateInvalid(t *testing.T) {
	m := newMemory(t, session.MemoryOptions{})
	for _, r := range []*session.Record{nil, {}} {
		if err := m.Create(t.Context(), r); err == nil {
			t.Errorf("Create(%+v) succeeded, want error", r)
		}
	}
	if n := m.Len(); n != 0 {
		t.Errorf("Len = %d, want 0", n)
	}
}

func TestMemoryClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		m := session.NewMemory(session.MemoryOptions{
			IdleTTL:  time.Minute,
			OnExpire: func(*session.Record) { calls.Add(1) },
		})
		mustCreate(t, m, "a")
		for range 2 {
			if err := m.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
		}
		// No sweeper after Close (synctest.Test would also fail on a
		// goroutine left running), but the store still works.
		time.Sleep(time.Hour)
		if n := calls.Load(); n != 0 {
			t.Errorf("OnExpire called %d times after Close", n)
		}
		wantGone(t, m, "a")
		mustCreate(t, m, "b")
		wantLive(t, m, "b")
	})
}

func BenchmarkMemoryGet(b *testing.B) {
	const n = 10_000
	m := session.NewMemory(session.MemoryOptions{})
	b.Cleanup(func() { m.Close() })
	ids := make([]string, n)
	for i := range ids {
		ids[i] = session.NewID()
		r := newRecord(ids[i])
		r.Upstreams["u"+strconv.Itoa(i%3)] = session.Upstream{SessionID: "s", Capabilities: json.RawMessage(`{"tools":{"listChanged":true}}`)}
		if err := m.Create(b.Context(), r); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := b.Context()
		i := next.Add(7919) // spread goroutines over the ids
		for pb.Next() {
			i++
			if _, err := m.Get(ctx, ids[i%n]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func TestMemoryMailbox(t *testing.T) {
	sessiontest.RunMailbox(t, func(t *testing.T) session.Mailbox {
		return newMemory(t, session.MemoryOptions{})
	})
}

func TestMemoryMailboxFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Minute
		m := newMemory(t, session.MemoryOptions{MaxSessions: 2})
		ctx := t.Context()
		post := func(key string) error { return m.Post(ctx, key, []byte("m"), ttl) }
		for _, key := range []string{"a", "b"} {
			if err := post(key); err != nil {
				t.Fatalf("Post(%q): %v", key, err)
			}
		}
		if err := post("c"); !errors.Is(err, session.ErrFull) {
			t.Fatalf("Post to a third mailbox with MaxSessions 2: got %v, want %v", err, session.ErrFull)
		}
		// Sessions and mailboxes are counted apart.
		mustCreate(t, m, "s1", "s2")

		// Emptying a mailbox makes room.
		if _, err := m.Take(ctx, "a", 0); err != nil {
			t.Fatal(err)
		}
		if err := post("c"); err != nil {
			t.Fatalf("Post after a Take emptied a mailbox: %v", err)
		}

		// A mailbox holds at most 64 messages.
		for i := 1; i < 64; i++ {
			if err := post("b"); err != nil {
				t.Fatalf("Post %d to b: %v", i+1, err)
			}
		}
		var le *session.LimitError
		if err := post("b"); !errors.As(err, &le) || le.Limit != "mailbox_messages" || le.Max != 64 {
			t.Fatalf("Post 65 to b: got %v, want a mailbox_messages (64) limit", err)
		}
		if _, err := m.Take(ctx, "b", 0); err != nil {
			t.Fatal(err)
		}
		if err := post("b"); err != nil {
			t.Fatalf("Post after a Take made room in b: %v", err)
		}

		// A Take waiting on a new key gets its message, full store or not:
		// Post hands it over without storing it.
		done := make(chan []byte)
		go func() {
			msg, err := m.Take(ctx, "d", time.Hour)
			if err != nil {
				t.Errorf("Take(d): %v", err)
			}
			done <- msg
		}()
		synctest.Wait()
		if err := m.Post(ctx, "d", []byte("handed"), ttl); err != nil {
			t.Fatalf("Post to a waiting Take in a full store: %v", err)
		}
		if msg := <-done; string(msg) != "handed" {
			t.Errorf("Take(d) = %q, want %q", msg, "handed")
		}

		// Expired mailboxes make room.
		time.Sleep(ttl)
		for _, key := range []string{"e", "f"} {
			if err := post(key); err != nil {
				t.Fatalf("Post(%q) after the others expired: %v", key, err)
			}
		}
	})
}

// TestMemoryMailboxExpiry checks expiry against MemoryOptions.Now: a
// mailbox is gone at exactly ttl after its last Post, sweeper or not.
func TestMemoryMailboxExpiry(t *testing.T) {
	clock := newFakeClock()
	m := newMemory(t, session.MemoryOptions{Now: clock.Now})
	ctx := t.Context()
	const ttl = time.Second
	if err := m.Post(ctx, "k", []byte("old"), ttl); err != nil {
		t.Fatal(err)
	}
	clock.Advance(ttl - time.Nanosecond)
	if err := m.Post(ctx, "k", []byte("new"), ttl); err != nil {
		t.Fatal(err)
	}
	clock.Advance(ttl - time.Nanosecond)
	if msg, err := m.Take(ctx, "k", 0); err != nil || string(msg) != "old" {
		t.Fatalf("Take just before expiry = %q, %v; want %q", msg, err, "old")
	}
	clock.Advance(time.Nanosecond)
	if msg, err := m.Take(ctx, "k", 0); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Take at expiry = %q, %v; want %v", msg, err, session.ErrNotFound)
	}
	// A Post to an expired mailbox starts it afresh.
	if err := m.Post(ctx, "j", []byte("stale"), ttl); err != nil {
		t.Fatal(err)
	}
	clock.Advance(ttl)
	if err := m.Post(ctx, "j", []byte("fresh"), ttl); err != nil {
		t.Fatal(err)
	}
	if msg, err := m.Take(ctx, "j", 0); err != nil || string(msg) != "fresh" {
		t.Fatalf("Take = %q, %v; want %q", msg, err, "fresh")
	}
}

// TestMemoryMailboxWaits runs long waits on the fake clock of a synctest
// bubble, which also checks that no Take leaves a goroutine behind.
func TestMemoryMailboxWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory(t, session.MemoryOptions{})
		ctx := t.Context()
		go func() {
			time.Sleep(59 * time.Minute)
			if err := m.Post(ctx, "k", []byte("late"), time.Minute); err != nil {
				t.Errorf("Post: %v", err)
			}
		}()
		start := time.Now()
		msg, err := m.Take(ctx, "k", time.Hour)
		if err != nil || string(msg) != "late" {
			t.Fatalf("Take = %q, %v; want %q", msg, err, "late")
		}
		if d := time.Since(start); d != 59*time.Minute {
			t.Errorf("Take returned after %v, want 59m", d)
		}

		// Many Takes give up, by timeout or cancellation; none keeps a
		// waiter that would swallow the next message.
		for i := range 100 {
			ctx, cancel := context.WithTimeout(ctx, time.Duration(i%7)*time.Second)
			if _, err := m.Take(ctx, "k", time.Duration(i%5)*time.Second); err == nil {
				t.Fatalf("Take %d returned a message", i)
			}
			cancel()
		}
		if err := m.Post(ctx, "k", []byte("next"), time.Minute); err != nil {
			t.Fatal(err)
		}
		if msg, err := m.Take(ctx, "k", 0); err != nil || string(msg) != "next" {
			t.Fatalf("Take = %q, %v; want %q", msg, err, "next")
		}
	})
}

func TestMemoryLimits(t *testing.T) {
	sessiontest.RunLimits(t, func(t *testing.T, perPrincipal, perTenant int) sessiontest.Limited {
		clock := newFakeClock()
		m := newMemory(t, session.MemoryOptions{
			IdleTTL: time.Minute, Now: clock.Now,
			MaxPerPrincipal: perPrincipal, MaxPerTenant: perTenant,
		})
		return sessiontest.Limited{Store: m, Expire: func(t *testing.T, ids ...string) {
			clock.Advance(time.Minute)
		}}
	})
}

func TestMemoryMailboxLimits(t *testing.T) {
	sessiontest.RunMailboxLimits(t, func(t *testing.T, messages int, bytes int64) session.Mailbox {
		return newMemory(t, session.MemoryOptions{MailboxMessages: messages, MailboxBytes: bytes})
	})
}

// TestMemoryInternReleased checks that the intern table holds only values
// that live records hold: records removed by Delete, by expiry and by a
// SetUpstream that replaced an entry take their values with them, and no
// refused call leaves one behind.
func TestMemoryInternReleased(t *testing.T) {
	synctest.Test(t, testMemoryInternReleased)
}

func testMemoryInternReleased(t *testing.T) {
	m := newMemory(t, session.MemoryOptions{IdleTTL: time.Minute, MaxPerPrincipal: 1000})
	ctx := t.Context()
	shared := json.RawMessage(`{"roots":{"listChanged":true}}`)
	var ids []string
	for i := range 200 {
		r := newRecord(strconv.Itoa(i))
		r.ClientInfo = json.RawMessage(`{"name":"client-` + strconv.Itoa(i) + `"}`)
		r.ClientCapabilities = shared
		mustCreate(t, m, r.ID)
		if err := m.Delete(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if err := m.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	// 200 client infos, the shared capabilities, and newRecord's values.
	if n := session.InternedLen(m); n < 201 || n > 210 {
		t.Fatalf("interned %d values, want about 201", n)
	}
	for _, id := range ids[:100] {
		if err := m.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// A refused Create and a conflicting SetUpstream keep nothing.
	r := newRecord(ids[100])
	r.ClientInfo = json.RawMessage(`{"name":"refused"}`)
	if err := m.Create(ctx, r); !errors.Is(err, session.ErrExists) {
		t.Fatalf("Create of a duplicate: %v", err)
	}
	if _, err := m.SetUpstream(ctx, ids[100], "up", "wrong", session.Upstream{Capabilities: json.RawMessage(`{"x":1}`)}); !errors.Is(err, session.ErrConflict) {
		t.Fatalf("SetUpstream: %v", err)
	}
	if _, err := m.SetUpstream(ctx, "unknown", "up", "", session.Upstream{Capabilities: json.RawMessage(`{"x":2}`)}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("SetUpstream: %v", err)
	}
	// A replaced upstream entry lets its capabilities go.
	for i := range 50 {
		caps := json.RawMessage(`{"tools":{"n":` + strconv.Itoa(i) + `}}`)
		if _, err := m.SetUpstream(ctx, ids[150], "up", "", session.Upstream{Capabilities: caps}); err != nil {
			t.Fatal(err)
		}
	}
	if n := session.InternedLen(m); n < 101 || n > 111 {
		t.Fatalf("interned %d values after deleting half the records, want about 101", n)
	}
	// Expired records go, with their values, when the sweeper removes
	// them.
	time.Sleep(time.Minute + time.Minute/2)
	synctest.Wait()
	if n := session.InternedLen(m); n != 0 {
		t.Fatalf("interned %d values after every record went, want 0", n)
	}
	if m.Len() != 0 {
		t.Fatalf("Len = %d, want 0", m.Len())
	}
}

// TestMemoryInternHeap creates and deletes records with distinct large
// client info and capabilities, as a client choosing them would, and
// checks that the heap comes back to where it was: the store keeps no copy
// of a value no record holds.
func TestMemoryInternHeap(t *testing.T) {
	m := newMemory(t, session.MemoryOptions{})
	ctx := t.Context()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	const n, size = 40, 1 << 20 // 40 MiB in, each value twice
	before := heap()
	var ids []string
	for i := range n {
		r := newRecord(strconv.Itoa(i))
		big := bytes.Repeat([]byte{'a' + byte(i%26)}, size)
		r.ClientInfo = json.RawMessage(fmt.Sprintf(`{"name":"%d","pad":"%s"}`, i, big))
		r.ClientCapabilities = json.RawMessage(fmt.Sprintf(`{"x-%d":"%s"}`, i, big))
		if err := m.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	// Many distinct small values, more than the table takes.
	for i := range 12_000 {
		r := newRecord("small-" + strconv.Itoa(i))
		r.ClientInfo = json.RawMessage(`{"name":"` + strconv.Itoa(i) + `"}`)
		if err := m.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if held := heap(); held < before+2*n*size {
		t.Fatalf("heap grew by %d bytes holding %d records; want at least %d (is the test measuring?)", held-before, len(ids), 2*n*size)
	}
	for _, id := range ids {
		if err := m.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := session.InternedLen(m); n != 0 {
		t.Errorf("interned %d values after every record was deleted, want 0", n)
	}
	const slack = 4 << 20 // the maps' buckets, which Go does not shrink
	if after := heap(); after > before+slack {
		t.Errorf("heap after deleting every record is %d bytes above where it started; want at most %d", after-before, slack)
	}
}

// TestMemoryMassExpiry expires many records at once: the sweeper reports
// them in bounded batches, without the store's lock (OnExpire may call the
// store), and Close stops it between batches and waits for the batch in
// progress.
func TestMemoryMassExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5000
		var (
			m        *session.Memory
			reported atomic.Int64
			started  = make(chan struct{})
			release  = make(chan struct{})
		)
		m = newMemory(t, session.MemoryOptions{
			IdleTTL: time.Minute,
			OnExpire: func(r *session.Record) {
				if reported.Add(1) == 1 {
					close(started)
					<-release
				}
				m.Len() // the lock is free
			},
		})
		for i := range n {
			mustCreate(t, m, strconv.Itoa(i))
		}
		time.Sleep(2 * time.Minute)
		<-started
		closed := make(chan struct{})
		go func() {
			m.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while OnExpire was running")
		default:
		}
		close(release)
		<-closed
		got := reported.Load()
		if got == 0 || got > 1024 {
			t.Errorf("OnExpire called %d times before Close returned, want one batch (1..1024)", got)
		}
		if l := m.Len(); l != n-int(got) {
			t.Errorf("Len after Close = %d, want %d (the records not reported stay until Create needs room)", l, n-int(got))
		}
	})
}
