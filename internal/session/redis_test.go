package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/session/sessiontest"
	"github.com/mcpgw/gateway/internal/testkit"
)

// testRedisAddr is where the tests expect a real Redis; .ci/run starts one
// there. The tests fail, not skip, without it.
const testRedisAddr = "127.0.0.1:6379"

// redisEnv is one test's corner of the test Redis: a key prefix of its own,
// whose keys are deleted when the test ends, and a plain client to look at
// them.
type redisEnv struct {
	tb     testing.TB
	raw    *redis.Client
	prefix string
}

func newRedisEnv(tb testing.TB) *redisEnv {
	tb.Helper()
	raw := redis.NewClient(&redis.Options{Addr: testRedisAddr, DialTimeout: 2 * time.Second})
	tb.Cleanup(func() { raw.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := raw.Ping(ctx).Err(); err != nil {
		tb.Fatalf("Redis at %s does not answer: %v\n"+
			"The Redis session store tests need a real Redis there (.ci/run starts one: "+
			"redis-server --bind 127.0.0.1 --port 6379 --save '' --appendonly no).", testRedisAddr, err)
	}
	e := &redisEnv{tb: tb, raw: raw, prefix: "mcpgw-test-" + session.NewID()[:16] + ":"}
	tb.Cleanup(e.deleteKeys)
	return e
}

// store returns a new store under e's prefix; stores from one env share
// their records like replicas of one gateway.
func (e *redisEnv) store(opts session.RedisOptions) *session.Redis {
	e.tb.Helper()
	s, err := session.NewRedis(config.Redis{
		Addrs:     []string{testRedisAddr},
		KeyPrefix: e.prefix,
		Timeout:   config.Duration(2 * time.Second), // generous: -race on a busy machine
	}, opts)
	if err != nil {
		e.tb.Fatalf("NewRedis: %v", err)
	}
	e.tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			e.tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// key is the documented key of session id.
func (e *redisEnv) key(id string) string { return e.prefix + "session:{" + id + "}" }

// waitExpired waits until Redis has expired the sessions with these ids,
// on its own clock: EXISTS neither refreshes a key nor keeps it alive.
func (e *redisEnv) waitExpired(t *testing.T, ids ...string) {
	t.Helper()
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = e.key(id)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		n, err := e.raw.Exists(context.Background(), keys...).Result()
		return err == nil && n == 0
	}, "sessions %q have not expired", ids)
}

// blockedClients returns the ids of the Redis clients blocked in command
// cmd (blpop, xread) now: other tests' too, as the test Redis is shared.
func (e *redisEnv) blockedClients(cmd string) (map[string]bool, error) {
	list, err := e.raw.ClientList(context.Background()).Result()
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for line := range strings.Lines(list) {
		var id string
		var blocked, inCmd bool
		for f := range strings.FieldsSeq(line) {
			switch {
			case strings.HasPrefix(f, "id="):
				id = f[len("id="):]
			case strings.HasPrefix(f, "flags="):
				blocked = strings.Contains(f[len("flags="):], "b")
			case f == "cmd="+cmd:
				inCmd = true
			}
		}
		if blocked && inCmd {
			ids[id] = true
		}
	}
	return ids, nil
}

// waitBlocked waits until a client that was not blocked before blocks in
// command cmd: a Take (blpop) or a Read (xread) waiting. It may be another
// test's; then the wait ends early, which the tests that use it tolerate
// (they only lose the wait they meant to cover). It may run outside the
// test's goroutine.
func (e *redisEnv) waitBlocked(t testing.TB, cmd string, before map[string]bool) {
	if !testkit.Poll(10*time.Second, func() bool {
		ids, _ := e.blockedClients(cmd) // an error: none seen, polled again
		for id := range ids {
			if !before[id] {
				return true
			}
		}
		return false
	}) {
		t.Errorf("no client blocked in %s within 10s", cmd)
	}
}

func (e *redisEnv) pttl(id string) time.Duration {
	e.tb.Helper()
	d, err := e.raw.PTTL(context.Background(), e.key(id)).Result()
	if err != nil {
		e.tb.Fatalf("PTTL: %v", err)
	}
	return d
}

func (e *redisEnv) pexpire(id string, d time.Duration) {
	e.tb.Helper()
	if ok, err := e.raw.PExpire(context.Background(), e.key(id), d).Result(); err != nil || !ok {
		e.tb.Fatalf("PEXPIRE %s: %v, %v", e.key(id), ok, err)
	}
}

func (e *redisEnv) deleteKeys() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	iter := e.raw.Scan(ctx, 0, e.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		e.tb.Errorf("cleanup: SCAN %s*: %v", e.prefix, err)
		return
	}
	for chunk := range slices.Chunk(keys, 500) {
		if err := e.raw.Del(ctx, chunk...).Err(); err != nil {
			e.tb.Errorf("cleanup: DEL: %v", err)
			return
		}
	}
}

func TestRedis(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) session.Store {
		return newRedisEnv(t).store(session.RedisOptions{IdleTTL: time.Hour})
	})
}

func newRedisRecord() *session.Record {
	return &session.Record{
		ID:                 session.NewID(),
		ProtocolVersion:    "2025-06-18",
		ClientInfo:         json.RawMessage(`{"name":"c","version":"1"}`),
		ClientCapabilities: json.RawMessage(`{}`),
		Principal:          session.Principal{Issuer: "https://issuer.example", Subject: "alice", Tenant: "acme"},
		Upstreams: map[string]session.Upstream{
			"github":    {SessionID: "gh-1", Capabilities: json.RawMessage(`{"tools":{}}`)},
			"stateless": {ProtocolVersion: "2025-06-18"},
		},
		Created: time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC),
	}
}

// TestRedisLayout pins the layout the Redis doc comment promises operators.
func TestRedisLayout(t *testing.T) {
	e := newRedisEnv(t)
	s := e.store(session.RedisOptions{IdleTTL: time.Minute})
	r := newRedisRecord()
	if err := s.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if typ := e.raw.Type(ctx, e.key(r.ID)).Val(); typ != "hash" {
		t.Fatalf("TYPE %s = %q, want hash", e.key(r.ID), typ)
	}
	fields, err := e.raw.HGetAll(ctx, e.key(r.ID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for f := range fields {
		names = append(names, f)
	}
	slices.Sort(names)
	want := []string{"meta", "sid:github", "sid:stateless", "up:github", "up:stateless"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("hash fields mismatch (-want +got):\n%s", diff)
	}
	if got := fields["sid:github"]; got != "gh-1" {
		t.Errorf("sid:github = %q, want gh-1", got)
	}
	if got := fields["up:github"]; got != `{"session_id":"gh-1","capabilities":{"tools":{}}}` {
		t.Errorf("up:github = %s", got)
	}
	if ttl := e.pttl(r.ID); ttl <= 59*time.Second || ttl > time.Minute {
		t.Errorf("PTTL after Create = %v, want just under 1m", ttl)
	}
}

func TestRedisIdleExpiry(t *testing.T) {
	const ttl = 300 * time.Millisecond
	e := newRedisEnv(t)
	s := e.store(session.RedisOptions{IdleTTL: ttl})
	r := newRedisRecord()
	if err := s.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), r.ID); err != nil {
		t.Fatalf("Get before expiry: %v", err)
	}
	// Redis expires the key on its own clock; EXISTS, unlike Get, does not
	// refresh it.
	e.waitExpired(t, r.ID)
	if _, err := s.Get(t.Context(), r.ID); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Get after IdleTTL: got %v, want %v", err, session.ErrNotFound)
	}
	if _, err := s.SetUpstream(t.Context(), r.ID, "x", "", session.Upstream{SessionID: "x"}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("SetUpstream after IdleTTL: got %v, want %v", err, session.ErrNotFound)
	}
	if n := e.raw.Exists(t.Context(), e.key(r.ID)).Val(); n != 0 {
		t.Errorf("key still exists after IdleTTL (SetUpstream recreated it?)")
	}
	// The id is free again.
	if err := s.Create(t.Context(), r); err != nil {
		t.Errorf("Create after expiry: %v", err)
	}
}

// TestRedisTTL checks which calls reset the idle expiry, by moving the key's
// TTL with PEXPIRE instead of waiting.
func TestRedisTTL(t *testing.T) {
	const ttl = time.Minute
	e := newRedisEnv(t)
	s := e.store(session.RedisOptions{IdleTTL: ttl})
	r := newRedisRecord()
	if err := s.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}

	e.pexpire(r.ID, time.Second)
	if _, err := s.Get(t.Context(), r.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.pttl(r.ID); got <= ttl-5*time.Second {
		t.Errorf("PTTL after Get = %v, want about %v (Get refreshes it)", got, ttl)
	}

	const left = 30 * time.Second
	e.pexpire(r.ID, left)
	if _, err := s.SetUpstream(t.Context(), r.ID, "github", "gh-1", session.Upstream{SessionID: "gh-2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetUpstream(t.Context(), r.ID, "github", "wrong", session.Upstream{SessionID: "gh-3"}); !errors.Is(err, session.ErrConflict) {
		t.Fatalf("SetUpstream with wrong prev: got %v, want %v", err, session.ErrConflict)
	}
	if got := e.pttl(r.ID); got > left || got <= left-5*time.Second {
		t.Errorf("PTTL after SetUpstream = %v, want at most %v and close to it (SetUpstream keeps it)", got, left)
	}
}

// TestRedisSetUpstreamReplicas races SetUpstream through two stores, as two
// gateway replicas would: exactly one write wins each race.
func TestRedisSetUpstreamReplicas(t *testing.T) {
	e := newRedisEnv(t)
	replicas := []*session.Redis{
		e.store(session.RedisOptions{IdleTTL: time.Minute}),
		e.store(session.RedisOptions{IdleTTL: time.Minute}),
	}
	const rounds, racers = 50, 8
	for round := range rounds {
		r := newRedisRecord()
		if err := replicas[0].Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		type result struct {
			tried, ret session.Upstream
			err        error
		}
		results := make([]result, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				u := session.Upstream{SessionID: fmt.Sprintf("r%d-%d", i%2, i), Capabilities: json.RawMessage(`{"i":` + fmt.Sprint(i) + `}`)}
				<-start
				ret, err := replicas[i%2].SetUpstream(t.Context(), r.ID, "racy", "", u)
				results[i] = result{u, ret, err}
			})
		}
		close(start)
		wg.Wait()

		var winners []session.Upstream
		for _, res := range results {
			switch {
			case res.err == nil:
				winners = append(winners, res.tried)
			case !errors.Is(res.err, session.ErrConflict):
				t.Fatalf("round %d: SetUpstream(%q): %v", round, res.tried.SessionID, res.err)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d SetUpstream calls succeeded, want 1: %v", round, len(winners), winners)
		}
		for _, res := range results {
			if res.err != nil {
				if diff := cmp.Diff(winners[0], res.ret); diff != "" {
					t.Errorf("round %d: loser %q saw current entry mismatch (-want +got):\n%s", round, res.tried.SessionID, diff)
				}
			}
		}
		for i, s := range replicas {
			got, err := s.Get(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(winners[0], got.Upstreams["racy"]); diff != "" {
				t.Errorf("round %d: replica %d stored entry mismatch (-want +got):\n%s", round, i, diff)
			}
		}
	}
}

// TestRedisRawJSON checks that the raw JSON in a record comes back byte for
// byte, through another replica, including what Lua's cjson would mangle.
func TestRedisRawJSON(t *testing.T) {
	tests := []struct {
		name string
		raw  string
	}{
		{"empty object", `{}`},
		{"empty array", `[]`},
		{"nested empties", `{"a":{},"b":[],"c":[{},[],{"d":{}}],"e":{"f":{"g":[]}}}`},
		{"big numbers", `{"u64":12345678901234567890,"neg":-98765432109876543210,"exp":1.5e+300,"E":2E-7,"frac":0.10000000000000001,"one":1.0,"negzero":-0}`},
		{"big number alone", `12345678901234567890`},
		{"unicode", `{"name":"Grüße, 世界 😀","escaped":"\u00e9\ud83d\ude00","raw_ls":"a` + "\u2028" + `b` + "\u2029" + `c"}`},
		{"html", `{"html":"<b>Tom & Jerry</b>","esc":"\u003c\u0026"}`},
		{"escapes", `{"q":"\"x\"","bs":"\\","nl":"\n","ctl":"\u0001","slash":"\/"}`},
		{"member order and duplicates", `{"z":1,"a":2,"z":3,"m":{"y":true,"b":false,"n":null}}`},
		{"top-level array", `[1,"two",null,true,{"k":[]},[[]]]`},
		{"string", `"just a string"`},
		{"null", `null`},
	}
	e := newRedisEnv(t)
	a := e.store(session.RedisOptions{IdleTTL: time.Minute})
	b := e.store(session.RedisOptions{IdleTTL: time.Minute})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.raw)) {
				t.Fatalf("test case is not valid JSON: %s", tt.raw)
			}
			raw := func() json.RawMessage { return json.RawMessage(tt.raw) }
			r := &session.Record{
				ID:                 session.NewID(),
				ClientInfo:         raw(),
				ClientCapabilities: raw(),
				Upstreams:          map[string]session.Upstream{"created": {SessionID: "c-1", Capabilities: raw()}},
			}
			if err := a.Create(t.Context(), r); err != nil {
				t.Fatalf("Create: %v", err)
			}
			ret, err := a.SetUpstream(t.Context(), r.ID, "set", "", session.Upstream{SessionID: "s-1", Capabilities: raw()})
			if err != nil {
				t.Fatalf("SetUpstream: %v", err)
			}
			cur, err := b.SetUpstream(t.Context(), r.ID, "set", "", session.Upstream{SessionID: "s-2"})
			if !errors.Is(err, session.ErrConflict) {
				t.Fatalf("conflicting SetUpstream: got %v, want %v", err, session.ErrConflict)
			}
			got, err := b.Get(t.Context(), r.ID)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			for _, c := range []struct {
				what string
				got  json.RawMessage
			}{
				{"ClientInfo", got.ClientInfo},
				{"ClientCapabilities", got.ClientCapabilities},
				{"Upstreams[created].Capabilities", got.Upstreams["created"].Capabilities},
				{"Upstreams[set].Capabilities", got.Upstreams["set"].Capabilities},
				{"SetUpstream result", ret.Capabilities},
				{"conflicting SetUpstream's current entry", cur.Capabilities},
			} {
				if string(c.got) != tt.raw {
					t.Errorf("%s:\n got %s\nwant %s", c.what, c.got, tt.raw)
				}
			}
		})
	}
}

// silentAddr returns the address of a listener that accepts connections and
// never answers, like a Redis that hangs.
func silentAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestRedisUnavailable checks that every call fails with ErrUnavailable,
// within the configured timeout, when Redis refuses connections or hangs.
func TestRedisUnavailable(t *testing.T) {
	const timeout = 200 * time.Millisecond
	// The store waits up to min(timeout, 100ms) for a pooled connection, on
	// top of timeout; the rest is slack for a busy machine.
	const limit = timeout + 100*time.Millisecond + 300*time.Millisecond
	tests := []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"refused", func(*testing.T) string { return "127.0.0.1:1" }},
		{"silent", silentAddr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := session.NewRedis(config.Redis{
				Addrs:   []string{tt.addr(t)},
				Timeout: config.Duration(timeout),
			}, session.RedisOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			id := session.NewID()
			calls := []struct {
				name string
				call func(ctx context.Context) error
			}{
				{"Ping", s.Ping},
				{"Create", func(ctx context.Context) error { return s.Create(ctx, &session.Record{ID: id}) }},
				{"Get", func(ctx context.Context) error { _, err := s.Get(ctx, id); return err }},
				{"SetUpstream", func(ctx context.Context) error {
					_, err := s.SetUpstream(ctx, id, "u", "", session.Upstream{SessionID: "x"})
					return err
				}},
				{"Delete", func(ctx context.Context) error { return s.Delete(ctx, id) }},
				{"Post", func(ctx context.Context) error { return s.Post(ctx, id, []byte("m"), time.Minute) }},
				{"Take", func(ctx context.Context) error { _, err := s.Take(ctx, id, 0); return err }},
				{"Take with a wait", func(ctx context.Context) error { _, err := s.Take(ctx, id, time.Millisecond); return err }},
			}
			for _, c := range calls {
				start := time.Now()
				err := c.call(t.Context())
				elapsed := time.Since(start)
				if !errors.Is(err, session.ErrUnavailable) {
					t.Errorf("%s: got error %v, want %v", c.name, err, session.ErrUnavailable)
				}
				if elapsed > limit {
					t.Errorf("%s took %v, want at most %v (timeout %v)", c.name, elapsed, limit, timeout)
				}
			}
		})
	}
}

func TestRedisClosed(t *testing.T) {
	s := newRedisEnv(t).store(session.RedisOptions{})
	r := newRedisRecord()
	if err := s.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Get(t.Context(), r.ID); !errors.Is(err, session.ErrUnavailable) {
		t.Errorf("Get after Close: got %v, want %v", err, session.ErrUnavailable)
	}
}

func TestNewRedisInvalid(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Redis
	}{
		{"brace in prefix", config.Redis{KeyPrefix: "gw{1}:"}},
		{"negative timeout", config.Redis{Timeout: config.Duration(-time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := session.NewRedis(tt.cfg, session.RedisOptions{}); err == nil {
				s.Close()
				t.Error("NewRedis succeeded, want an error")
			}
		})
	}
}

// TestRedisGetLastSeen checks that Get reports the time of the Get, since
// the store does not write LastSeen back.
func TestRedisGetLastSeen(t *testing.T) {
	s := newRedisEnv(t).store(session.RedisOptions{IdleTTL: time.Minute})
	r := newRedisRecord()
	if err := s.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	got, err := s.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastSeen.Before(before) || got.LastSeen.After(time.Now()) {
		t.Errorf("LastSeen = %v, want the time of the Get (after %v)", got.LastSeen, before)
	}
	if diff := cmp.Diff(r, got, cmpopts.IgnoreFields(session.Record{}, "LastSeen")); diff != "" {
		t.Errorf("Get mismatch (-want +got):\n%s", diff)
	}
}

func TestRedisMailbox(t *testing.T) {
	sessiontest.RunMailbox(t, func(t *testing.T) session.Mailbox {
		return newRedisEnv(t).store(session.RedisOptions{IdleTTL: time.Hour})
	})
}

// TestRedisMailboxReplicas passes messages between two stores, as between
// two gateway replicas.
func TestRedisMailboxReplicas(t *testing.T) {
	e := newRedisEnv(t)
	a := e.store(session.RedisOptions{})
	b := e.store(session.RedisOptions{})
	ctx := t.Context()
	key := session.NewID() + ".1"

	if err := a.Post(ctx, key, []byte("from a"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if msg, err := b.Take(ctx, key, 0); err != nil || string(msg) != "from a" {
		t.Fatalf("b.Take = %q, %v; want %q", msg, err, "from a")
	}
	if msg, err := a.Take(ctx, key, 0); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a.Take after b took the message = %q, %v; want %v", msg, err, session.ErrNotFound)
	}

	// A Take waiting on one replica gets what the other posts.
	var wg sync.WaitGroup
	blocked, err := e.blockedClients("blpop")
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	wg.Go(func() {
		e.waitBlocked(t, "blpop", blocked)
		if err := b.Post(context.Background(), key, []byte("from b"), time.Minute); err != nil {
			t.Errorf("b.Post: %v", err)
		}
	})
	msg, err := a.Take(ctx, key, 10*time.Second)
	wg.Wait()
	if err != nil || string(msg) != "from b" {
		t.Fatalf("a.Take = %q, %v; want %q", msg, err, "from b")
	}

	// Takes waiting on both replicas share out what both post, each
	// message once.
	const n = 20
	var (
		mu  sync.Mutex
		got []string
	)
	for i := range n {
		wg.Go(func() {
			msg, err := []*session.Redis{a, b}[i%2].Take(ctx, key, 10*time.Second)
			if err != nil {
				t.Errorf("Take %d: %v", i, err)
				return
			}
			mu.Lock()
			got = append(got, string(msg))
			mu.Unlock()
		})
	}
	var want []string
	for i := range n {
		m := fmt.Sprint("m", i)
		want = append(want, m)
		if err := []*session.Redis{b, a}[i%2].Post(ctx, key, []byte(m), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages taken mismatch (-want +got):\n%s", diff)
	}
}

// TestRedisMailboxLongWait checks that a Take may wait far longer than the
// config's Timeout, which go-redis would otherwise apply as the BLPOP's read
// timeout, and that the wait ends on time, in whole seconds or not.
func TestRedisMailboxLongWait(t *testing.T) {
	const timeout = 200 * time.Millisecond
	e := newRedisEnv(t)
	s, err := session.NewRedis(config.Redis{
		Addrs:     []string{testRedisAddr},
		KeyPrefix: e.prefix,
		Timeout:   config.Duration(timeout),
	}, session.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()

	for _, wait := range []time.Duration{time.Second, 750 * time.Millisecond} {
		start := time.Now()
		msg, err := s.Take(ctx, session.NewID(), wait)
		elapsed := time.Since(start)
		if !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Take(wait %v) = %q, %v; want %v", wait, msg, err, session.ErrNotFound)
		}
		if elapsed < wait-5*time.Millisecond || elapsed > wait+500*time.Millisecond {
			t.Errorf("Take(wait %v) returned after %v", wait, elapsed)
		}
	}

	key := session.NewID()
	const delay = time.Second
	var wg sync.WaitGroup
	wg.Go(func() {
		// scenario: the Post comes well after the config's Timeout, which
		// must not end the BLPOP.
		time.Sleep(delay)
		if err := s.Post(context.Background(), key, []byte("late"), time.Minute); err != nil {
			t.Errorf("Post: %v", err)
		}
	})
	msg, err := s.Take(ctx, key, time.Minute)
	wg.Wait()
	if err != nil || string(msg) != "late" {
		t.Errorf("Take(wait 1m) with a Post %v in = %q, %v; want %q", delay, msg, err, "late")
	}
}

// TestRedisMailboxLayout pins the mailbox keys the Redis doc comment
// promises operators, and checks that a cancelled Take leaves no wake-up
// list behind.
func TestRedisMailboxLayout(t *testing.T) {
	e := newRedisEnv(t)
	s := e.store(session.RedisOptions{})
	ctx := t.Context()
	key := session.NewID() + ".7"
	for _, m := range []string{"one", "two"} {
		if err := s.Post(ctx, key, []byte(m), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	k := e.prefix + "mbox:{" + key + "}"
	if typ := e.raw.Type(ctx, k).Val(); typ != "list" {
		t.Fatalf("TYPE %s = %q, want list", k, typ)
	}
	if diff := cmp.Diff([]string{"one", "two"}, e.raw.LRange(ctx, k, 0, -1).Val()); diff != "" {
		t.Errorf("LRANGE %s mismatch (-want +got):\n%s", k, diff)
	}
	if ttl := e.raw.PTTL(ctx, k).Val(); ttl <= 59*time.Second || ttl > time.Minute {
		t.Errorf("PTTL %s = %v, want just under 1m", k, ttl)
	}
	// The byte counter, in the same slot, expires with the list.
	if got := e.raw.Get(ctx, k+":bytes").Val(); got != "6" {
		t.Errorf("GET %s:bytes = %q, want 6", k, got)
	}
	if ttl := e.raw.PTTL(ctx, k+":bytes").Val(); ttl <= 59*time.Second || ttl > time.Minute {
		t.Errorf("PTTL %s:bytes = %v, want just under 1m", k, ttl)
	}

	other := session.NewID()
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.Take(cctx, other, 10*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Take: got %v, want %v", err, context.DeadlineExceeded)
	}
	cctx, cancel = context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := s.Take(cctx, other, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Take: got %v, want %v", err, context.Canceled)
	}
	keys := e.raw.Keys(ctx, e.prefix+"*").Val()
	slices.Sort(keys)
	if want := []string{k, k + ":bytes"}; !slices.Equal(keys, want) {
		t.Errorf("keys after cancelled Takes: %q, want only %q", keys, want)
	}

	// Taking every message, blocking or not, leaves nothing behind.
	if _, err := s.Take(ctx, key, 0); err != nil {
		t.Fatal(err)
	}
	if got := e.raw.Get(ctx, k+":bytes").Val(); got != "3" {
		t.Errorf("GET %s:bytes after a Take = %q, want 3", k, got)
	}
	if _, err := s.Take(ctx, key, time.Second); err != nil {
		t.Fatal(err)
	}
	if keys := e.raw.Keys(ctx, e.prefix+"*").Val(); len(keys) != 0 {
		t.Errorf("keys after every message was taken: %q, want none", keys)
	}
}

func TestRedisLimits(t *testing.T) {
	sessiontest.RunLimits(t, func(t *testing.T, perPrincipal, perTenant int) sessiontest.Limited {
		// Sessions expire inside Redis, which tells nobody: the store must
		// find out by itself. A short idle TTL, waited out, is how they
		// expire in production; a PEXPIRE that cut a session's life short
		// of it would be a session the store may count until its idle TTL
		// has passed.
		const ttl = 1500 * time.Millisecond
		e := newRedisEnv(t)
		s := e.store(session.RedisOptions{IdleTTL: ttl, MaxPerPrincipal: perPrincipal, MaxPerTenant: perTenant})
		return sessiontest.Limited{Store: s, Expire: func(t *testing.T, ids ...string) {
			e.waitExpired(t, ids...)
		}}
	})
}

func TestRedisMailboxLimits(t *testing.T) {
	sessiontest.RunMailboxLimits(t, func(t *testing.T, messages int, bytes int64) session.Mailbox {
		return newRedisEnv(t).store(session.RedisOptions{MailboxMessages: messages, MailboxBytes: bytes})
	})
}

// TestRedisLimitsReplicas holds two replicas to one bound: Creates racing
// on both, sessions kept alive past their first expiry by Gets (which do
// not touch the count sets), a Delete on the other replica, and the
// documented layout of the count sets.
func TestRedisLimitsReplicas(t *testing.T) {
	const ttl = time.Second
	e := newRedisEnv(t)
	opts := session.RedisOptions{IdleTTL: ttl, MaxPerPrincipal: 3, MaxPerTenant: 5}
	a, b := e.store(opts), e.store(opts)
	ctx := t.Context()
	alice := session.Principal{Issuer: "https://issuer.example", Subject: "alice", Tenant: "acme"}
	newRec := func(p session.Principal) *session.Record {
		r := newRedisRecord()
		r.Principal = p
		return r
	}

	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids []string
	)
	for i := range 16 {
		wg.Go(func() {
			r := newRec(alice)
			err := []*session.Redis{a, b}[i%2].Create(ctx, r)
			switch {
			case err == nil:
				mu.Lock()
				ids = append(ids, r.ID)
				mu.Unlock()
			case !errors.Is(err, session.ErrLimit):
				t.Errorf("Create: %v", err)
			}
		})
	}
	wg.Wait()
	if len(ids) != 3 {
		t.Fatalf("%d Creates on two replicas succeeded, want 3", len(ids))
	}

	// Layout: the hash names the sets; the sets share the tenant's slot.
	fields := e.raw.HGetAll(ctx, e.key(ids[0])).Val()
	tset, pset := fields["tenant_set"], fields["principal_set"]
	if !strings.HasPrefix(tset, e.prefix+"tenant:{") || !strings.HasSuffix(tset, "}") || len(tset) != len(e.prefix)+len("tenant:{}")+32 {
		t.Errorf("tenant_set = %q, want %stenant:{<32 hex digits>}", tset, e.prefix)
	}
	if !strings.HasPrefix(pset, tset+":principal:") || len(pset) != len(tset)+len(":principal:")+32 {
		t.Errorf("principal_set = %q, want %s:principal:<32 hex digits>", pset, tset)
	}
	for _, k := range []string{tset, pset} {
		got := e.raw.ZRange(ctx, k, 0, -1).Val()
		slices.Sort(got)
		want := slices.Sorted(slices.Values(ids))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("members of %s mismatch (-want +got):\n%s", k, diff)
		}
		if d := e.raw.PTTL(ctx, k).Val(); d < 23*time.Hour || d > 24*time.Hour {
			t.Errorf("PTTL %s = %v, want about 24h", k, d)
		}
	}

	// Used, the sessions outlive the expiry their scores were set for, and
	// still count.
	// scenario: the sessions are used every ttl/5 for 1.5 ttl.
	for end := time.Now().Add(ttl + ttl/2); time.Now().Before(end); time.Sleep(ttl / 5) {
		for _, id := range ids {
			if _, err := a.Get(ctx, id); err != nil {
				t.Fatalf("Get(%q): %v", id, err)
			}
		}
	}
	var le *session.LimitError
	before := time.Now().UnixMilli()
	if err := b.Create(ctx, newRec(alice)); !errors.As(err, &le) || le.Limit != "max_per_principal" {
		t.Fatalf("Create over the bound with live sessions past their first expiry: got %v, want max_per_principal", err)
	}
	// They were rescored by when they now expire: after the Create began.
	for _, z := range e.raw.ZRangeWithScores(ctx, pset, 0, -1).Val() {
		if int64(z.Score) < before {
			t.Errorf("member %v was not rescored past the Create's start (%d)", z, before)
		}
	}

	// A Delete on either replica frees a place at once.
	if err := b.Delete(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if n := e.raw.ZCard(ctx, pset).Val(); n != 2 {
		t.Errorf("ZCARD %s after Delete = %d, want 2", pset, n)
	}
	if err := a.Create(ctx, newRec(alice)); err != nil {
		t.Fatalf("Create after a Delete: %v", err)
	}

	// The tenant's bound counts other principals.
	for _, sub := range []string{"bob", "carol"} {
		if err := a.Create(ctx, newRec(session.Principal{Issuer: alice.Issuer, Subject: sub, Tenant: "acme"})); err != nil {
			t.Fatalf("Create for %s: %v", sub, err)
		}
	}
	if err := b.Create(ctx, newRec(session.Principal{Issuer: alice.Issuer, Subject: "dave", Tenant: "acme"})); !errors.As(err, &le) || le.Limit != "max_per_tenant" {
		t.Fatalf("Create over the tenant bound: got %v, want max_per_tenant", err)
	}
}

// TestRedisLimitsUnbounded checks that a store without bounds keeps no
// count sets (and so costs nothing more per Create).
func TestRedisLimitsUnbounded(t *testing.T) {
	e := newRedisEnv(t)
	s := e.store(session.RedisOptions{})
	r := newRedisRecord()
	if err := s.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), r.ID); err != nil {
		t.Fatal(err)
	}
	if keys := e.raw.Keys(t.Context(), e.prefix+"*").Val(); len(keys) != 0 {
		t.Errorf("keys left: %q", keys)
	}
}
