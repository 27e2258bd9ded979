package transport

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// detachServer serves each request by detaching it and handing the
// detached connection to serve, in a goroutine of its own, as runStream
// does; got receives nil when the connection could not be taken.
func detachServer(t *testing.T, serve func(d *detachedConn)) (*httptest.Server, chan *detachedConn) {
	t.Helper()
	got := make(chan *detachedConn, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Set-Before", "kept") // as a middleware would
		d := detach(w, r)
		got <- d
		if d == nil {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		go serve(d)
	}))
	return srv, got
}

// rawGET opens a connection to srv and writes request, as is.
func rawGET(t *testing.T, srv *httptest.Server, request string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestDetachedStream: a detached stream is a well-formed HTTP/1.1
// response (the headers set before the connection was taken, a chunked
// body of what was written, its end when the stream closes) and Flush
// sends the headers alone.
func TestDetachedStream(t *testing.T) {
	proceed := make(chan struct{})
	srv, got := detachServer(t, func(d *detachedConn) {
		d.Header().Set("Content-Type", "text/event-stream")
		d.WriteHeader(http.StatusOK)
		if err := http.NewResponseController(d).Flush(); err != nil {
			t.Error(err)
		}
		<-proceed
		for _, ev := range []string{"data: one\n\n", "data: two\n\n"} {
			if _, err := d.Write([]byte(ev)); err != nil {
				t.Error(err)
			}
		}
		d.close()
	})
	srv.Start()
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err) // the headers arrived before any event was written
	}
	defer resp.Body.Close()
	if <-got == nil {
		t.Fatal("an HTTP/1.1 connection was not detached")
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Set-Before") != "kept" ||
		resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Date") == "" {
		t.Errorf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || !resp.Close {
		t.Errorf("transfer encoding %v, close %v: want a chunked body on a connection that closes", resp.TransferEncoding, resp.Close)
	}
	close(proceed)
	body, err := io.ReadAll(resp.Body) // a clean end: the last chunk came
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != "data: one\n\ndata: two\n\n" {
		t.Errorf("body %q", body)
	}
}

// TestDetachedStreamClientLeaves: the stream's context ends when the
// client closes its connection, and a write after that fails.
func TestDetachedStreamClientLeaves(t *testing.T) {
	ended := make(chan error, 1)
	srv, got := detachServer(t, func(d *detachedConn) {
		d.Header().Set("Content-Type", "text/event-stream")
		_ = http.NewResponseController(d).Flush()
		<-d.ctx.Done()
		_, err := d.Write([]byte("data: late\n\n"))
		d.close()
		ended <- err
	})
	srv.Start()
	defer srv.Close()

	conn := rawGET(t, srv, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
	<-got
	conn.Close()
	select {
	case err := <-ended:
		if err == nil {
			t.Error("a write after the client left succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not notice its client leave")
	}
}

// TestDetachedStreamPipelined: a client that sends anything beyond its
// request, which no response on this connection could answer, ends the
// stream at once.
func TestDetachedStreamPipelined(t *testing.T) {
	ended := make(chan struct{})
	srv, got := detachServer(t, func(d *detachedConn) {
		<-d.ctx.Done()
		d.close()
		close(ended)
	})
	srv.Start()
	defer srv.Close()

	req := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	conn := rawGET(t, srv, req+strings.Replace(req, "/", "/second", 1))
	defer conn.Close()
	if <-got == nil {
		t.Fatal("not detached")
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("a pipelined request left the stream running")
	}
}

// TestDetachHTTP2: an HTTP/2 stream cannot be taken from its connection;
// detach says so, and the handler answers as usual.
func TestDetachHTTP2(t *testing.T) {
	srv, got := detachServer(t, func(d *detachedConn) { d.close() })
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("the test server spoke %s", resp.Proto)
	}
	if d := <-got; d != nil {
		t.Error("an HTTP/2 stream was detached")
	}
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("status %d: the handler could not answer after detach declined", resp.StatusCode)
	}
}

// TestDetachedStreamOwnerCloses: ending the context (the gateway closing)
// ends a stream waiting for its client, and close waits for the reader.
func TestDetachedStreamOwnerCloses(t *testing.T) {
	done := make(chan struct{})
	srv, got := detachServer(t, func(d *detachedConn) {
		ctx, cancel := context.WithCancel(context.Background())
		stop := context.AfterFunc(ctx, d.cancel)
		defer stop()
		cancel()
		<-d.ctx.Done()
		d.close()
		close(done)
	})
	srv.Start()
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
	}
	<-got
	<-done
}

// TestDetachedStreamClientStopsReading: a client that stops reading holds
// its stream only until a write has waited the write timeout; the write
// then fails and the stream's context ends.
func TestDetachedStreamClientStopsReading(t *testing.T) {
	failed := make(chan int, 1)
	srv, got := detachServer(t, func(d *detachedConn) {
		d.timeout = 200 * time.Millisecond
		ev := []byte("data: " + strings.Repeat("x", 64<<10) + "\n\n")
		n := 0
		for ; n < 4096; n++ { // 256 MiB: far more than the kernel buffers
			if _, err := d.Write(ev); err != nil {
				break
			}
		}
		<-d.ctx.Done()
		d.close()
		failed <- n
	})
	srv.Start()
	defer srv.Close()

	conn := rawGET(t, srv, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	defer conn.Close()
	<-got
	select { // never reads
	case n := <-failed:
		if n == 4096 {
			t.Fatal("every write succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write to a client that does not read never timed out")
	}
}
