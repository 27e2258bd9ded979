package sessiontest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/gateway/internal/session"
)

// RunMailbox runs the conformance suite for [session.Mailbox]. newMailbox
// must return a new, empty mailbox store; it may register cleanup with
// t.Cleanup. If the store is a [session.Store] too, the suite checks that
// mailboxes and sessions do not share keys. The suite uses only keys made
// from [session.NewID], so stores may be shared between subtests.
//
// Some subtests wait on real time (about a second each at most), since a
// mailbox's expiry is kept by the store's backend, which a fake clock may
// not reach.
func RunMailbox(t *testing.T, newMailbox func(t *testing.T) session.Mailbox) {
	tests := []struct {
		name string
		f    func(t *testing.T, mb session.Mailbox)
	}{
		{"FIFO", testMailboxFIFO},
		{"TakeEmpty", testMailboxTakeEmpty},
		{"TakeWaits", testMailboxTakeWaits},
		{"TakeTimeout", testMailboxTakeTimeout},
		{"Cancel", testMailboxCancel},
		{"Deadline", testMailboxDeadline},
		{"CancelledBefore", testMailboxCancelledBefore},
		{"Expiry", testMailboxExpiry},
		{"PostResetsExpiry", testMailboxPostResetsExpiry},
		{"KeysIndependent", testMailboxKeysIndependent},
		{"SessionsIndependent", testMailboxSessionsIndependent},
		{"Copies", testMailboxCopies},
		{"Binary", testMailboxBinary},
		{"InvalidArgs", testMailboxInvalidArgs},
		{"ConcurrentTakes", testMailboxConcurrentTakes},
		{"NoLostMessages", testMailboxNoLostMessages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f(t, newMailbox(t))
		})
	}
}

// mailboxKey returns a new key shaped like the gateway's.
func mailboxKey() string { return session.NewID() + ".1" }

// mailboxTTL is long enough that no message expires during a test that is
// not about expiry.
const mailboxTTL = time.Minute

// longWait is a wait no passing test sits out.
const longWait = 10 * time.Second

// prompt is how late past its due time a Take may return on a busy machine
// (-race, a shared Redis).
const prompt = time.Second

func post(t *testing.T, mb session.Mailbox, key, msg string) {
	t.Helper()
	if err := mb.Post(t.Context(), key, []byte(msg), mailboxTTL); err != nil {
		t.Fatalf("Post(%q, %q): %v", key, msg, err)
	}
}

// take takes a message without waiting and fails the test if there is none.
func take(t *testing.T, mb session.Mailbox, key string) string {
	t.Helper()
	msg, err := mb.Take(t.Context(), key, 0)
	if err != nil {
		t.Fatalf("Take(%q): %v", key, err)
	}
	return string(msg)
}

// wantEmpty fails the test if key holds a message.
func wantEmpty(t *testing.T, mb session.Mailbox, key string) {
	t.Helper()
	if msg, err := mb.Take(t.Context(), key, 0); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Take(%q) = %q, %v; want %v", key, msg, err, session.ErrNotFound)
	}
}

func testMailboxFIFO(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	want := []string{"one", "two", "three", "four"}
	for _, m := range want {
		post(t, mb, key, m)
	}
	var got []string
	for range want {
		got = append(got, take(t, mb, key))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages taken mismatch (-want +got):\n%s", diff)
	}
	wantEmpty(t, mb, key)
}

func testMailboxTakeEmpty(t *testing.T, mb session.Mailbox) {
	for _, wait := range []time.Duration{0, -time.Second} {
		start := time.Now()
		msg, err := mb.Take(t.Context(), mailboxKey(), wait)
		if !errors.Is(err, session.ErrNotFound) || msg != nil {
			t.Errorf("Take(unknown, wait %v) = %q, %v; want nil, %v", wait, msg, err, session.ErrNotFound)
		}
		if d := time.Since(start); d > prompt {
			t.Errorf("Take(unknown, wait %v) took %v; want no wait", wait, d)
		}
	}
}

func testMailboxTakeWaits(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	const delay = 50 * time.Millisecond
	start := time.Now()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		time.Sleep(delay)
		if err := mb.Post(context.Background(), key, []byte("late"), mailboxTTL); err != nil {
			t.Errorf("Post: %v", err)
		}
	})
	msg, err := mb.Take(t.Context(), key, longWait)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	if string(msg) != "late" {
		t.Errorf("Take = %q, want %q", msg, "late")
	}
	if elapsed < delay-5*time.Millisecond || elapsed > delay+prompt {
		t.Errorf("Take returned after %v; want just after the Post, %v in", elapsed, delay)
	}
	wg.Wait()
	wantEmpty(t, mb, key)
}

func testMailboxTakeTimeout(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	const wait = 100 * time.Millisecond
	start := time.Now()
	msg, err := mb.Take(t.Context(), key, wait)
	elapsed := time.Since(start)
	if !errors.Is(err, session.ErrNotFound) || msg != nil {
		t.Fatalf("Take = %q, %v; want nil, %v", msg, err, session.ErrNotFound)
	}
	if elapsed < wait-5*time.Millisecond || elapsed > wait+prompt {
		t.Errorf("Take returned after %v; want about %v", elapsed, wait)
	}
	// The Take that gave up must not swallow a later message.
	post(t, mb, key, "after")
	if got := take(t, mb, key); got != "after" {
		t.Errorf("Take after timeout = %q, want %q", got, "after")
	}
}

func testMailboxCancel(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	ctx, cancel := context.WithCancel(t.Context())
	const delay = 50 * time.Millisecond
	timer := time.AfterFunc(delay, cancel)
	defer timer.Stop()
	start := time.Now()
	msg, err := mb.Take(ctx, key, longWait)
	elapsed := time.Since(start)
	if !errors.Is(err, context.Canceled) || msg != nil {
		t.Fatalf("Take = %q, %v; want nil, %v", msg, err, context.Canceled)
	}
	if elapsed > delay+prompt {
		t.Errorf("Take returned %v after the cancel; want promptly", elapsed-delay)
	}
	// Nor must a cancelled Take.
	post(t, mb, key, "after")
	if got := take(t, mb, key); got != "after" {
		t.Errorf("Take after cancel = %q, want %q", got, "after")
	}
}

func testMailboxDeadline(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	const timeout = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	start := time.Now()
	msg, err := mb.Take(ctx, key, longWait)
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || msg != nil {
		t.Fatalf("Take = %q, %v; want nil, %v", msg, err, context.DeadlineExceeded)
	}
	if elapsed > timeout+prompt {
		t.Errorf("Take returned after %v; want about %v", elapsed, timeout)
	}
	post(t, mb, key, "after")
	if got := take(t, mb, key); got != "after" {
		t.Errorf("Take after deadline = %q, want %q", got, "after")
	}
}

func testMailboxCancelledBefore(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	post(t, mb, key, "kept")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if msg, err := mb.Take(ctx, key, longWait); !errors.Is(err, context.Canceled) {
		t.Fatalf("Take with a cancelled ctx = %q, %v; want %v", msg, err, context.Canceled)
	}
	if got := take(t, mb, key); got != "kept" {
		t.Errorf("Take = %q, want %q (the cancelled Take must not take it)", got, "kept")
	}
}

func testMailboxExpiry(t *testing.T, mb session.Mailbox) {
	key, other := mailboxKey(), mailboxKey()
	const ttl = 100 * time.Millisecond
	if err := mb.Post(t.Context(), key, []byte("short"), ttl); err != nil {
		t.Fatal(err)
	}
	post(t, mb, other, "long")
	time.Sleep(ttl + 150*time.Millisecond)
	wantEmpty(t, mb, key)
	if got := take(t, mb, other); got != "long" {
		t.Errorf("Take(other) = %q, want %q", got, "long")
	}
	// The key is usable again.
	post(t, mb, key, "again")
	if got := take(t, mb, key); got != "again" {
		t.Errorf("Take after expiry and Post = %q, want %q", got, "again")
	}
}

func testMailboxPostResetsExpiry(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	// Checked at 2*step: the first message outlives its own ttl (dying at
	// 1.6*step would mean the second Post did not reset it), and both die
	// at 2.6*step.
	const step = 400 * time.Millisecond
	const ttl = step * 16 / 10
	for _, m := range []string{"first", "second"} {
		if err := mb.Post(t.Context(), key, []byte(m), ttl); err != nil {
			t.Fatal(err)
		}
		time.Sleep(step)
	}
	if got := take(t, mb, key); got != "first" {
		t.Errorf("Take = %q, want %q", got, "first")
	}
	time.Sleep(ttl - step + 200*time.Millisecond)
	wantEmpty(t, mb, key)
}

func testMailboxKeysIndependent(t *testing.T, mb session.Mailbox) {
	a, b := mailboxKey(), mailboxKey()
	post(t, mb, a, "for a")
	wantEmpty(t, mb, b)
	// A Take waiting on b does not get a's messages.
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		time.Sleep(20 * time.Millisecond)
		if err := mb.Post(context.Background(), a, []byte("for a again"), mailboxTTL); err != nil {
			t.Errorf("Post: %v", err)
		}
	})
	if msg, err := mb.Take(t.Context(), b, 200*time.Millisecond); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Take(b) = %q, %v; want %v", msg, err, session.ErrNotFound)
	}
	wg.Wait()
	for _, want := range []string{"for a", "for a again"} {
		if got := take(t, mb, a); got != want {
			t.Errorf("Take(a) = %q, want %q", got, want)
		}
	}
}

func testMailboxSessionsIndependent(t *testing.T, mb session.Mailbox) {
	s, ok := mb.(session.Store)
	if !ok {
		t.Skip("not a session.Store")
	}
	r := newRecord()
	create(t, s, r)
	want := cloneRecord(r)
	post(t, mb, r.ID, "same name")
	if diff := cmp.Diff(want, get(t, s, r.ID), recordOpts); diff != "" {
		t.Errorf("record after Post under its id mismatch (-want +got):\n%s", diff)
	}
	if err := s.Delete(t.Context(), r.ID); err != nil {
		t.Fatal(err)
	}
	if got := take(t, mb, r.ID); got != "same name" {
		t.Errorf("Take after Delete of the session = %q, want %q", got, "same name")
	}
	// And a mailbox under a session's id is no session.
	if _, err := s.Get(t.Context(), r.ID); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Get after Delete: got %v, want %v", err, session.ErrNotFound)
	}
}

func testMailboxCopies(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	in := []byte("original")
	if err := mb.Post(t.Context(), key, in, mailboxTTL); err != nil {
		t.Fatal(err)
	}
	copy(in, "scribble")
	if err := mb.Post(t.Context(), key, in[:4], mailboxTTL); err != nil {
		t.Fatal(err)
	}
	in[0] = 'X'
	for _, want := range []string{"original", "scri"} {
		got, err := mb.Take(t.Context(), key, 0)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("Take = %q, want %q (the store must copy what Post is given)", got, want)
		}
		// What Take returns is the caller's.
		clear(got)
	}
}

func testMailboxBinary(t *testing.T, mb session.Mailbox) {
	key := mailboxKey()
	all := make([]byte, 0, 512)
	for i := range 512 {
		all = append(all, byte(i))
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	msgs := [][]byte{all, {}, nil, []byte("\x00"), []byte("\r\n$-1\r\n"), big}
	for _, m := range msgs {
		if err := mb.Post(t.Context(), key, m, mailboxTTL); err != nil {
			t.Fatalf("Post(%d bytes): %v", len(m), err)
		}
	}
	for i, want := range msgs {
		got, err := mb.Take(t.Context(), key, 0)
		if err != nil {
			t.Fatalf("Take %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Take %d: got %d bytes, want %d bytes (%q...)", i, len(got), len(want), want[:min(len(want), 16)])
		}
	}
	wantEmpty(t, mb, key)
}

func testMailboxInvalidArgs(t *testing.T, mb session.Mailbox) {
	ctx := t.Context()
	for _, key := range []string{"", "a{b", "a}b", "{x}"} {
		if err := mb.Post(ctx, key, []byte("m"), mailboxTTL); err == nil || errors.Is(err, session.ErrUnavailable) {
			t.Errorf("Post(%q): got %v, want an invalid key error", key, err)
		}
		if _, err := mb.Take(ctx, key, 0); err == nil || errors.Is(err, session.ErrNotFound) || errors.Is(err, session.ErrUnavailable) {
			t.Errorf("Take(%q): got %v, want an invalid key error", key, err)
		}
	}
	key := mailboxKey()
	for _, ttl := range []time.Duration{0, -time.Second} {
		if err := mb.Post(ctx, key, []byte("m"), ttl); err == nil {
			t.Errorf("Post with ttl %v succeeded, want an error", ttl)
		}
	}
	wantEmpty(t, mb, key)
}

// testMailboxConcurrentTakes has several Takes wait on one key: each gets
// exactly one of the messages posted.
func testMailboxConcurrentTakes(t *testing.T, mb session.Mailbox) {
	const n = 8
	key := mailboxKey()
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			msg, err := mb.Take(t.Context(), key, longWait)
			if err != nil {
				t.Errorf("Take %d: %v", i, err)
			}
			got[i] = string(msg)
		})
	}
	time.Sleep(50 * time.Millisecond) // let most of them wait
	var want []string
	for i := range n {
		m := fmt.Sprint("m", i)
		want = append(want, m)
		post(t, mb, key, m)
	}
	wg.Wait()
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages taken mismatch (-want +got):\n%s", diff)
	}
	wantEmpty(t, mb, key)
}

// testMailboxNoLostMessages races Posts against Takes that time out or are
// cancelled all the while: every message posted is taken exactly once, by
// a Take or by the final drain.
func testMailboxNoLostMessages(t *testing.T, mb session.Mailbox) {
	const posters, perPoster, takers = 4, 50, 8
	key := mailboxKey()
	var (
		mu     sync.Mutex
		taken  []string
		posted atomic.Bool
	)
	var wg sync.WaitGroup
	for i := range takers {
		wg.Go(func() {
			for j := 0; !posted.Load(); j++ {
				ctx, cancel := context.WithCancel(t.Context())
				wait := time.Duration(1+(i+j)%10) * time.Millisecond
				if j%3 == 0 {
					// Cancel about when the wait ends.
					time.AfterFunc(wait, cancel)
					wait *= 2
				}
				msg, err := mb.Take(ctx, key, wait)
				cancel()
				switch {
				case err == nil:
					mu.Lock()
					taken = append(taken, string(msg))
					mu.Unlock()
				case errors.Is(err, session.ErrNotFound), errors.Is(err, context.Canceled):
				default:
					t.Errorf("Take: %v", err)
					return
				}
			}
		})
	}
	var want []string
	var pw sync.WaitGroup
	for i := range posters {
		for j := range perPoster {
			want = append(want, fmt.Sprintf("p%d-%d", i, j))
		}
		pw.Go(func() {
			for j := range perPoster {
				msg := []byte(fmt.Sprintf("p%d-%d", i, j))
				for {
					err := mb.Post(t.Context(), key, msg, mailboxTTL)
					if err == nil {
						break
					}
					// Full, or at mailbox_messages: the takers will make room.
					if !errors.Is(err, session.ErrFull) && !errors.Is(err, session.ErrLimit) {
						t.Errorf("Post: %v", err)
						return
					}
					time.Sleep(time.Millisecond)
				}
				if j%10 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	pw.Wait()
	time.Sleep(20 * time.Millisecond) // let the takers take some after the last Post
	posted.Store(true)
	wg.Wait()
	for {
		msg, err := mb.Take(t.Context(), key, 0)
		if errors.Is(err, session.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
		taken = append(taken, string(msg))
	}
	slices.Sort(want)
	slices.Sort(taken)
	if diff := cmp.Diff(want, taken); diff != "" {
		t.Errorf("messages taken mismatch (-want +got):\n%s", diff)
	}
}
