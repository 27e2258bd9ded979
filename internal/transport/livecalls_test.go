package transport

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgw/gateway/internal/session"
)

// touchLog counts the lease renewals of an event log.
type touchLog struct {
	session.EventLog
	n atomic.Int32
}

func (l *touchLog) Touch(context.Context, string, string) error {
	l.n.Add(1)
	return nil
}

// TestLiveCallsOwned: the lease renewals run while calls do, every
// touchEvery; close stops them and returns only once their goroutine has
// ended, and nothing renews after it, even for a call added later.
func TestLiveCallsOwned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &touchLog{}
		var c liveCalls
		l := &streamLog{log: log, ctx: context.Background(), sid: "s", stream: "c1"}
		c.add(l)
		time.Sleep(2*touchEvery + time.Millisecond)
		synctest.Wait()
		if n := log.n.Load(); n != 2 {
			t.Fatalf("%d renewals in two periods, want 2", n)
		}
		c.close()
		// synctest.Test fails if the goroutine were still running at the
		// end; time moving on shows it renews nothing more.
		c.add(&streamLog{log: log, ctx: context.Background(), sid: "s", stream: "c2"})
		time.Sleep(3 * touchEvery)
		synctest.Wait()
		if n := log.n.Load(); n != 2 {
			t.Errorf("%d renewals after close, want none", n-2)
		}
		c.close() // again: a no-op
	})
}

// TestLiveCallsIdle: with no call left, the goroutine ends by itself, and
// a new call starts another.
func TestLiveCallsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &touchLog{}
		var c liveCalls
		l := &streamLog{log: log, ctx: context.Background(), sid: "s", stream: "c1"}
		c.add(l)
		c.remove(l)
		time.Sleep(touchEvery + time.Millisecond)
		synctest.Wait()
		c.mu.Lock()
		running := c.running
		c.mu.Unlock()
		if running {
			t.Fatal("the renewals go on with no call")
		}
		c.add(l)
		time.Sleep(touchEvery + time.Millisecond)
		synctest.Wait()
		if n := log.n.Load(); n != 1 {
			t.Errorf("%d renewals, want 1", n)
		}
		c.close()
	})
}
