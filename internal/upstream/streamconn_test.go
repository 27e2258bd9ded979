package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/session"
)

// TestWatchOnItsOwnConnection: a legacy session's GET stream goes out on a
// connection of its own, written by the client: the request carries the
// session's headers and no default User-Agent, the events are read as
// they come, and Close closes the connection, which the upstream sees as
// its request ending.
func TestWatchOnItsOwnConnection(t *testing.T) {
	got := make(chan *http.Request, 1)
	ended := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(ended)
	}))
	defer srv.Close()
	c := New(config.Upstream{Name: "up1", URL: srv.URL + "/mcp", Timeout: config.Duration(5 * time.Second)}, Options{})
	defer c.Close()

	st, err := c.Watch(context.Background(), session.Upstream{SessionID: "up-session", ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.Method != http.MethodGet || r.URL.Path != "/mcp" || r.Header.Get("Mcp-Session-Id") != "up-session" ||
		r.Header.Get("Accept") != "text/event-stream" || r.Header.Get("User-Agent") != "" {
		t.Errorf("request %s %s, headers %v", r.Method, r.URL, r.Header)
	}
	msg, _, err := st.Next()
	if err != nil || msg.Method != "notifications/tools/list_changed" {
		t.Fatalf("Next: %v, %v", msg, err)
	}
	st.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's request did not end when the stream closed")
	}
}

// TestWatchOverMutualTLS: a stream on its own connection speaks TLS with
// the upstream's settings (its CA, the client certificate) and HTTP/1.1
// even to a server that offers HTTP/2.
func TestWatchOverMutualTLS(t *testing.T) {
	url, dir := mtlsUpstream(t)
	file := func(name string) string { return filepath.Join(dir, name) }
	c := tlsClient(t, url, &config.UpstreamTLS{CAFile: file("ca.pem"), CertFile: file("client.pem"), KeyFile: file("client-key.pem")})
	s := initialize(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := c.Watch(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	next := make(chan error, 1)
	go func() {
		_, _, err := st.Next()
		next <- err
	}()
	cancel() // the stream ends with its context
	select {
	case err := <-next:
		if err == nil {
			t.Error("Next returned a message after the context ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return when the context ended")
	}
}

// TestWatchHeaderBound: an upstream that answers a stream with endless
// headers is refused once they pass maxStreamHeaderBytes; the client
// reads no further.
func TestWatchHeaderBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sent := make(chan int64, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			sent <- 0
			return
		}
		defer conn.Close()
		_, _ = http.ReadRequest(bufio.NewReader(conn))
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
		line := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
		var n int64
		for n < 16<<20 { // 16 MiB, far past the bound
			m, err := io.WriteString(conn, line)
			n += int64(m)
			if err != nil {
				break
			}
		}
		sent <- n
	}()
	c := New(config.Upstream{Name: "up1", URL: "http://" + ln.Addr().String() + "/mcp", Timeout: config.Duration(5 * time.Second)}, Options{})
	defer c.Close()
	_, err = c.Watch(context.Background(), session.Upstream{SessionID: "s", ProtocolVersion: "2025-11-25"})
	if err == nil || !strings.Contains(err.Error(), errStreamHeaderTooBig.Error()) {
		t.Fatalf("Watch: %v, want %v", err, errStreamHeaderTooBig)
	}
	var e *Error
	if !errors.As(err, &e) || strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("error %q: want an *Error that does not name the upstream's address", err)
	}
	if n := <-sent; n >= 16<<20 {
		t.Errorf("the upstream wrote all %d bytes: the client kept reading", n)
	}
}
