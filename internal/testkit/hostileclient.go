package testkit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A HostileClient is a raw-HTTP MCP client that does what a hostile tenant
// with a valid token would: bodies sent a byte at a time after announcing
// megabytes, initializes by the hundred, batches of tens of thousands of
// messages, streams left open, and any bytes at all as a JSON-RPC message.
// It speaks HTTP/1.1 with net/http where the request is well formed and
// over a bare TCP connection where it is not (see [HostileClient.SlowBody]).
//
// Every request carries the headers a conforming client sends (Content-Type
// application/json, Accept application/json and text/event-stream), the
// bearer token if one is set, and Header. Everything it starts is stopped,
// and waited for, by the test's Cleanup.
type HostileClient struct {
	URL   string // the MCP endpoint
	Token string // sent as a bearer token when not ""
	// Header is added to every request (say, Mcp-Protocol-Version).
	Header http.Header

	tb   testing.TB
	http *http.Client

	mu    sync.Mutex
	conns []*SlowConn
}

// NewHostileClient returns a HostileClient of endpoint url, with its own
// connection pool, closed at the end of the test.
func NewHostileClient(tb testing.TB, url string) *HostileClient {
	tb.Helper()
	c := &HostileClient{
		URL: url, Header: http.Header{}, tb: tb,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	tb.Cleanup(func() {
		c.mu.Lock()
		conns := c.conns
		c.conns = nil
		c.mu.Unlock()
		for _, sc := range conns {
			sc.Close()
		}
		c.http.CloseIdleConnections()
	})
	return c
}

// A HostileResponse is a response read whole.
type HostileResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r *HostileResponse) String() string {
	return fmt.Sprintf("%d %s", r.Status, r.Body)
}

// header sets the headers of every request on h.
func (c *HostileClient) header(h http.Header, sid string) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	if c.Token != "" {
		h.Set("Authorization", "Bearer "+c.Token)
	}
	if sid != "" {
		h.Set("Mcp-Session-Id", sid)
	}
	for k, v := range c.Header {
		h[k] = v
	}
}

// Do sends an HTTP request of method to the endpoint, in session sid (""
// for none), and returns the response unread: the caller closes its body.
// It is how a test holds a stream open (GET, or a POST answered with one).
func (c *HostileClient) Do(ctx context.Context, method, sid string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	c.header(req.Header, sid)
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	}
	return c.http.Do(req)
}

// Post sends body, any bytes, as one POST in session sid ("" for none) and
// reads the whole answer.
func (c *HostileClient) Post(ctx context.Context, sid string, body []byte) (*HostileResponse, error) {
	resp, err := c.Do(ctx, http.MethodPost, sid, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return &HostileResponse{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// InitializeBody is an initialize request for protocol version version,
// with clientInfo info and capabilities caps as given (raw JSON; nil means
// a small valid value).
func InitializeBody(version string, info, caps []byte) []byte {
	if info == nil {
		info = []byte(`{"name":"hostile","version":"0"}`)
	}
	if caps == nil {
		caps = []byte(`{}`)
	}
	b := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":`, version)
	b = append(b, caps...)
	b = append(b, `,"clientInfo":`...)
	b = append(b, info...)
	return append(b, "}}"...)
}

// Initializes sends n initializes (2025-11-25, small params) with at most
// parallel in flight, and returns the answers in order. A request that
// failed to get an answer fails the test.
func (c *HostileClient) Initializes(ctx context.Context, n, parallel int) []*HostileResponse {
	c.tb.Helper()
	out := make([]*HostileResponse, n)
	errs := make([]error, n)
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i], errs[i] = c.Post(ctx, "", InitializeBody("2025-11-25", nil, nil))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.tb.Fatalf("initializes: %v", err)
	}
	return out
}

// Batch returns a JSON-RPC batch of n copies of msg (one JSON-RPC message,
// as JSON text).
func Batch(msg string, n int) []byte {
	b := make([]byte, 0, n*(len(msg)+1)+1)
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, msg...)
	}
	return append(b, ']')
}

// A SlowConn is one POST whose body is sent a byte at a time, on a bare
// TCP connection: see [HostileClient.SlowBody].
type SlowConn struct {
	conn net.Conn
	done chan struct{} // closed when the server has answered and closed, or Close
	wg   sync.WaitGroup
	once sync.Once

	mu     sync.Mutex
	status int   // the answer's status, 0 until one arrives
	sent   int64 // body bytes written
	err    error // why the reader stopped: io.EOF is the server closing
}

// SlowBody opens a TCP connection to the endpoint, sends a POST's headers
// announcing a body of contentLength bytes (in session sid, "" for none),
// then writes one byte of it every interval, never all of it. It returns
// once the headers are written; the connection lives until the server
// closes it, the test ends, or Close.
func (c *HostileClient) SlowBody(sid string, contentLength int64, interval time.Duration) (*SlowConn, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, err
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	c.header(h, sid)
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", u.RequestURI(), u.Host, contentLength)
	_ = h.Write(&b)
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		conn.Close()
		return nil, err
	}
	sc := &SlowConn{conn: conn, done: make(chan struct{})}
	sc.wg.Go(sc.read)
	sc.wg.Go(func() { sc.write(contentLength, interval) })
	c.mu.Lock()
	c.conns = append(c.conns, sc)
	c.mu.Unlock()
	return sc, nil
}

// write sends one byte of the body per interval until the connection
// fails or is closed.
func (sc *SlowConn) write(n int64, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for i := int64(1); i < n; i++ { // one byte short: the body never ends
		select {
		case <-sc.done:
			return
		case <-t.C:
		}
		if _, err := sc.conn.Write([]byte{'{'}); err != nil {
			return
		}
		sc.mu.Lock()
		sc.sent++
		sc.mu.Unlock()
	}
}

// read waits for the answer and then for the server to close.
func (sc *SlowConn) read() {
	defer sc.once.Do(func() { close(sc.done) })
	br := bufio.NewReader(sc.conn)
	resp, err := http.ReadResponse(br, nil)
	if err == nil {
		sc.mu.Lock()
		sc.status = resp.StatusCode
		sc.mu.Unlock()
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// Then the connection itself: the server closes it, or keeps it.
		_, err = br.ReadByte()
	}
	sc.mu.Lock()
	sc.err = err
	sc.mu.Unlock()
}

// Done is closed when the server has closed the connection (or Close was
// called).
func (sc *SlowConn) Done() <-chan struct{} { return sc.done }

// Result returns the status of the server's answer (0 if none came), the
// body bytes sent so far, and why reading stopped: io.EOF when the server
// closed the connection.
func (sc *SlowConn) Result() (status int, sent int64, err error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.status, sc.sent, sc.err
}

// Close closes the connection and waits for its goroutines.
func (sc *SlowConn) Close() {
	sc.once.Do(func() { close(sc.done) })
	sc.conn.Close()
	sc.wg.Wait()
}

// StatusText is Status and Retry-After of a response, for messages.
func (r *HostileResponse) StatusText() string {
	return strconv.Itoa(r.Status) + " Retry-After=" + r.Header.Get("Retry-After")
}
