package testkit

import (
	"testing"
	"time"
)

// PollInterval is how often [Poll] and [Eventually] check their
// condition.
const PollInterval = 10 * time.Millisecond

// Poll checks cond every [PollInterval] until it holds or timeout has
// passed, and reports whether it held. It is for what has no event to
// wait on: an external process, a store's own clock (a Redis TTL), a
// real identity provider. What the code under test can signal should be
// waited for on a channel instead.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(PollInterval)
	}
	return true
}

// Eventually is [Poll] that fails the test with msg (a format for args)
// if cond does not hold within timeout. It must be called from the test's
// goroutine.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("after %v: "+msg, append([]any{timeout}, args...)...)
	}
}
