package own

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestGroup: Close ends the goroutines' context and waits for them; Go
// starts nothing once Close has begun.
func TestGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		var ended atomic.Int32
		for range 3 {
			if !g.Go(func(ctx context.Context) {
				<-ctx.Done()
				time.Sleep(time.Second) // work after the end, which Close waits for
				ended.Add(1)
			}) {
				t.Fatal("refused before Close")
			}
		}
		g.Close()
		if ended.Load() != 3 {
			t.Errorf("Close returned with %d of 3 goroutines ended", ended.Load())
		}
		if g.Go(func(context.Context) { t.Error("ran after Close") }) || !g.Closed() {
			t.Error("Go accepted after Close")
		}
	})
}

// TestQueue: at most workers items run at once, at most capacity wait,
// the rest are dropped and reported once the queue drains; an idle queue
// holds no goroutine.
func TestQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		var mu sync.Mutex
		running, peak, done := 0, 0, 0
		release := make(chan struct{})
		var reported atomic.Int32
		q := NewQueue(&g, 2, 3, func(int) {
			mu.Lock()
			running++
			peak = max(peak, running)
			mu.Unlock()
			<-release
			mu.Lock()
			running--
			done++
			mu.Unlock()
		}, func(n int) { reported.Add(int32(n)) })
		added := 0
		for i := range 10 {
			if q.Add(i) {
				added++
			}
			synctest.Wait() // the workers took what they could
		}
		// Two running, three waiting: five of ten.
		if added != 5 {
			t.Errorf("%d of 10 added, want 5", added)
		}
		close(release)
		synctest.Wait()
		if peak != 2 || done != 5 {
			t.Errorf("peak %d running (want 2), %d done (want 5)", peak, done)
		}
		if reported.Load() != 5 {
			t.Errorf("%d drops reported, want 5", reported.Load())
		}
		// Idle: no worker left.
		q.mu.Lock()
		if q.running != 0 {
			t.Errorf("%d workers left idle", q.running)
		}
		q.mu.Unlock()
		g.Close()
		if q.Add(1) {
			t.Error("added after the group closed")
		}
	})
}
