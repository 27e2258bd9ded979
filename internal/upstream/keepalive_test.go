package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/testkit"
)

// callCounter is an upstream that answers every tools/call at once with a
// JSON result echoing its arguments, and counts the calls it received by
// their arguments. With crash set it reads the next call and then drops
// the connection without an answer, as a process dying mid-call would.
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int
	crash bool
}

func (u *callCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &msg)
	u.mu.Lock()
	u.calls[string(msg.Params.Arguments)]++
	crash := u.crash
	u.mu.Unlock()
	if crash {
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":{"content":[],"args":` + string(msg.Params.Arguments) + `}}`))
}

func (u *callCounter) count(args string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[args]
}

// callOnce sends tools/call with args and reads its answer.
func callOnce(c *Client, id int, args string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Call(ctx, session.Upstream{SessionID: "s", ProtocolVersion: "2025-11-25"}, jsonrpc.IntID(int64(id)), "tools/call",
		json.RawMessage(`{"name":"echo","arguments":`+args+`}`))
	if err != nil {
		return err
	}
	defer resp.Close()
	msg, raw, err := resp.Next()
	if err != nil {
		return err
	}
	if msg.Kind != jsonrpc.KindResponse || !bytes.Contains(raw, []byte(`"args":`+args)) {
		return fmt.Errorf("answer %s", raw)
	}
	return nil
}

// TestCallAfterUpstreamClosedIdleConnections: an upstream that restarts
// closes the keep-alive connections the client holds. A tools/call sent
// at once, before the client's transport noticed, must not be lost on such
// a connection (nothing of it reached the upstream, so it goes again), and
// must reach the upstream exactly once.
func TestCallAfterUpstreamClosedIdleConnections(t *testing.T) {
	u := &callCounter{calls: map[string]int{}}
	srv := httptest.NewServer(u)
	defer srv.Close()
	c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{})
	for i := range 200 {
		// Several connections go idle in the pool.
		var wg sync.WaitGroup
		for j := range 3 {
			wg.Go(func() {
				if err := callOnce(c, 1000*i+j, `{"warm":"`+strconv.Itoa(1000*i+j)+`"}`); err != nil {
					t.Errorf("warm-up call: %v", err)
				}
			})
		}
		wg.Wait()
		srv.CloseClientConnections()
		args := `{"n":"` + strconv.Itoa(i) + `"}`
		if err := callOnce(c, i, args); err != nil {
			t.Fatalf("call %d right after the upstream closed its connections: %v", i, err)
		}
		if n := u.count(args); n != 1 {
			t.Fatalf("call %d reached the upstream %d times, want 1", i, n)
		}
	}
}

// closingListener closes the first connection it accepts at once, and
// tells closed.
type closingListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *closingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		first := false
		l.once.Do(func() { first = true })
		if !first {
			return c, nil
		}
		c.Close()
		close(l.closed)
	}
}

// TestCallOnConnectionClosedBeforeUse: a connection the upstream closed
// before the client wrote anything on it (one dialed for a call that then
// went out on another, left in the pool) is one net/http will not send a
// request on again, since it was never used. The call goes again on
// another, and reaches the upstream once.
func TestCallOnConnectionClosedBeforeUse(t *testing.T) {
	for i := range 20 {
		u := &callCounter{calls: map[string]int{}}
		srv := httptest.NewUnstartedServer(u)
		ln := &closingListener{Listener: srv.Listener, closed: make(chan struct{})}
		srv.Listener = ln
		srv.Start()
		c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{})
		dial := c.own.DialContext
		c.own.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err == nil {
				// The first connection is handed over once the upstream
				// has closed it.
				select {
				case <-ln.closed:
				case <-ctx.Done():
				}
			}
			return conn, err
		}
		args := `{"n":` + strconv.Itoa(i) + `}`
		if err := callOnce(c, 1, args); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if n := u.count(args); n != 1 {
			t.Fatalf("call %d reached the upstream %d times, want 1", i, n)
		}
		srv.Close()
	}
}

// TestCallLostMidRequestIsNotResent: a connection that breaks after the
// upstream received the call (it died before answering) may have run the
// tool: the call fails and is never sent again.
func TestCallLostMidRequestIsNotResent(t *testing.T) {
	u := &callCounter{calls: map[string]int{}}
	srv := httptest.NewServer(u)
	defer srv.Close()
	c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{})
	// A reused connection: the one case where net/http would consider
	// sending a request again.
	if err := callOnce(c, 1, `{"warm":1}`); err != nil {
		t.Fatal(err)
	}
	u.mu.Lock()
	u.crash = true
	u.mu.Unlock()
	if err := callOnce(c, 2, `{"n":1}`); err == nil {
		t.Fatal("a call the upstream dropped mid-way succeeded")
	}
	if n := u.count(`{"n":1}`); n != 1 {
		t.Errorf("the call reached the upstream %d times, want 1", n)
	}
}

// liveConnPair returns a liveConn on a loopback connection, and the
// connection's other end; both are closed when the test ends.
func liveConnPair(t *testing.T) (*liveConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newLiveConn(raw)
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c, peer
}

// TestDeadConnection: the check a liveConn makes before a request.
func TestDeadConnection(t *testing.T) {
	c, peer := liveConnPair(t)
	if c.peerClosed() {
		t.Fatal("an open connection looks closed")
	}
	// The check is on every call's path: it allocates nothing.
	if n := testing.AllocsPerRun(100, func() { c.peerClosed() }); n != 0 {
		t.Errorf("the check allocates %v times", n)
	}
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return hasUnread(c) }, "the byte written did not arrive")
	if c.peerClosed() {
		t.Error("a connection with unread data looks closed")
	}
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	if !testkit.Poll(5*time.Second, c.peerClosed) {
		if peekSupported {
			t.Fatal("a connection the peer closed still looks open")
		}
		t.Skip("cannot tell a closed connection on this platform")
	}
	// A write that would start a request fails with nothing written, and
	// a connection on which nothing was written says so when read.
	if n, err := c.Write([]byte("POST")); n != 0 || !errors.Is(err, errClosedBeforeSent) {
		t.Errorf("write on a connection the peer closed: %d, %v", n, err)
	}
	if _, err := c.Read(buf); !errors.Is(err, errClosedBeforeSent) {
		t.Errorf("read on a connection the peer closed before any write: %v", err)
	}
}

// A connection that was written on reports a read error as it is: the
// upstream may have received something.
func TestUsedConnectionReadsEOF(t *testing.T) {
	c, peer := liveConnPair(t)
	if _, err := c.Write([]byte("GET")); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	// EOF, or a reset: the peer closed with our bytes unread.
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, errClosedBeforeSent) {
		t.Errorf("read: %v, want the connection's own error", err)
	}
}

// TestUpstreamThatClosesAtOnce: an upstream that accepts every connection
// and closes it at once (a load balancer with no backend) fails a call
// after a few dials, not a pool's worth: a call is sent again on a fresh
// connection at most neverUsedRetries times.
func TestUpstreamThatClosesAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	c := newTestClient(t, "http://"+ln.Addr().String()+"/mcp", 5*time.Second, nil, Options{})
	for i := range 20 {
		if err := callOnce(c, i, `{}`); err == nil {
			t.Fatal("a call to an upstream that closes every connection succeeded")
		}
	}
	if n := accepted.Load(); n > 20*(1+neverUsedRetries) {
		t.Errorf("20 calls dialed %d connections, want at most %d", n, 20*(1+neverUsedRetries))
	}
}
