// Package own is the one idiom for goroutines that outlive the call that
// starts them: each is started through a Group, which gives it a context
// the Group ends and waits for it; and work that may pile up goes through
// a Queue, which bounds both the work waiting and the goroutines doing it.
package own

import (
	"context"
	"sync"
)

// A Group starts goroutines and waits for them. Its zero value is ready to
// use.
type Group struct {
	mu     sync.Mutex
	closed bool
	ctx    context.Context // ended by Close; made on first use
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// contextLocked returns the context Close ends. g.mu must be held.
func (g *Group) contextLocked() context.Context {
	if g.ctx == nil {
		g.ctx, g.cancel = context.WithCancel(context.Background())
	}
	return g.ctx
}

// Go runs f in a goroutine Close waits for, with a context Close ends. It
// returns false, and runs nothing, once Close has begun.
func (g *Group) Go(f func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	ctx := g.contextLocked()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f(ctx)
	}()
	return true
}

// Closed reports whether Close has begun.
func (g *Group) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Close ends the goroutines' context and waits for every one to return.
// Nothing starts after it begins.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	if g.cancel != nil {
		g.cancel()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// A Queue runs work items of type T on at most Workers goroutines of a
// Group, with at most Capacity items waiting. Its workers start as items
// come and end when the queue is empty, so an idle Queue costs no
// goroutine.
type Queue[T any] struct {
	g        *Group
	workers  int
	capacity int
	work     func(T)
	// dropped, if set, is told, when a worker finds the queue empty, how
	// many items were dropped since it was last told (a full queue, or
	// the Group closing).
	dropped func(n int)

	mu      sync.Mutex
	items   []T
	running int
	drops   int
}

// NewQueue returns a Queue whose items run work, on at most workers
// goroutines of g, with at most capacity waiting; dropped, if not nil, is
// told how many items were dropped (see Queue).
func NewQueue[T any](g *Group, workers, capacity int, work func(T), dropped func(n int)) *Queue[T] {
	return &Queue[T]{g: g, workers: workers, capacity: capacity, work: work, dropped: dropped}
}

// Add queues item, and reports whether it was: not when capacity items
// wait already, or the Group is closing. It returns at once.
func (q *Queue[T]) Add(item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) >= q.capacity {
		q.drops++
		return false
	}
	q.items = append(q.items, item)
	if q.running < q.workers {
		q.running++
		if !q.g.Go(q.run) {
			q.running--
			q.items = q.items[:len(q.items)-1]
			q.drops++
			return false
		}
	}
	return true
}

// run works the queue until it is empty, or the Group closes (the items
// left are dropped).
func (q *Queue[T]) run(ctx context.Context) {
	for {
		q.mu.Lock()
		if len(q.items) == 0 || ctx.Err() != nil {
			q.drops += len(q.items)
			q.items = nil // release the drained queue's array
			q.running--
			n := 0
			if q.running == 0 {
				n, q.drops = q.drops, 0
			}
			q.mu.Unlock()
			if n > 0 && q.dropped != nil {
				q.dropped(n)
			}
			return
		}
		item := q.items[0]
		var zero T
		q.items[0] = zero
		q.items = q.items[1:]
		q.mu.Unlock()
		q.work(item)
	}
}
