package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
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

// TestDeadConnection: the check a liveConn makes before a request.
func TestDeadConnection(t *testing.T) {
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
	defer c.Close()
	peer := <-accepted
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
	time.Sleep(10 * time.Millisecond)
	if c.peerClosed() {
		t.Error("a connection with unread data looks closed")
	}
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !c.peerClosed() {
		if time.Now().After(deadline) {
			t.Skip("cannot tell a closed connection on this platform")
		}
		time.Sleep(time.Millisecond)
	}
	// After a read, a write that would start a request fails with nothing
	// written.
	if n, err := c.Write([]byte("POST")); n != 0 || err == nil {
		t.Errorf("write on a connection the peer closed: %d, %v", n, err)
	}
}
