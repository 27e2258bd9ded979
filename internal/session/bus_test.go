package session_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/testkit"
)

// busContract runs the Bus contract against two buses that share messages
// like two replicas (for the memory bus, the same one twice).
func busContract(t *testing.T, newBus func(t *testing.T, opts session.BusOptions) (a, b session.Bus)) {
	ctx := context.Background()
	recv := func(t *testing.T, ch <-chan []byte) string {
		t.Helper()
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatal("channel closed")
			}
			return string(m)
		case <-time.After(5 * time.Second):
			t.Fatal("no message")
		}
		return ""
	}
	quiet := func(t *testing.T, ch <-chan []byte) {
		t.Helper()
		select {
		case m := <-ch:
			t.Fatalf("unexpected message %q", m)
		case <-time.After(100 * time.Millisecond):
		}
	}

	t.Run("only the session's subscribers", func(t *testing.T) {
		a, b := newBus(t, session.BusOptions{})
		one, cancel1 := sub(b, "s1", 0)
		defer cancel1()
		two, cancel2 := sub(b, "s1", 0)
		defer cancel2()
		other, cancel3 := sub(b, "s2", 0)
		defer cancel3()
		waitSubscribed(t, a, "s1", one)
		// Both subscribers of s1 got the probes; two's are still queued.
		for len(two) > 0 {
			<-two
		}
		if err := a.Publish(ctx, "s1", []byte(`{"m":1}`)); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, one); got != `{"m":1}` {
			t.Errorf("first subscriber: %q", got)
		}
		if got := recv(t, two); got != `{"m":1}` {
			t.Errorf("second subscriber: %q", got)
		}
		quiet(t, other)
	})

	t.Run("cancel stops delivery", func(t *testing.T) {
		a, b := newBus(t, session.BusOptions{})
		ch, cancel := sub(b, "s3", 0)
		waitSubscribed(t, a, "s3", ch)
		cancel()
		cancel() // twice is harmless
		if err := a.Publish(ctx, "s3", []byte("x")); err != nil {
			t.Fatal(err)
		}
		quiet(t, ch)
	})

	t.Run("no subscriber: dropped", func(t *testing.T) {
		a, b := newBus(t, session.BusOptions{})
		if err := a.Publish(ctx, "nobody", []byte("x")); err != nil {
			t.Fatal(err)
		}
		ch, cancel := sub(b, "nobody", 0)
		defer cancel()
		waitSubscribed(t, a, "nobody", ch)
		quiet(t, ch)
	})

	t.Run("a full subscriber drops and counts", func(t *testing.T) {
		var dropped atomic.Int64
		a, b := newBus(t, session.BusOptions{OnDrop: func() { dropped.Add(1) }})
		ch, cancel := sub(b, "slow", 4)
		defer cancel()
		waitSubscribed(t, a, "slow", ch)
		for i := range 50 {
			if err := a.Publish(ctx, "slow", []byte(strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
		// The subscriber holds 4; the rest were dropped, never waited for.
		testkit.Poll(5*time.Second, func() bool { return dropped.Load() >= 46 })
		if got := dropped.Load(); got != 46 || len(ch) != 4 {
			t.Errorf("dropped %d, queued %d; want 46 and 4", got, len(ch))
		}
	})

	t.Run("message size bound", func(t *testing.T) {
		a, _ := newBus(t, session.BusOptions{MaxMessageBytes: 16})
		err := a.Publish(ctx, "s", make([]byte, 17))
		if le := (*session.LimitError)(nil); !errors.As(err, &le) || le.Limit != session.LimitBusMessageBytes {
			t.Errorf("17 bytes on a bus of 16: %v", err)
		}
		if err := a.Publish(ctx, "s", make([]byte, 16)); err != nil {
			t.Errorf("16 bytes: %v", err)
		}
	})
}

// sub subscribes a new channel of capacity n (64 if 0) to id on b.
func sub(b session.Bus, id string, n int) (chan []byte, func()) {
	if n == 0 {
		n = 64
	}
	ch := make(chan []byte, n)
	return ch, b.Subscribe(id, ch)
}

// waitSubscribed publishes a probe until ch gets it: a Redis SUBSCRIBE
// takes effect a moment after Subscribe returns.
func waitSubscribed(t *testing.T, pub session.Bus, id string, ch <-chan []byte) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if err := pub.Publish(context.Background(), id, []byte("probe")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
			// Drain the probes that were in flight too.
			for {
				select {
				case <-ch:
				case <-time.After(50 * time.Millisecond):
					return
				}
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("subscription to %s never took effect", id)
}

func TestMemoryBus(t *testing.T) {
	busContract(t, func(t *testing.T, opts session.BusOptions) (session.Bus, session.Bus) {
		b := session.NewMemoryBus(opts)
		return b, b
	})
}

func TestRedisBus(t *testing.T) {
	busContract(t, func(t *testing.T, opts session.BusOptions) (session.Bus, session.Bus) {
		e := newRedisEnv(t)
		return redisBus(t, e, opts), redisBus(t, e, opts)
	})
}

func redisBus(t *testing.T, e *redisEnv, opts session.BusOptions) *session.RedisBus {
	b := session.NewRedisBus(e.store(session.RedisOptions{}), opts)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("bus Close: %v", err)
		}
	})
	return b
}

// TestRedisBusTenThousandStreams: one replica subscribes 10,000 sessions
// on its one connection; each gets its own messages, and cancelling them
// all unsubscribes every channel.
func TestRedisBusTenThousandStreams(t *testing.T) {
	const n = 10_000
	e := newRedisEnv(t)
	a, b := redisBus(t, e, session.BusOptions{}), redisBus(t, e, session.BusOptions{})
	chans := make([]chan []byte, n)
	cancels := make([]func(), n)
	for i := range n {
		chans[i], cancels[i] = sub(b, "sess-"+strconv.Itoa(i), 1)
	}
	if b.Channels() != n {
		t.Fatalf("%d channels, want %d", b.Channels(), n)
	}
	last := "sess-" + strconv.Itoa(n-1)
	waitSubscribed(t, a, last, chans[n-1])
	ctx := context.Background()
	for i := 0; i < n; i += 997 {
		if err := a.Publish(ctx, "sess-"+strconv.Itoa(i), []byte("m"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 997 {
		select {
		case m := <-chans[i]:
			if string(m) != "m"+strconv.Itoa(i) {
				t.Errorf("session %d got %q", i, m)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("session %d got nothing", i)
		}
	}
	for _, c := range cancels {
		c()
	}
	if b.Channels() != 0 {
		t.Errorf("%d channels after cancelling all", b.Channels())
	}
	var chs []string
	testkit.Eventually(t, 5*time.Second, func() bool {
		var err error
		chs, err = e.raw.PubSubChannels(ctx, e.prefix+"bus:*").Result()
		return err == nil && len(chs) == 0
	}, "channels still subscribed in Redis: %q", &chs)
}
