package gateway_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestStreamedAnswerShape: an upstream that streams nothing but its
// result, quickly, is answered with a JSON body (no event ids, no event
// log); one whose stream stays silent longer gets a stream whose priming
// event, with an id, comes before its result, so that a client can resume
// it.
func TestStreamedAnswerShape(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"slow"`)) {
			// Headers at once, the result 300 ms later.
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sseEchoUpstream(w, r)
	}))
	t.Cleanup(up.Close)
	url := startGateway(t, []upstreamSpec{{name: "e", url: up.URL}})
	resp, body := do(t, post(t, url, "", initBody))
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}

	resp, body = do(t, post(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"e__echo","arguments":{"text":"quick"}}}`))
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" || !strings.Contains(body, `"id":2`) {
		t.Errorf("a quick call: %s %s", ct, body)
	}

	resp, err := http.DefaultClient.Do(post(t, url, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"e__echo","arguments":{"text":"slow"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	all := strings.Join(lines, "\n")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || !strings.HasPrefix(all, "id: ") || !strings.Contains(all, `"id":3`) {
		t.Errorf("a slow call: %s\n%s", ct, all)
	}
}
