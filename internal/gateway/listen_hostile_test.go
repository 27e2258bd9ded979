package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
)

// floodUpstream is a hand-written 2025-11-25 upstream whose GET stream
// floods its client with log messages, then asks for roots, and records
// the answers the gateway POSTs back.
type floodUpstream struct {
	url   string
	flood int // log messages per GET stream before the roots/list

	gets    atomic.Int32 // GET streams open now
	maxGets atomic.Int32 // most GET streams open at once
	sent    atomic.Int64 // log messages written

	mu      sync.Mutex
	answers []map[string]any // the gateway's answers to roots/list
	answer  chan struct{}    // one value per answer
}

func newFloodUpstream(t *testing.T, flood int) *floodUpstream {
	u := &floodUpstream{flood: flood, answer: make(chan struct{}, 64)}
	hs := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	u.url = hs.URL
	return u
}

func (u *floodUpstream) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		u.stream(w, r)
		return
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var msg map[string]any
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&msg); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	method, _ := msg["method"].(string)
	if method == "" { // a response: the gateway's answer to roots/list
		u.mu.Lock()
		u.answers = append(u.answers, msg)
		u.mu.Unlock()
		u.answer <- struct{}{}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if msg["id"] == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	id, _ := json.Marshal(msg["id"])
	result := `{}`
	if method == "initialize" {
		w.Header().Set("Mcp-Session-Id", fmt.Sprintf("flood-%d", time.Now().UnixNano()))
		result = `{"protocolVersion":"2025-11-25","capabilities":{"logging":{}},"serverInfo":{"name":"flood","version":"0"}}`
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

// stream floods log messages as fast as the gateway takes them, then
// sends roots/list and holds the stream open.
func (u *floodUpstream) stream(w http.ResponseWriter, r *http.Request) {
	n := u.gets.Add(1)
	defer u.gets.Add(-1)
	for {
		m := u.maxGets.Load()
		if n <= m || u.maxGets.CompareAndSwap(m, n) {
			break
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	bw := bufio.NewWriter(w)
	pad := strings.Repeat("x", 200)
	for i := range u.flood {
		if _, err := fmt.Fprintf(bw, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"%d %s\"}}\n\n", i, pad); err != nil {
			return
		}
		u.sent.Add(1)
	}
	fmt.Fprint(bw, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"method\":\"roots/list\"}\n\n")
	bw.Flush()
	_ = rc.Flush()
	<-r.Context().Done()
}

// rawSession initializes a session declaring caps and opens its GET
// stream, which the caller does not read; it returns the session id.
func rawSession(t *testing.T, url, caps string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"raw","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %s", resp.Status)
	}
	ctx, cancel := context.WithCancel(context.Background())
	get, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Mcp-Session-Id", sid)
	get.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	stream, err := http.DefaultClient.Do(get)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET: %v %v", err, stream)
	}
	t.Cleanup(func() {
		cancel()
		stream.Body.Close()
	})
	return sid
}

// TestListenFloodAtAClientThatDoesNotRead: an upstream floods log
// messages at a client whose GET stream is open and never read. The
// gateway holds a bounded queue: what does not fit is dropped and
// counted, the upstream is read on (not stalled), and its roots/list,
// which cannot reach the client, is refused at once rather than left to
// its timeout.
func TestListenFloodAtAClientThatDoesNotRead(t *testing.T) {
	const flood = 60_000
	u := newFloodUpstream(t, flood)
	g, url := startGatewayG(t, []upstreamSpec{{name: "flood", url: u.url}})
	sid := rawSession(t, url, `{"roots":{}}`)
	select {
	case <-u.answer:
	case <-time.After(30 * time.Second):
		t.Fatalf("no answer to roots/list; %d of %d log messages sent", u.sent.Load(), flood)
	}
	if u.sent.Load() != flood {
		t.Errorf("the upstream wrote %d of %d messages", u.sent.Load(), flood)
	}
	u.mu.Lock()
	ans := u.answers[0]
	u.mu.Unlock()
	e, _ := ans["error"].(map[string]any)
	if e == nil || e["code"].(float64) != -32603 || ans["id"] != "r1" {
		t.Errorf("answer to roots/list: %v", ans)
	}
	// The queue holds 64 messages and the sockets between the gateway and
	// the client a few MiB; the rest were dropped and counted.
	if n := limitCount(t, g, "stream_queue"); n < flood/2 {
		t.Errorf("stream_queue counted %d drops of %d messages", n, flood)
	}
	// The gateway's own messages for that stream: the queue's last place,
	// kept from the upstream, takes one (a few more while the stream still
	// writes into socket buffers); the rest are dropped and counted, and
	// the sender never waits.
	start := time.Now()
	for range 100 {
		if err := gateway.ServerOf(g).NotifySession(context.Background(), sid, []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("100 messages took %v", d)
	}
	if n := limitCount(t, g, "bus_queue"); n < 50 || n > 99 {
		t.Errorf("bus_queue counted %d drops of 100, want most of them (the queue's last place takes one)", n)
	}
	// A message over the bus's bound is refused to its sender.
	big := `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("x", 1<<20) + `"}}`
	if err := gateway.ServerOf(g).NotifySession(context.Background(), sid, []byte(big)); err == nil {
		t.Error("a message over 1 MiB went on the bus")
	}
}

// TestListenUpstreamStreamLimit: limits.upstream_streams bounds the
// upstream streams one replica opens for client sessions; past it a
// session hears no upstream, counted, and the others are unaffected.
func TestListenUpstreamStreamLimit(t *testing.T) {
	u := newFloodUpstream(t, 0)
	g, url := startGatewayG(t, []upstreamSpec{{name: "flood", url: u.url}}, func(c *config.Config) {
		c.Limits.UpstreamStreams = 2
		// The pool, not the shares (see TestUpstreamStreamsShare).
		c.Limits.UpstreamStreamsPerPrincipal, c.Limits.UpstreamStreamsPerTenant = 2, 2
	})
	for range 5 {
		rawSession(t, url, `{"roots":{}}`)
	}
	waitFor(t, func() bool { return u.gets.Load() == 2 && limitCount(t, g, "upstream_streams") >= 3 })
	time.Sleep(300 * time.Millisecond)
	if m := u.maxGets.Load(); m != 2 {
		t.Errorf("%d upstream streams open at once, want 2", m)
	}
	// A session that needs nothing (no roots, no subscription, no level)
	// opens none, and takes no slot.
	rawSession(t, url, `{}`)
	time.Sleep(300 * time.Millisecond)
	if n := limitCount(t, g, "upstream_streams"); n != 3 {
		t.Errorf("upstream_streams counted %d refusals, want 3", n)
	}
}
