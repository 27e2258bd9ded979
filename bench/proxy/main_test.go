package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/gateway/bench/echoserver"
)

func startProxy(t *testing.T, upstream string, maxBody int64) *httptest.Server {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	ps := httptest.NewServer(newProxy(u, maxBody, 64))
	t.Cleanup(ps.Close)
	return ps
}

func post(t *testing.T, c *http.Client, url, session, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Error(err)
		return nil, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("reading the response: %v", err)
	}
	return resp, string(b)
}

// TestProxySSEUnderLoad sends many concurrent tool calls through the proxy
// to an SSE upstream and checks that every stream arrives whole: the
// truncation of Go issue 40747 showed in about 1% of such responses.
func TestProxySSEUnderLoad(t *testing.T) {
	us := httptest.NewServer(echoserver.NewHandler(echoserver.Options{}))
	defer us.Close()
	ps := startProxy(t, us.URL, 1<<20)
	c := ps.Client()
	c.Transport.(*http.Transport).MaxIdleConnsPerHost = 16
	endpoint := ps.URL + echoserver.Path

	resp, body := post(t, c, endpoint, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if resp == nil || resp.StatusCode != http.StatusOK || !strings.Contains(body, `"protocolVersion"`) {
		t.Fatalf("initialize: %v %q", resp, body)
	}
	session := resp.Header.Get("Mcp-Session-Id")
	if resp, _ := post(t, c, endpoint, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp == nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %v", resp)
	}

	const workers, perWorker = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				id := 100 + w*perWorker + i
				text := fmt.Sprintf("%d:%s", id, strings.Repeat("y", 2000))
				resp, body := post(t, c, endpoint, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, id, text))
				if resp == nil {
					return
				}
				if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" ||
					!strings.Contains(body, fmt.Sprintf(`"id":%d,`, id)) || !strings.Contains(body, text) || !strings.HasSuffix(body, "\n\n") {
					t.Errorf("call %d: %d %s: %.200q", id, resp.StatusCode, resp.Header.Get("Content-Type"), body)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestProxyForwardsWithLength checks that a chunked request body reaches
// the upstream with a Content-Length, and that a body over the limit gets
// 413 without reaching it.
func TestProxyForwardsWithLength(t *testing.T) {
	type seen struct {
		length int64
		te     []string
		body   string
		path   string
		host   string
	}
	got := make(chan seen, 1)
	us := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.ContentLength, r.TransferEncoding, string(b), r.URL.Path, r.Host}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	defer us.Close()
	ps := startProxy(t, us.URL, 100)

	// An io.Reader that is not a *strings.Reader makes the client send the
	// body chunked.
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	resp, err := http.Post(ps.URL+"/mcp", "application/json", io.MultiReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != `{"ok":true}` {
		t.Errorf("response: %d %q", resp.StatusCode, b)
	}
	s := <-got
	if s.length != int64(len(body)) || len(s.te) != 0 || s.body != body || s.path != "/mcp" || s.host != strings.TrimPrefix(us.URL, "http://") {
		t.Errorf("upstream saw %+v", s)
	}

	resp, err = http.Post(ps.URL+"/mcp", "application/json", bytes.NewReader(make([]byte, 101)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("101-byte body: status %d, want 413", resp.StatusCode)
	}
	select {
	case s := <-got:
		t.Errorf("the upstream got the oversized request: %+v", s)
	default:
	}
}

func TestRunFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-upstream", "ftp://x"},
		{"-upstream", "http://127.0.0.1:1/mcp"},
	} {
		if err := run(t.Context(), args, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "-upstream") {
			t.Errorf("run(%q) = %v, want an -upstream error", args, err)
		}
	}
}
