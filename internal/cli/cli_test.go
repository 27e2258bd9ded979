package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	fs := NewFlagSet("t", io.Discard)
	n := fs.Int("n", 0, "")
	if err := Parse(fs, []string{"-n", "3"}); err != nil || *n != 3 {
		t.Errorf("Parse(-n 3) = %v, n = %d", err, *n)
	}
	fs = NewFlagSet("t", io.Discard)
	if err := Parse(fs, []string{"extra"}); err == nil || err.Error() != `unexpected arguments: ["extra"]` {
		t.Errorf("Parse(extra) = %v", err)
	}
}

func TestKeyValues(t *testing.T) {
	kv := KeyValues{}
	for _, s := range []string{"a=1", "b=", "a=x=y"} {
		if err := kv.Set(s); err != nil {
			t.Errorf("Set(%q) = %v", s, err)
		}
	}
	if len(kv) != 2 || kv["a"] != "x=y" || kv["b"] != "" {
		t.Errorf("got %v", kv)
	}
	for _, s := range []string{"a", "=1"} {
		if err := kv.Set(s); err == nil {
			t.Errorf("Set(%q) accepted", s)
		}
	}
}

func TestMicros(t *testing.T) {
	for us, want := range map[float64]string{0: "0µs", 850: "850µs", 1000: "1.00ms", 12500: "12.50ms", 1.25e6: "1.25s"} {
		if got := Micros(us); got != want {
			t.Errorf("Micros(%v) = %q, want %q", us, got, want)
		}
	}
}

func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, srv, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}
