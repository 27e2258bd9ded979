package session_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/testkit"
)

// eventLogs are the two logs under test, each made with the given limits.
// until(t, what, cond) waits for cond: on a fake clock moved on by 10ms a
// look for memory, polling on the real one for Redis, whose TTLs run on
// the server's clock.
type eventLogCase struct {
	name string
	make func(t *testing.T, lim session.EventLimits) (session.EventLog, untilFunc)
}

type untilFunc func(t *testing.T, what string, cond func() bool)

func eventLogCases() []eventLogCase {
	return []eventLogCase{
		{"memory", func(t *testing.T, lim session.EventLimits) (session.EventLog, untilFunc) {
			var mu sync.Mutex
			now := time.Now()
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			return session.NewMemoryEvents(lim, clock), func(t *testing.T, what string, cond func() bool) {
				t.Helper()
				for range 100_000 {
					if cond() {
						return
					}
					mu.Lock()
					now = now.Add(10 * time.Millisecond)
					mu.Unlock()
				}
				t.Fatalf("not within 1000s on the fake clock: %s", what)
			}
		}},
		{"redis", func(t *testing.T, lim session.EventLimits) (session.EventLog, untilFunc) {
			s := newRedisEnv(t).store(session.RedisOptions{})
			e := session.NewRedisEvents(s, lim)
			t.Cleanup(func() { e.Close() })
			return e, func(t *testing.T, what string, cond func() bool) {
				t.Helper()
				testkit.Eventually(t, 10*time.Second, cond, "%s", what)
			}
		}},
	}
}

func mustOpen(t *testing.T, log session.EventLog, sid, stream string) string {
	t.Helper()
	c, err := log.Open(context.Background(), testPrincipal, sid, stream, nil)
	if err != nil {
		t.Fatalf("Open(%s, %s): %v", sid, stream, err)
	}
	return c
}

func mustAppend(t *testing.T, log session.EventLog, sid, stream, data string, final bool) string {
	t.Helper()
	c, err := log.Append(context.Background(), sid, stream, []byte(data), final)
	if err != nil {
		t.Fatalf("Append(%s, %s): %v", sid, stream, err)
	}
	return c
}

func readAll(t *testing.T, log session.EventLog, sid, stream, after string) ([]string, error) {
	t.Helper()
	evs, err := log.Read(context.Background(), sid, stream, after, 0)
	var out []string
	for _, e := range evs {
		s := string(e.Data)
		if e.Final {
			s += "!"
		}
		out = append(out, s)
	}
	return out, err
}

// TestEventLog: what is appended is read back after any cursor, in order,
// final marked; unknown streams and cursors, another session's stream
// among them, are ErrNotFound.
func TestEventLog(t *testing.T) {
	for _, tc := range eventLogCases() {
		t.Run(tc.name, func(t *testing.T) {
			log, _ := tc.make(t, session.EventLimits{})
			sid, other := session.NewID(), session.NewID()
			start := mustOpen(t, log, sid, "p1")
			var cursors []string
			for i := range 3 {
				cursors = append(cursors, mustAppend(t, log, sid, "p1", "m"+strconv.Itoa(i), i == 2))
			}
			got, err := readAll(t, log, sid, "p1", start)
			if err != nil || strings.Join(got, ",") != "m0,m1,m2!" {
				t.Fatalf("Read after the first event: %q, %v", got, err)
			}
			got, err = readAll(t, log, sid, "p1", cursors[1])
			if err != nil || strings.Join(got, ",") != "m2!" {
				t.Fatalf("Read after the second: %q, %v", got, err)
			}
			if got, err := readAll(t, log, sid, "p1", cursors[2]); err != nil || len(got) != 0 {
				t.Fatalf("Read after the last: %q, %v", got, err)
			}
			for _, bad := range []struct{ sid, stream, cursor string }{
				{other, "p1", start},      // another session's
				{sid, "p2", start},        // no such stream
				{sid, "p1", "x"},          // malformed
				{sid, "p1", "99999999-0"}, // never held
				{sid, "p1", "99999999"},
				{sid, "P1", start},
			} {
				if _, err := log.Read(context.Background(), bad.sid, bad.stream, bad.cursor, 0); !errors.Is(err, session.ErrNotFound) {
					t.Errorf("Read(%v) = %v, want ErrNotFound", bad, err)
				}
			}
			if _, err := log.Append(context.Background(), other, "p1", []byte("x"), false); !errors.Is(err, session.ErrNotFound) {
				t.Errorf("Append to another session's stream: %v, want ErrNotFound", err)
			}
			// End drops the session's logs, and no other session's.
			o := mustOpen(t, log, other, "p1")
			if err := log.End(context.Background(), sid); err != nil {
				t.Fatal(err)
			}
			if _, err := log.Read(context.Background(), sid, "p1", start, 0); !errors.Is(err, session.ErrNotFound) {
				t.Errorf("Read of an ended session's log: %v, want ErrNotFound", err)
			}
			if _, err := log.Read(context.Background(), other, "p1", o, 0); err != nil {
				t.Errorf("Read of another session's log after End: %v", err)
			}
		})
	}
}

// TestEventLogBounds: a log keeps its last EventsPerStream events and
// BytesPerStream bytes; a cursor whose successors were dropped is
// ErrEventsGone, the last dropped one is still fine; an oversized event
// empties the log; a session keeps StreamsPerSession logs; a log expires
// TTL after its last event.
func TestEventLogBounds(t *testing.T) {
	for _, tc := range eventLogCases() {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			log, until := tc.make(t, session.EventLimits{EventsPerStream: 5, BytesPerStream: 100, StreamsPerSession: 2, TTL: 300 * time.Millisecond})
			sid := session.NewID()
			start := mustOpen(t, log, sid, "a")
			var cursors []string
			for i := range 20 {
				cursors = append(cursors, mustAppend(t, log, sid, "a", "e"+strconv.Itoa(i), false))
			}
			if _, err := log.Read(ctx, sid, "a", start, 0); !errors.Is(err, session.ErrEventsGone) {
				t.Fatalf("Read past the bound: %v, want ErrEventsGone", err)
			}
			if got, err := readAll(t, log, sid, "a", cursors[14]); err != nil || strings.Join(got, ",") != "e15,e16,e17,e18,e19" {
				t.Fatalf("Read after the last dropped: %q, %v", got, err)
			}
			// Bytes: 30-byte events, 100 bytes kept.
			for i := range 4 {
				cursors = append(cursors, mustAppend(t, log, sid, "a", strings.Repeat(strconv.Itoa(i), 30), false))
			}
			if got, err := readAll(t, log, sid, "a", cursors[20]); err != nil || len(got) != 3 {
				t.Fatalf("Read within the byte bound: %q, %v", got, err)
			}
			if _, err := log.Read(ctx, sid, "a", cursors[19], 0); !errors.Is(err, session.ErrEventsGone) {
				t.Fatalf("Read past the byte bound: %v, want ErrEventsGone", err)
			}
			big := mustAppend(t, log, sid, "a", strings.Repeat("x", 101), false)
			if _, err := log.Read(ctx, sid, "a", cursors[len(cursors)-1], 0); !errors.Is(err, session.ErrEventsGone) {
				t.Fatalf("Read before an oversized event: %v, want ErrEventsGone", err)
			}
			after := mustAppend(t, log, sid, "a", "small", true)
			if got, err := readAll(t, log, sid, "a", big); err != nil || strings.Join(got, ",") != "small!" {
				t.Fatalf("Read after an oversized event: %q, %v", got, err)
			}

			// Two logs per session: a third drops the oldest.
			b := mustOpen(t, log, sid, "b")
			c := mustOpen(t, log, sid, "c")
			if _, err := log.Read(ctx, sid, "a", after, 0); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("the session's oldest log: %v, want ErrNotFound", err)
			}
			if _, err := log.Read(ctx, sid, "b", b, 0); err != nil {
				t.Fatalf("log b: %v", err)
			}

			// TTL: refreshed by Append, then expired. c is written to until a
			// log opened after b and c, in another session, has expired: b,
			// idle since, has too; c has not.
			other := session.NewID()
			sentinel := mustOpen(t, log, other, "s")
			last := c
			until(t, "a log idle for its TTL expires", func() bool {
				last = mustAppend(t, log, sid, "c", "keep", false)
				_, err := log.Read(ctx, other, "s", sentinel, 0)
				return errors.Is(err, session.ErrNotFound)
			})
			if got, err := readAll(t, log, sid, "c", last); err != nil || len(got) != 0 {
				t.Fatalf("log c after Appends refreshed it: %q, %v", got, err)
			}
			if _, err := log.Read(ctx, sid, "b", b, 0); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("expired log b: %v, want ErrNotFound", err)
			}
			if _, err := log.Append(ctx, sid, "b", []byte("x"), false); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("Append to expired log b: %v, want ErrNotFound", err)
			}
			// Touch keeps a log that sends nothing (an idle GET stream): d
			// outlives a log opened after it.
			d := mustOpen(t, log, sid, "d")
			other = session.NewID()
			sentinel = mustOpen(t, log, other, "s")
			until(t, "a log idle for its TTL expires", func() bool {
				if err := log.Touch(ctx, sid, "d"); err != nil {
					t.Fatal(err)
				}
				_, err := log.Read(ctx, other, "s", sentinel, 0)
				return errors.Is(err, session.ErrNotFound)
			})
			if _, err := log.Read(ctx, sid, "d", d, 0); err != nil {
				t.Fatalf("a touched log: %v", err)
			}
		})
	}
}

// TestEventLogWait: a Read with a wait returns the event appended
// meanwhile, and an empty result when none comes.
func TestEventLogWait(t *testing.T) {
	// reading waits until the Read is waiting.
	test := func(t *testing.T, log session.EventLog, reading func()) {
		sid := session.NewID()
		start := mustOpen(t, log, sid, "w")
		t0 := time.Now()
		if evs, err := log.Read(context.Background(), sid, "w", start, 100*time.Millisecond); err != nil || len(evs) != 0 || time.Since(t0) < 90*time.Millisecond {
			t.Fatalf("Read with nothing to read: %v, %v after %v", evs, err, time.Since(t0))
		}
		appended := make(chan struct{})
		go func() {
			defer close(appended)
			reading()
			_, _ = log.Append(context.Background(), sid, "w", []byte("late"), true)
		}()
		evs, err := log.Read(context.Background(), sid, "w", start, 5*time.Second)
		<-appended
		if err != nil || len(evs) != 1 || string(evs[0].Data) != "late" || !evs[0].Final {
			t.Fatalf("Read while waiting: %v, %v", evs, err)
		}
	}
	t.Run("memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// synctest.Wait returns once the Read blocks in its select.
			test(t, session.NewMemoryEvents(session.EventLimits{}, nil), synctest.Wait)
		})
	})
	t.Run("redis", func(t *testing.T) {
		e := newRedisEnv(t)
		log := session.NewRedisEvents(e.store(session.RedisOptions{}), session.EventLimits{})
		t.Cleanup(func() { log.Close() })
		blocked, err := e.blockedClients("xread")
		if err != nil {
			t.Fatalf("CLIENT LIST: %v", err)
		}
		test(t, log, func() { e.waitBlocked(t, "xread", blocked) })
	})
}

// testPrincipal is the principal of the sessions whose logs the tests
// open, unless they say otherwise.
var testPrincipal = session.Principal{Issuer: "https://issuer.example", Subject: "alice", Tenant: "acme"}

// TestMemoryEventsFlood: one stream flooded holds at most its bounds; one
// principal opening streams and filling them without end holds at most
// its shares of the store's streams and bytes, losing its own least
// recently written logs first.
func TestMemoryEventsFlood(t *testing.T) {
	ctx := context.Background()
	log := session.NewMemoryEvents(session.EventLimits{EventsPerStream: 100, BytesPerStream: 64 << 10, MaxStreams: 50, MaxBytes: 1 << 20}, nil)
	sid := session.NewID()
	mustOpen(t, log, sid, "f")
	msg := strings.Repeat("n", 1000)
	for range 10_000 {
		mustAppend(t, log, sid, "f", msg, false)
	}
	if b := log.Bytes(); b > 64<<10 {
		t.Fatalf("one flooded stream holds %d bytes, bound 64 KiB", b)
	}
	// Streams: at most 5 (a tenth of 50); bytes: at most 1 MiB/10.
	type stream struct{ sid, name string }
	var opened []stream
	for i := range 200 {
		st := stream{session.NewID(), "s" + strconv.Itoa(i)}
		if _, err := log.Open(ctx, testPrincipal, st.sid, st.name, nil); err != nil {
			t.Fatalf("Open within a principal's share: %v", err)
		}
		opened = append(opened, st)
	}
	if n := log.Len(); n != 5 {
		t.Fatalf("one principal opening streams without end holds %d logs, want its share, 5", n)
	}
	for _, st := range opened[:195] {
		if _, err := log.Read(ctx, st.sid, st.name, "1", 0); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("an old log of the principal: Read = %v, want it dropped", err)
		}
	}
	for _, st := range opened[195:] {
		for range 64 {
			mustAppend(t, log, st.sid, st.name, msg, false)
		}
		if b := log.Bytes(); b > (1<<20)/10 {
			t.Fatalf("one principal's logs hold %d bytes, share %d", b, (1<<20)/10)
		}
	}
	// The most recently written log is whole: its 64 events fit its bounds.
	last := opened[len(opened)-1]
	if evs, err := log.Read(ctx, last.sid, last.name, "1", 0); err != nil || len(evs) != 64 {
		t.Fatalf("the last log: %d events, %v; want 64", len(evs), err)
	}
}

// TestMemoryEventsShares: a principal over its share of streams or bytes
// loses its own least recently written logs, never another's; a full
// store takes from the heaviest holder (the tenant holding the most).
func TestMemoryEventsShares(t *testing.T) {
	ctx := context.Background()
	log := session.NewMemoryEvents(session.EventLimits{
		BytesPerStream: 4000, MaxStreams: 10, MaxBytes: 10_000,
		MaxStreamsPerPrincipal: 4, MaxStreamsPerTenant: 6, MaxBytesPerPrincipal: 4000, MaxBytesPerTenant: 6000,
	}, nil)
	who := func(sub, tenant string) session.Principal {
		return session.Principal{Issuer: "https://issuer.example", Subject: sub, Tenant: tenant}
	}
	alice, bob, carol, dave, erin, frank := who("alice", "acme"), who("bob", "globex"), who("carol", "initech"), who("dave", "umbrella"), who("erin", "x"), who("frank", "y")
	sids := map[string]string{}
	open := func(p session.Principal, stream string) {
		t.Helper()
		sid := sids[p.Subject]
		if sid == "" {
			sid = session.NewID()
			sids[p.Subject] = sid
		}
		if _, err := log.Open(ctx, p, sid, stream, nil); err != nil {
			t.Fatalf("Open(%s, %s): %v", p.Subject, stream, err)
		}
	}
	write := func(p session.Principal, stream string, n int) {
		t.Helper()
		mustAppend(t, log, sids[p.Subject], stream, strings.Repeat("x", n), false)
	}
	kept := func(p session.Principal, stream string) bool {
		t.Helper()
		_, err := log.Read(ctx, sids[p.Subject], stream, "1", 0)
		if err != nil && !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("Read(%s, %s): %v", p.Subject, stream, err)
		}
		return err == nil
	}
	want := func(p session.Principal, keptStreams, goneStreams string) {
		t.Helper()
		for _, st := range strings.Fields(keptStreams) {
			if !kept(p, st) {
				t.Errorf("%s's log %s was dropped", p.Subject, st)
			}
		}
		for _, st := range strings.Fields(goneStreams) {
			if kept(p, st) {
				t.Errorf("%s's log %s is kept, want it dropped", p.Subject, st)
			}
		}
	}

	open(bob, "b1")
	write(bob, "b1", 1000)
	// alice opens ten logs (one session, at most four kept) and writes
	// 1000 bytes in each: she keeps four logs and 4000 bytes, her last.
	for i := range 10 {
		st := "a" + strconv.Itoa(i)
		open(alice, st)
		write(alice, st, 1000)
	}
	want(alice, "a6 a7 a8 a9", "a0 a1 a2 a3 a4 a5")
	want(bob, "b1", "")
	// Over her share of bytes: her own oldest goes.
	write(alice, "a6", 1000) // a6 is now her most recently written
	want(alice, "a6 a8 a9", "a7")

	// The store's bytes: alice 4000, bob 1000, carol 3000, dave 2000.
	open(carol, "c0")
	write(carol, "c0", 1500)
	open(carol, "c1")
	write(carol, "c1", 1500)
	open(dave, "d0")
	write(dave, "d0", 1000)
	write(dave, "d0", 1000)
	if b := log.Bytes(); b != 10_000 {
		t.Fatalf("Bytes = %d, want 10000", b)
	}
	// One more byte: acme, the heaviest, loses alice's oldest, a8.
	write(dave, "d0", 1)
	want(alice, "a6 a9", "a8")
	want(bob, "b1", "")
	want(carol, "c0 c1", "")
	want(dave, "d0", "")

	// The store's streams: alice 2, bob 1, carol 2, dave 1, erin 3,
	// frank 1: 10. frank's next takes from erin's tenant, the heaviest.
	open(erin, "e0")
	open(erin, "e1")
	open(erin, "e2")
	open(frank, "f0")
	if n := log.Len(); n != 10 {
		t.Fatalf("Len = %d, want 10", n)
	}
	open(frank, "f1")
	want(erin, "e1 e2", "e0")
	// erin at as many as the heaviest (acme 2, initech 2, x 2): her own.
	open(erin, "e3")
	want(erin, "e2 e3", "e1")
	want(alice, "a6 a9", "")
	want(bob, "b1", "")
	want(carol, "c0 c1", "")
	want(frank, "f0 f1", "")
}

// TestRedisEventsFlood: an upstream flooding one stream leaves at most
// EventsPerStream entries and BytesPerStream bytes in Redis.
func TestRedisEventsFlood(t *testing.T) {
	env := newRedisEnv(t)
	log := session.NewRedisEvents(env.store(session.RedisOptions{}), session.EventLimits{EventsPerStream: 100, BytesPerStream: 32 << 10})
	defer log.Close()
	sid := session.NewID()
	mustOpen(t, log, sid, "f")
	msg := strings.Repeat("n", 1000)
	for range 2000 {
		mustAppend(t, log, sid, "f", msg, false)
	}
	key := env.key(sid) + ":ev:f"
	n, err := env.raw.XLen(context.Background(), key).Result()
	if err != nil || n > 32 {
		t.Fatalf("XLEN %s = %d, %v; want at most 32 (32 KiB of 1 KB events)", key, n, err)
	}
	used, err := env.raw.MemoryUsage(context.Background(), key).Result()
	if err != nil || used > 128<<10 {
		t.Fatalf("MEMORY USAGE %s = %d, %v; want under 128 KiB", key, used, err)
	}
	if ttl := env.raw.PTTL(context.Background(), key).Val(); ttl <= 0 || ttl > session.DefaultEventTTL {
		t.Fatalf("PTTL %s = %v", key, ttl)
	}
	// Many small events: the event bound.
	mustOpen(t, log, sid, "g")
	for range 500 {
		mustAppend(t, log, sid, "g", "x", false)
	}
	if n := env.raw.XLen(context.Background(), env.key(sid)+":ev:g").Val(); n != 100 {
		t.Fatalf("XLEN of a stream flooded with small events = %d, want 100", n)
	}
}

// TestEventLogLease: a call's stream whose writer stops appending and
// touching is reported lost to a reader waiting at its end, with the
// owner given to Open; one that ended is not; Touch keeps it alive.
func TestEventLogLease(t *testing.T) {
	for _, tc := range eventLogCases() {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			log, until := tc.make(t, session.EventLimits{Lease: 300 * time.Millisecond})
			sid := session.NewID()
			if _, err := log.Open(ctx, testPrincipal, sid, "c", []byte(`"req-7"`)); err != nil {
				t.Fatal(err)
			}
			c := mustAppend(t, log, sid, "c", "progress", false)
			// lostAfter opens a call's stream, written to after everything
			// before, and returns a cond that holds once its writer is lost.
			lostAfter := func() func() bool {
				other := session.NewID()
				if _, err := log.Open(ctx, testPrincipal, other, "s", []byte("0")); err != nil {
					t.Fatal(err)
				}
				cur := mustAppend(t, log, other, "s", "progress", false)
				return func() bool {
					evs, err := log.Read(ctx, other, "s", cur, 0)
					return err == nil && len(evs) == 1 && evs[0].Lost
				}
			}
			// Touched, c outlives a call written to after it.
			otherLost := lostAfter()
			until(t, "a call left alone is lost", func() bool {
				if err := log.Touch(ctx, sid, "c"); err != nil {
					t.Fatal(err)
				}
				return otherLost()
			})
			if evs, err := log.Read(ctx, sid, "c", c, 0); err != nil || len(evs) != 0 {
				t.Fatalf("Read of a live call: %v, %v", evs, err)
			}
			// Left alone, it is lost.
			var (
				evs []session.Event
				err error
			)
			until(t, "the call is lost", func() bool {
				evs, err = log.Read(ctx, sid, "c", c, 0)
				return err != nil || len(evs) != 0
			})
			if err != nil || len(evs) != 1 || !evs[0].Lost || !evs[0].Final || string(evs[0].Data) != `"req-7"` {
				t.Fatalf("Read of a lost call: %+v, %v", evs, err)
			}
			// Ended: never lost. Without an owner: never lost. Both outlive
			// a call written to after them.
			if _, err := log.Open(ctx, testPrincipal, sid, "d", []byte("1")); err != nil {
				t.Fatal(err)
			}
			end := mustAppend(t, log, sid, "d", "result", true)
			g := mustOpen(t, log, sid, "g")
			until(t, "a call left alone is lost", lostAfter())
			if evs, err := log.Read(ctx, sid, "d", end, 0); err != nil || len(evs) != 0 {
				t.Fatalf("Read after a final event: %v, %v", evs, err)
			}
			if evs, err := log.Read(ctx, sid, "g", g, 0); err != nil || len(evs) != 0 {
				t.Fatalf("Read of a stream without an owner: %v, %v", evs, err)
			}
		})
	}
}
