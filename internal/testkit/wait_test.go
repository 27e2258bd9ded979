package testkit

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

func TestPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		n := 0
		if !Poll(time.Second, func() bool { n++; return n == 3 }) {
			t.Fatal("Poll reported false for a condition that came to hold")
		}
		if d := time.Since(start); d != 2*PollInterval {
			t.Errorf("Poll took %v, want two intervals (%v)", d, 2*PollInterval)
		}

		start = time.Now()
		if Poll(time.Second, func() bool { return false }) {
			t.Fatal("Poll reported true for a condition that never held")
		}
		if d := time.Since(start); d < time.Second || d > time.Second+PollInterval {
			t.Errorf("Poll gave up after %v, want %v", d, time.Second)
		}
	})
}

func TestEventuallyFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := &fatalRecorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			Eventually(ft, time.Second, func() bool { return false }, "never %s", "held")
		}()
		<-done
		if want := "after 1s: never held"; ft.msg != want {
			t.Errorf("Eventually failed with %q, want %q", ft.msg, want)
		}
	})
}

// fatalRecorder records a Fatalf and ends its goroutine, as testing does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
