package scale

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 7: "10,000 concurrent open client SSE streams under 600 MiB RSS
// with near-zero CPU while idle". Near zero is read as at most 2% of one
// core. Issue 33 lowered the bounds to 320 MiB, and to 512 MiB for
// streams that each hold an upstream stream too (TestIdleStreamsSubscribed).
const (
	defaultStreams   = 10_000
	streamsRSSMax    = 320 * mib
	subscribedRSSMax = 512 * mib
	idleCPUMax       = 0.02 // of one core
)

// openStream is one client's GET stream, open on its own connection.
type openStream struct {
	c    *clientConn
	body io.ReadCloser
}

// TestIdleStreams opens 10,000 sessions on a gateway process and a GET
// stream for each, every stream on a connection of its own, then checks
// the gateway's resident set (under 320 MiB) and the CPU time it uses
// while nothing happens (at most 2% of one core over MCPGW_SCALE_IDLE,
// 5s by default). The gateway writes a heartbeat on every stream 25s after
// it opened and every 25s after that: a window of 30s or more measures
// the heartbeats too.
func TestIdleStreams(t *testing.T) {
	needProc(t)
	n := envInt(t, "MCPGW_SCALE_STREAMS", defaultStreams)
	idle := envDuration(t, "MCPGW_SCALE_IDLE", 5*time.Second)
	const workers = 32
	// This process holds one connection per stream, the gateway as many
	// (it inherits the limit), and a few more each.
	raiseNoFile(t, uint64(n)+512)

	up := newFastUpstream(t, 2, true)
	g := startGateway(t, up.URL, n+workers)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	ids, err := openSessions(ctx, g.host, g.path, n, workers)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	base := rss(t, g.pid)

	start := time.Now()
	streams, err := openStreams(ctx, g.host, g.path, ids, workers)
	defer func() {
		for _, s := range streams {
			if s != nil {
				s.c.Close()
			}
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Since(start)
	time.Sleep(time.Second) // let the last handlers settle
	after := rss(t, g.pid)
	if got := g.metric(t, "mcpgw_sse_streams_open"); got >= 0 && int(got) != n {
		t.Errorf("mcpgw_sse_streams_open = %v, want %d", got, n)
	}
	goroutines := g.metric(t, "go_goroutines")
	stacks, heap := g.metric(t, "go_memstats_stack_inuse_bytes"), g.metric(t, "go_memstats_heap_inuse_bytes")

	// The collection of what opening the streams left behind would
	// otherwise run in the idle window, or not, as the collector's pacing
	// has it (250 ms of CPU, 5% of a core in 5 s, when it does): the
	// window measures what the gateway does when nothing happens, so the
	// collection is finished first (the RSS above was read before it).
	g.liveHeap(t)
	cpu0, t0 := cpuTime(t, g.pid), time.Now()
	select {
	case <-time.After(idle):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	cpu, wall := cpuTime(t, g.pid)-cpu0, time.Since(t0)
	idleRSS := rss(t, g.pid)
	share := cpu.Seconds() / wall.Seconds()

	// Every stream must still be open: a read either times out (nothing
	// sent) or returns a heartbeat; an error or the end of the body means
	// the gateway closed it.
	if closed := checkOpen(streams, workers); len(closed) > 0 {
		t.Errorf("%d of %d streams are no longer open; first: %v", len(closed), n, closed[0])
	}
	if got := g.metric(t, "mcpgw_sse_streams_open"); got >= 0 && int(got) != n {
		t.Errorf("after the idle period, mcpgw_sse_streams_open = %v, want %d", got, n)
	}

	t.Logf("%d streams opened in %v on %d sessions", n, opened.Round(time.Millisecond), n)
	t.Logf("gateway RSS: %s with the sessions, %s with the streams open (%.1f KiB per stream), %s after %v idle (peak %s); goroutines %v",
		formatMiB(base), formatMiB(after), float64(after-base)/float64(n)/1024, formatMiB(idleRSS), idle,
		formatMiB(procStatus(t, g.pid, "VmHWM")), goroutines)
	t.Logf("with the streams open: goroutine stacks %s, Go heap in use %s; after the idle period: stacks %s, heap %s",
		formatMiB(int64(stacks)), formatMiB(int64(heap)),
		formatMiB(int64(g.metric(t, "go_memstats_stack_inuse_bytes"))), formatMiB(int64(g.metric(t, "go_memstats_heap_inuse_bytes"))))
	t.Logf("gateway CPU while idle: %v in %v, %.2f%% of one core", cpu, wall.Round(time.Millisecond), 100*share)
	g.saveHeapProfile(t, "streams.heap.pprof")
	if peak := max(after, idleRSS); peak >= streamsRSSMax {
		t.Errorf("gateway RSS with %d open streams is %s, want under %s", n, formatMiB(peak), formatMiB(streamsRSSMax))
	}
	// Under the race detector (the binary is built with it too) CPU is
	// logged, not checked: make test checks it in its run without.
	if share > idleCPUMax && !raceEnabled {
		t.Errorf("gateway CPU while %d streams are idle is %.2f%% of one core, want at most %.0f%%", n, 100*share, 100*idleCPUMax)
	}
}

// openStreams opens a GET stream for each session, workers at a time,
// each on a new connection, and checks that each is an event stream. The
// returned slice holds the streams opened so far, also on error.
func openStreams(ctx context.Context, host, path string, ids []string, workers int) ([]*openStream, error) {
	streams := make([]*openStream, len(ids))
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return
				}
				s, err := openOneStream(ctx, host, path, ids[i])
				if err != nil {
					errc <- fmt.Errorf("stream %d: %w", i, err)
					next.Store(int64(len(ids)))
					return
				}
				streams[i] = s
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return streams, err
	}
	return streams, ctx.Err()
}

func openOneStream(ctx context.Context, host, path, id string) (*openStream, error) {
	c, err := dialGateway(ctx, host, path)
	if err != nil {
		return nil, err
	}
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	resp, err := c.do(http.MethodGet, id, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		c.Close()
		return nil, fmt.Errorf("GET: %s, Content-Type %q: %s", resp.Status, ct, body)
	}
	c.c.SetDeadline(time.Time{})
	c.buf = nil // keep only what an open stream needs
	return &openStream{c: c, body: resp.Body}, nil
}

// checkOpen tries a short read on every stream and returns why the ones
// that are no longer open ended.
func checkOpen(streams []*openStream, workers int) []error {
	var mu sync.Mutex
	var closed []error
	var next atomic.Int64
	var wg sync.WaitGroup
	buf := make([][]byte, workers)
	for w := range workers {
		buf[w] = make([]byte, 512)
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(streams) {
					return
				}
				s := streams[i]
				s.c.c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
				_, err := s.body.Read(buf[w])
				if err != nil && !isTimeout(err) {
					mu.Lock()
					closed = append(closed, fmt.Errorf("stream %d: %w", i, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return closed
}
