package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/telemetry"
)

// lockedBuffer is a bytes.Buffer for a logger written from a server's
// goroutines and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// serveRecovered serves h behind the recoverer and the telemetry
// middleware, in the order Handler mounts them, on a real server: an
// aborted response must reach the client as a broken connection.
func serveRecovered(t *testing.T, h http.HandlerFunc) (url string, logs *lockedBuffer) {
	t.Helper()
	logs = &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	srv := httptest.NewServer(recoverer(log)(telemetry.HTTPMiddleware(nil, "/mcp")(h)))
	t.Cleanup(srv.Close)
	return srv.URL, logs
}

func TestRecovererBeforeTheResponseStarts(t *testing.T) {
	url, logs := serveRecovered(t, func(w http.ResponseWriter, r *http.Request) {
		panic("boom")
	})
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the 500: %v", err)
	}
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Content-Type") != "application/json" ||
		string(body) != `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}` {
		t.Errorf("got %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if l := logs.String(); !strings.Contains(l, "panic serving request") || !strings.Contains(l, "boom") || strings.Contains(l, "aborted") {
		t.Errorf("log: %s", l)
	}
}

// A panic once an SSE stream has started cannot be answered with a status:
// the headers are out. The connection is aborted instead, so the client
// sees the stream break off, not a 500 or an error glued to the stream.
func TestRecovererAfterTheResponseStarted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(w http.ResponseWriter)
	}{
		{"write", func(w http.ResponseWriter) {
			_, _ = w.Write([]byte("data: 1\n\n"))
			_ = http.NewResponseController(w).Flush()
		}},
		{"flush only", func(w http.ResponseWriter) {
			// Headers only, flushed through the http.Flusher assertion.
			w.(http.Flusher).Flush()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, logs := serveRecovered(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				tc.start(w)
				panic("boom")
			})
			resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Errorf("got %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			body, err := io.ReadAll(resp.Body)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("reading the stream: %v, want it broken off (unexpected EOF)", err)
			}
			if strings.Contains(string(body), "Internal error") || strings.Contains(string(body), "jsonrpc") {
				t.Errorf("an error written into the stream: %q", body)
			}
			if l := logs.String(); !strings.Contains(l, "panic serving request") || !strings.Contains(l, "boom") || !strings.Contains(l, "response=aborted") {
				t.Errorf("log: %s", l)
			}
		})
	}
}

// A handler's own http.ErrAbortHandler goes on as it is, unlogged.
func TestRecovererLetsAbortThrough(t *testing.T) {
	url, logs := serveRecovered(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: 1\n\n"))
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	})
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if line != "data: 1\n" {
		t.Errorf("first line %q", line)
	}
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading the stream: %v, want it broken off", err)
	}
	if l := logs.String(); l != "" {
		t.Errorf("log: %s", l)
	}
}

// The writer the handler gets still flushes through
// http.ResponseController, so an event reaches the client while the
// handler is still running.
func TestRecovererKeepsFlushing(t *testing.T) {
	release := make(chan struct{})
	url, _ := serveRecovered(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: 1\n\n"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		if err := http.NewResponseController(w).SetWriteDeadline(time.Time{}); err != nil {
			t.Errorf("SetWriteDeadline: %v", err)
		}
		<-release
	})
	// Without the flush the first line would not come before the timeout.
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	close(release)
	if err != nil || line != "data: 1\n" {
		t.Errorf("first line %q, %v", line, err)
	}
}
