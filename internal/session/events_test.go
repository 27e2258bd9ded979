package session_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/session"
)

// eventLogs are the two logs under test, each made with the given limits.
// sleep lets time pass for a log's TTL (a fake clock for memory, real
// time for Redis).
type eventLogCase struct {
	name string
	make func(t *testing.T, lim session.EventLimits) (session.EventLog, func(time.Duration))
}

func eventLogCases() []eventLogCase {
	return []eventLogCase{
		{"memory", func(t *testing.T, lim session.EventLimits) (session.EventLog, func(time.Duration)) {
			var mu sync.Mutex
			now := time.Now()
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			return session.NewMemoryEvents(lim, clock), func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
		}},
		{"redis", func(t *testing.T, lim session.EventLimits) (session.EventLog, func(time.Duration)) {
			s := newRedisEnv(t).store(session.RedisOptions{})
			e := session.NewRedisEvents(s, lim)
			t.Cleanup(func() { e.Close() })
			return e, time.Sleep
		}},
	}
}

func mustOpen(t *testing.T, log session.EventLog, sid, stream string) string {
	t.Helper()
	c, err := log.Open(context.Background(), sid, stream, nil)
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
			log, sleep := tc.make(t, session.EventLimits{EventsPerStream: 5, BytesPerStream: 100, StreamsPerSession: 2, TTL: 300 * time.Millisecond})
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

			// TTL: refreshed by Append, then expired.
			sleep(200 * time.Millisecond)
			mustAppend(t, log, sid, "c", "keep", false)
			sleep(200 * time.Millisecond)
			if got, err := readAll(t, log, sid, "c", c); err != nil || len(got) != 1 {
				t.Fatalf("log c after an Append refreshed it: %q, %v", got, err)
			}
			if _, err := log.Read(ctx, sid, "b", b, 0); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("expired log b: %v, want ErrNotFound", err)
			}
			if _, err := log.Append(ctx, sid, "b", []byte("x"), false); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("Append to expired log b: %v, want ErrNotFound", err)
			}
			// Touch keeps a log that sends nothing (an idle GET stream).
			d := mustOpen(t, log, sid, "d")
			sleep(200 * time.Millisecond)
			if err := log.Touch(ctx, sid, "d"); err != nil {
				t.Fatal(err)
			}
			sleep(200 * time.Millisecond)
			if _, err := log.Read(ctx, sid, "d", d, 0); err != nil {
				t.Fatalf("a touched log: %v", err)
			}
		})
	}
}

// TestEventLogWait: a Read with a wait returns the event appended
// meanwhile, and an empty result when none comes.
func TestEventLogWait(t *testing.T) {
	for _, tc := range eventLogCases() {
		t.Run(tc.name, func(t *testing.T) {
			log, _ := tc.make(t, session.EventLimits{})
			sid := session.NewID()
			start := mustOpen(t, log, sid, "w")
			t0 := time.Now()
			if evs, err := log.Read(context.Background(), sid, "w", start, 100*time.Millisecond); err != nil || len(evs) != 0 || time.Since(t0) < 90*time.Millisecond {
				t.Fatalf("Read with nothing to read: %v, %v after %v", evs, err, time.Since(t0))
			}
			go func() {
				time.Sleep(100 * time.Millisecond)
				_, _ = log.Append(context.Background(), sid, "w", []byte("late"), true)
			}()
			evs, err := log.Read(context.Background(), sid, "w", start, 5*time.Second)
			if err != nil || len(evs) != 1 || string(evs[0].Data) != "late" || !evs[0].Final {
				t.Fatalf("Read while waiting: %v, %v", evs, err)
			}
		})
	}
}

// TestMemoryEventsFlood: an upstream that floods one stream, or a caller
// opening streams without end, holds no more than the bounds allow.
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
	// Streams: at most 50, then ErrFull; bytes: at most 1 MiB, then the
	// log that would pass it is dropped.
	var full error
	type stream struct{ sid, name string }
	var opened []stream
	for i := range 200 {
		st := stream{session.NewID(), "s" + strconv.Itoa(i)}
		if _, err := log.Open(ctx, st.sid, st.name, nil); err != nil {
			full = err
			break
		}
		opened = append(opened, st)
	}
	if !errors.Is(full, session.ErrFull) || log.Len() != 50 {
		t.Fatalf("opening streams without end: %v with %d logs, want ErrFull at 50", full, log.Len())
	}
	refused := 0
	for _, st := range opened {
		for range 64 {
			if _, err := log.Append(ctx, st.sid, st.name, []byte(msg), false); err != nil {
				if !errors.Is(err, session.ErrFull) {
					t.Fatalf("Append: %v", err)
				}
				refused++
				break
			}
		}
	}
	if b := log.Bytes(); refused == 0 || b > 1<<20 {
		t.Fatalf("the log holds %d bytes (%d logs dropped), bound 1 MiB", b, refused)
	}
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
			log, sleep := tc.make(t, session.EventLimits{Lease: 300 * time.Millisecond})
			sid := session.NewID()
			if _, err := log.Open(ctx, sid, "c", []byte(`"req-7"`)); err != nil {
				t.Fatal(err)
			}
			c := mustAppend(t, log, sid, "c", "progress", false)
			sleep(200 * time.Millisecond)
			if err := log.Touch(ctx, sid, "c"); err != nil {
				t.Fatal(err)
			}
			sleep(200 * time.Millisecond)
			if evs, err := log.Read(ctx, sid, "c", c, 0); err != nil || len(evs) != 0 {
				t.Fatalf("Read of a live call: %v, %v", evs, err)
			}
			sleep(200 * time.Millisecond)
			evs, err := log.Read(ctx, sid, "c", c, 0)
			if err != nil || len(evs) != 1 || !evs[0].Lost || !evs[0].Final || string(evs[0].Data) != `"req-7"` {
				t.Fatalf("Read of a lost call: %+v, %v", evs, err)
			}
			// Ended: never lost. Without an owner: never lost.
			if _, err := log.Open(ctx, sid, "d", []byte("1")); err != nil {
				t.Fatal(err)
			}
			end := mustAppend(t, log, sid, "d", "result", true)
			g := mustOpen(t, log, sid, "g")
			sleep(400 * time.Millisecond)
			if evs, err := log.Read(ctx, sid, "d", end, 0); err != nil || len(evs) != 0 {
				t.Fatalf("Read after a final event: %v, %v", evs, err)
			}
			if evs, err := log.Read(ctx, sid, "g", g, 0); err != nil || len(evs) != 0 {
				t.Fatalf("Read of a stream without an owner: %v, %v", evs, err)
			}
		})
	}
}
