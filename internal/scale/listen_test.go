package scale

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestIdleStreamsSubscribed is TestIdleStreams with a resource
// subscription on every session: the gateway then holds, for each
// client GET stream, the upstream GET stream its updates come on (see
// internal/listen). It reports what that costs per stream, and checks
// issue 33's bound: under 512 MiB for 10,000 such pairs.
func TestIdleStreamsSubscribed(t *testing.T) {
	needProc(t)
	const workers = 32
	// Both processes hold two connections per stream: the client's and
	// the upstream's. Unless told a count, the test opens as many as the
	// descriptors allow, up to 10,000 (2,000 under the race detector,
	// where this process's 20,000 goroutines would be instrumented): the
	// figure is per stream.
	def := defaultStreams
	if raceEnabled {
		def = 2_000
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Max < 2*uint64(def)+512 {
		def = int(lim.Max-512) / 2
	}
	n := envInt(t, "MCPGW_SCALE_STREAMS", def)
	raiseNoFile(t, 2*uint64(n)+512)

	up := newSubscribeUpstream(t)
	g := startGateway(t, up.URL, n+workers)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	ids, err := openSessions(ctx, g.host, g.path, n, workers)
	if err != nil {
		t.Fatal(err)
	}
	if err := subscribeAll(ctx, g.host, g.path, ids, workers); err != nil {
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
	for up.open.Load() < int64(n) {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d upstream streams open", up.open.Load(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	opened := time.Since(start)
	time.Sleep(time.Second)
	after := rss(t, g.pid)
	if got := g.metric(t, "mcpgw_upstream_streams_open"); got >= 0 && int(got) != n {
		t.Errorf("mcpgw_upstream_streams_open = %v, want %d", got, n)
	}
	goroutines := g.metric(t, "go_goroutines")
	stacks, heap := g.metric(t, "go_memstats_stack_inuse_bytes"), g.metric(t, "go_memstats_heap_inuse_bytes")
	if closed := checkOpen(streams, workers); len(closed) > 0 {
		t.Errorf("%d of %d streams are no longer open; first: %v", len(closed), n, closed[0])
	}
	t.Logf("%d streams with a subscription each, and %d upstream streams, opened in %v", n, up.open.Load(), opened.Round(time.Millisecond))
	t.Logf("gateway RSS: %s with the sessions subscribed, %s with the streams open (%.1f KiB per stream and its upstream stream); goroutines %v; stacks %s, Go heap in use %s",
		formatMiB(base), formatMiB(after), float64(after-base)/float64(n)/1024, goroutines, formatMiB(int64(stacks)), formatMiB(int64(heap)))
	g.saveHeapProfile(t, "streams-subscribed.heap.pprof")
	if after >= subscribedRSSMax {
		t.Errorf("gateway RSS with %d subscribed streams is %s, want under %s", n, formatMiB(after), formatMiB(subscribedRSSMax))
	}
}

// subscribeAll sends resources/subscribe on each session, workers at a
// time on keep-alive connections.
func subscribeAll(ctx context.Context, host, path string, ids []string, workers int) error {
	body := []byte(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"up+mem://r"}}`)
	return onWorkers(ctx, host, path, len(ids), workers, func(c *clientConn, i int) error {
		resp, err := c.do(http.MethodPost, ids[i], body)
		if err != nil {
			return err
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"result"`)) {
			return fmt.Errorf("subscribe %d: %v %s: %.200s", i, err, resp.Status, out)
		}
		return nil
	})
}

// subscribeUpstream is fastUpstream with one subscribable resource,
// mem://r, and a GET stream per session that stays open and silent.
type subscribeUpstream struct {
	*fastUpstream
	open atomic.Int64 // GET streams open
}

func newSubscribeUpstream(t *testing.T) *subscribeUpstream {
	u := &subscribeUpstream{fastUpstream: &fastUpstream{sessionIDs: true, counts: make(map[string]int)}}
	srv := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	u.URL = srv.URL + "/mcp"
	return u
}

func (u *subscribeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		u.open.Add(1)
		defer u.open.Add(-1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		return
	}
	if r.Method != http.MethodPost {
		u.serveHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var result string
	switch {
	case bytes.Contains(body, []byte(`"method":"initialize"`)):
		w.Header().Set("Mcp-Session-Id", fmt.Sprintf("up-%029x", u.ids.Add(1)))
		result = `{"protocolVersion":"2025-11-25","capabilities":{"resources":{"subscribe":true}},"serverInfo":{"name":"sub","version":"0.0.1"}}`
	case bytes.Contains(body, []byte(`"method":"resources/list"`)):
		result = `{"resources":[{"uri":"mem://r","name":"r"}]}`
	case bytes.Contains(body, []byte(`"method":"resources/subscribe"`)):
		result = `{}`
	default:
		r.Body = io.NopCloser(bytes.NewReader(body))
		u.serveHTTP(w, r)
		return
	}
	id := body[bytes.Index(body, []byte(`"id":`))+5:]
	id = id[:bytes.IndexAny(id, ",}")]
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}
