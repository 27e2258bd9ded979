package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// legacyServer is a minimal 2024-11-05 HTTP+SSE server: GET /sse opens a
// stream whose first event names the endpoint; POSTs there are answered on
// the stream. "block" never answers; everything else is echoed as a result.
type legacyServer struct {
	srv      *httptest.Server
	endpoint string // the endpoint event's data; "" for /message?s=1

	mu       sync.Mutex
	posted   []string
	headers  []http.Header
	stream   chan []byte
	streamOK chan struct{}
}

func newLegacyServer(t *testing.T, endpoint string) *legacyServer {
	ls := &legacyServer{endpoint: endpoint, stream: make(chan []byte, 16), streamOK: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sse", func(w http.ResponseWriter, r *http.Request) {
		ls.mu.Lock()
		ls.headers = append(ls.headers, r.Header.Clone())
		ls.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		ep := ls.endpoint
		if ep == "" {
			ep = "/message?s=1"
		}
		fmt.Fprintf(w, "event: endpoint\ndata: %s\n\n", ep)
		w.(http.Flusher).Flush()
		for {
			select {
			case m := <-ls.stream:
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST /message", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ls.mu.Lock()
		ls.posted = append(ls.posted, string(b))
		ls.headers = append(ls.headers, r.Header.Clone())
		ls.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		m, err := jsonrpc.Decode(b)
		if err != nil || m.Kind != jsonrpc.KindRequest {
			return
		}
		switch m.Method {
		case "initialize":
			ls.stream <- jsonrpc.AppendResult(nil, m.ID, json.RawMessage(`{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"legacy","version":"1"}}`))
		case "block":
		default:
			ls.stream <- jsonrpc.AppendResult(nil, m.ID, json.RawMessage(`{"echo":`+string(orNull(m.Params))+`}`))
		}
	})
	// A POST to the Streamable HTTP URL is refused, as old servers do.
	mux.HandleFunc("POST /sse", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusMethodNotAllowed) })
	ls.srv = httptest.NewServer(mux)
	t.Cleanup(ls.srv.Close)
	return ls
}

func orNull(p json.RawMessage) json.RawMessage {
	if len(p) == 0 {
		return json.RawMessage("null")
	}
	return p
}

func (ls *legacyServer) postedMessages() string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return strings.Join(ls.posted, "\n")
}

func TestLegacySSE(t *testing.T) {
	for _, transport := range []string{config.TransportSSE, config.TransportAuto} {
		t.Run(transport, func(t *testing.T) {
			ls := newLegacyServer(t, "")
			c := New(config.Upstream{Name: "old", URL: ls.srv.URL + "/sse", Transport: transport, Headers: map[string]string{"Authorization": "Bearer cfg-token"}},
				Options{})
			defer c.Close()
			ctx := context.Background()
			res, err := c.Open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Session.ProtocolVersion != "2024-11-05" {
				t.Errorf("version %q", res.Session.ProtocolVersion)
			}
			r, err := c.Call(ctx, res.Session, jsonrpc.IntID(5), "tools/list", json.RawMessage(`{"x":1}`))
			if err != nil {
				t.Fatal(err)
			}
			m, _, err := r.Next()
			r.Close()
			if err != nil || m.Kind != jsonrpc.KindResponse || m.ID.String() != "5" || !strings.Contains(string(m.Result), `"x":1`) {
				t.Fatalf("tools/list = %+v, %v", m, err)
			}
			// Cancellation reaches the server, with the id it got.
			cctx, cancel := context.WithCancel(ctx)
			r, err = c.Call(cctx, res.Session, jsonrpc.IntID(6), "block", nil)
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			r.Close()
			eventually(t, func() bool { return strings.Contains(ls.postedMessages(), "notifications/cancelled") })
			// The configured credentials went with the GET and every POST.
			ls.mu.Lock()
			for _, h := range ls.headers {
				if h.Get("Authorization") != "Bearer cfg-token" {
					t.Errorf("a request without the configured header: %v", h)
				}
			}
			ls.mu.Unlock()
			if err := c.Terminate(ctx, res.Session); err != nil {
				t.Errorf("terminate: %v", err)
			}
		})
	}
}

// TestLegacySSEEndpointOrigin: an endpoint event naming another origin is
// refused: the POSTs would carry the upstream's credentials there.
func TestLegacySSEEndpointOrigin(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the credentials went to another origin")
	}))
	defer elsewhere.Close()
	ls := newLegacyServer(t, elsewhere.URL+"/message")
	c := New(config.Upstream{Name: "old", URL: ls.srv.URL + "/sse", Transport: config.TransportSSE, Headers: map[string]string{"Authorization": "Bearer cfg-token"}}, Options{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Open(ctx)
	if err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Fatalf("Open = %v, want a refusal of the endpoint", err)
	}
	if strings.Contains(err.Error(), "cfg-token") || strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("the error leaks the URL or a secret: %v", err)
	}
}

// TestAutoKeepsStreamableOn401: transport auto does not take a refusal of
// the credentials for a legacy server.
func TestAutoKeepsStreamableOn401(t *testing.T) {
	var gets sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Store(r.URL.Path, true)
		}
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	defer srv.Close()
	c := New(config.Upstream{Name: "new", URL: srv.URL + "/mcp", Transport: config.TransportAuto}, Options{})
	defer c.Close()
	_, err := c.Open(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
		t.Fatalf("Open = %v, want the 401", err)
	}
	if _, ok := gets.Load("/mcp"); ok || c.auto.sse.Load() {
		t.Error("a 401 made the client fall back to HTTP+SSE")
	}
}
