package watch

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// hooks records what the watches tell, on channels the test waits on.
type hooks struct {
	opened   chan string
	notified chan string
}

func (h *hooks) Opened(up *upstream.Client, _ *upstream.InitResult) { h.opened <- up.Name() }
func (h *hooks) Notified(_ context.Context, _ *upstream.Client, _ session.Upstream, msg *jsonrpc.Message) {
	h.notified <- msg.Method
}
func (h *hooks) Missed(context.Context, *upstream.Client, session.Upstream) {}

// signalWriter tells ch when the response begins: the upstream has taken
// the stream.
type signalWriter struct {
	http.ResponseWriter
	ch   chan struct{}
	once sync.Once
}

func (s *signalWriter) signal() {
	s.once.Do(func() { s.ch <- struct{}{} })
}

func (s *signalWriter) WriteHeader(code int) {
	s.ResponseWriter.WriteHeader(code)
	s.signal()
}

func (s *signalWriter) Flush() {
	s.ResponseWriter.(http.Flusher).Flush()
	s.signal()
}

func receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing heard")
		return ""
	}
}

// TestWatchHearsListChanges: a watch opens a session of its own, hears
// the upstream's list_changed on it, and is ended (its session deleted)
// by a Sync that no longer names the upstream; Close waits for it.
func TestWatchHearsListChanges(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "u", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	mcp.AddTool(srv, &mcp.Tool{Name: "a"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	var deletes atomic.Int32
	streaming := make(chan struct{}, 1)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodDelete:
			deletes.Add(1)
		case http.MethodGet:
			w = &signalWriter{ResponseWriter: w, ch: streaming}
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	c := upstream.New(config.Upstream{Name: "u", URL: hs.URL, Transport: config.TransportHTTP}, upstream.Options{})
	rec := &hooks{opened: make(chan string, 4), notified: make(chan string, 16)}
	w := New(slog.New(slog.DiscardHandler), func(c *upstream.Client) *upstream.Client { return c }, rec)
	defer w.Close()

	w.Sync([]*upstream.Client{c})
	if got := receive(t, rec.opened); got != "u" {
		t.Fatalf("opened %q", got)
	}
	// The stream is open once the upstream answered the GET; a tool
	// added then is announced on it.
	select {
	case <-streaming:
	case <-time.After(10 * time.Second):
		t.Fatal("no stream")
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "b"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	if got := receive(t, rec.notified); got != "notifications/tools/list_changed" {
		t.Errorf("heard %q", got)
	}

	w.Sync(nil)
	w.mu.Lock()
	stopped := append([]*watcher(nil), w.stopped...)
	w.mu.Unlock()
	if len(stopped) != 1 {
		t.Fatalf("%d watches stopped", len(stopped))
	}
	<-stopped[0].done
	if deletes.Load() != 1 {
		t.Errorf("the watch's session was deleted %d times", deletes.Load())
	}
	w.Close()
	w.Sync([]*upstream.Client{c}) // after Close: starts nothing
	if len(w.m) != 0 {
		t.Error("a watch started after Close")
	}
}

// TestWatchSkipsQuietUpstreams: an upstream whose capabilities announce
// no list changes is not watched: its watch ends on its own.
func TestWatchSkipsQuietUpstreams(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "q", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(h)
	defer hs.Close()
	c := upstream.New(config.Upstream{Name: "q", URL: hs.URL, Transport: config.TransportHTTP}, upstream.Options{})
	rec := &hooks{opened: make(chan string, 4), notified: make(chan string, 16)}
	w := New(slog.New(slog.DiscardHandler), func(c *upstream.Client) *upstream.Client { return c }, rec)
	defer w.Close()
	w.Sync([]*upstream.Client{c})
	receive(t, rec.opened)
	w.mu.Lock()
	wt := w.m[c]
	w.mu.Unlock()
	select {
	case <-wt.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a quiet upstream's watch did not end")
	}
}

func TestAnnouncesListChanges(t *testing.T) {
	for caps, want := range map[string]bool{
		`{}`: false, `{"tools":{}}`: false, `{"tools":{"listChanged":false}}`: false,
		`{"prompts":{"listChanged":true}}`: true, `not json`: false,
	} {
		if got := AnnouncesListChanges([]byte(caps)); got != want {
			t.Errorf("%s: %v", caps, got)
		}
	}
}
