package openapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A recorder is a REST API that records what it was sent and answers
// with answer.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func (r *recorder) last() (*http.Request, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1], r.body[len(r.body)-1]
}

func restServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *recorder) {
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, r)
		rec.body = append(rec.body, string(b))
		rec.mu.Unlock()
		if answer != nil {
			answer(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, rec
}

// mcpPost sends one JSON-RPC message to rt and returns the status and
// body.
func mcpPost(t *testing.T, rt http.RoundTripper, body string, hdr http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://upstream.invalid/mcp", strings.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// callResult calls tool name with args and returns the tool result.
func callResult(t *testing.T, rt http.RoundTripper, name, args string, hdr http.Header) map[string]any {
	t.Helper()
	status, body := mcpPost(t, rt, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`","arguments":`+args+`}}`, hdr)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  any            `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.Result == nil {
		t.Fatalf("%s: %v", body, err)
	}
	return msg.Result
}

func resultText(res map[string]any) string {
	c := res["content"].([]any)
	return c[0].(map[string]any)["text"].(string)
}

func noRedirects() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestCallBuildsRequest: path values stay in their segment, query, header
// and cookie parameters follow their styles, the body passes as written,
// and the MCP request's credential headers are the REST request's while
// the protocol's are not.
func TestCallBuildsRequest(t *testing.T) {
	srv, rec := restServer(t, nil)
	a := compileOK(t, storeDoc, Options{BaseURL: srv.URL + "/v1"})
	rt := a.Transport(noRedirects(), 1<<20)
	hdr := http.Header{"Authorization": {"Bearer gateway-chosen"}, "X-Api-Key": {"k1"}, "Traceparent": {"00-abc-def-01"},
		"Mcp-Session-Id": {"s"}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"get_item_"}}
	res := callResult(t, rt, "get_item_", `{"itemId":"a/b c","fields":["x","y"],"X-Tenant-Hint":"h","session":"s1"}`, hdr)
	if res["isError"] == true {
		t.Fatalf("error: %v", res)
	}
	r, _ := rec.last()
	if got := r.URL.EscapedPath(); got != "/v1/items/a%2Fb%20c" {
		t.Errorf("path %q", got)
	}
	if got := r.URL.RawQuery; got != "fields=x&fields=y" {
		t.Errorf("query %q", got)
	}
	if r.Header.Get("X-Tenant-Hint") != "h" || r.Header.Get("Cookie") != "session=s1" {
		t.Errorf("header, cookie: %v", r.Header)
	}
	if r.Header.Get("Authorization") != "Bearer gateway-chosen" || r.Header.Get("X-Api-Key") != "k1" || r.Header.Get("Traceparent") == "" {
		t.Errorf("credentials not forwarded: %v", r.Header)
	}
	for _, k := range []string{"Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name"} {
		if r.Header.Get(k) != "" {
			t.Errorf("%s forwarded", k)
		}
	}
	// The Item output schema is an object: structured content.
	if res["structuredContent"].(map[string]any)["ok"] != true {
		t.Errorf("structured content: %v", res)
	}

	res = callResult(t, rt, "createItem", `{"body":{"name":"n","tag":null}}`, nil)
	r, body := rec.last()
	if r.Method != http.MethodPost || body != `{"name":"n","tag":null}` || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("create: %s %q %v", r.Method, body, r.Header)
	}
	if res["structuredContent"] != nil || resultText(res) != `{"ok":true}` {
		t.Errorf("create result (no outputSchema): %v", res)
	}

	for args, want := range map[string]string{
		`{"itemId":".."}`:                   "must not be empty, . or ..",
		`{}`:                                `Missing required argument "itemId"`,
		`{"itemId":"1","other":1}`:          `Unknown argument "other"`,
		`{"itemId":"1","fields":[{"a":1}]}`: "holds only strings",
		`{"itemId":"1","X-Tenant-Hint":"a\r\nb: c"}`: "not a valid header value",
	} {
		res := callResult(t, rt, "get_item_", args, nil)
		if res["isError"] != true || !strings.Contains(resultText(res), want) {
			t.Errorf("%s: %v, want %q", args, res, want)
		}
	}
	// An argument cannot replace a header the gateway set.
	res = callResult(t, rt, "get_item_", `{"itemId":"1","X-Tenant-Hint":"x"}`, http.Header{"X-Tenant-Hint": {"gw"}})
	if res["isError"] != true || !strings.Contains(resultText(res), "replace a header") {
		t.Errorf("header override: %v", res)
	}
	if res := callResult(t, rt, "createItem", `{}`, nil); res["isError"] != true {
		t.Errorf("missing body: %v", res)
	}
}

// TestCallStyles: the query, path, header and cookie styles of a public
// document of every style.
func TestCallStyles(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("testdata", "parameters-style-3.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv, rec := restServer(t, nil)
	a := compileOK(t, string(doc), Options{BaseURL: srv.URL})
	rt := a.Transport(noRedirects(), 1<<20)
	args := `{"primitive":"p v","array":["a","b"],"object":{"k":"v","n":1}}`
	for _, tc := range []struct {
		tool, args string
		check      func(r *http.Request) string
		want       string
	}{
		{"query_form_exploded", args, func(r *http.Request) string { return r.URL.RawQuery }, "array=a&array=b&k=v&n=1&primitive=p+v"},
		{"query_form_nonExploded", args, func(r *http.Request) string { return r.URL.RawQuery }, "array=a%2Cb&object=k%2Cv%2Cn%2C1&primitive=p+v"},
		{"query_pipeDelimited_nonExploded", `{"array":["a","b c"]}`, func(r *http.Request) string { return r.URL.RawQuery }, "array=a|b+c"},
		{"query_deepObject_nonExploded", `{"object":{"k":"v"}}`, func(r *http.Request) string { return r.URL.RawQuery }, "object%5Bk%5D=v"},
		{"paths_simple_exploded", args, func(r *http.Request) string { return r.URL.EscapedPath() }, "/anything/path/simple/p%20v/a,b/k=v,n=1"},
		{"headers_simple_exploded", args, func(r *http.Request) string {
			return r.Header.Get("primitive") + "|" + r.Header.Get("array") + "|" + r.Header.Get("object")
		}, "p v|a,b|k=v,n=1"},
		{"cookies_form_nonExploded", args, func(r *http.Request) string { return r.Header.Get("Cookie") }, "primitive=p v; array=a,b; object=k,v,n,1"},
	} {
		res := callResult(t, rt, tc.tool, tc.args, nil)
		if res["isError"] == true {
			t.Errorf("%s: %v", tc.tool, res)
			continue
		}
		r, _ := rec.last()
		if got := tc.check(r); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.tool, got, tc.want)
		}
	}
}

// TestCallAnswers: statuses, content types and sizes become results.
func TestCallAnswers(t *testing.T) {
	srv, _ := restServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/items/404":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"code":404,"message":"no such item"}`)
		case "/v1/items/500":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "database on fire\x00\x1b[31m"+strings.Repeat("x", 5000))
		case "/v1/items/redirect":
			http.Redirect(w, r, "http://elsewhere.example/", http.StatusFound)
		case "/v1/items/big":
			_, _ = io.WriteString(w, strings.Repeat("y", 2000))
		case "/v1/items/text":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "plain words")
		case "/v1/items/png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte{0x89, 'P', 'N', 'G'})
		case "/v1/items/array":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `[1,2]`)
		case "/v1/items/empty":
			w.WriteHeader(http.StatusNoContent)
		}
	})
	a := compileOK(t, storeDoc, Options{BaseURL: srv.URL + "/v1"})
	rt := a.Transport(noRedirects(), 1000)
	for id, want := range map[string]string{
		"404":      `HTTP 404 Not Found: {"code":404,"message":"no such item"}`,
		"redirect": "HTTP 302 Found",
		"big":      "larger than 1000 bytes",
	} {
		res := callResult(t, rt, "get_item_", `{"itemId":"`+id+`"}`, nil)
		if res["isError"] != true || !strings.Contains(resultText(res), want) {
			t.Errorf("%s: %v, want %q", id, res, want)
		}
	}
	res := callResult(t, rt, "get_item_", `{"itemId":"500"}`, nil)
	txt := resultText(res)
	if res["isError"] != true || !strings.HasPrefix(txt, "HTTP 500 Internal Server Error: database on fire[31m") || len(txt) > 1100 || strings.ContainsAny(txt, "\x00\x1b") {
		t.Errorf("500: %d bytes %q", len(txt), txt[:min(len(txt), 80)])
	}
	for id, want := range map[string]string{"text": "plain words", "array": "[1,2]", "empty": "(no content; HTTP 204)"} {
		res := callResult(t, rt, "get_item_", `{"itemId":"`+id+`"}`, nil)
		if res["isError"] == true || resultText(res) != want || res["structuredContent"] != nil {
			t.Errorf("%s: %v", id, res)
		}
	}
	res = callResult(t, rt, "get_item_", `{"itemId":"png"}`, nil)
	if c := res["content"].([]any)[0].(map[string]any); c["type"] != "image" || c["mimeType"] != "image/png" {
		t.Errorf("png: %v", res)
	}

	// An API that cannot be reached: an error that does not name it.
	srv.Close()
	res = callResult(t, rt, "get_item_", `{"itemId":"1"}`, nil)
	if txt := resultText(res); res["isError"] != true || strings.Contains(txt, "127.0.0.1") {
		t.Errorf("down: %v", res)
	}
}

// TestCallCancelled: the request's context ends the REST request, and the
// round trip fails with it.
func TestCallCancelled(t *testing.T) {
	started := make(chan struct{})
	srv, _ := restServer(t, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
	})
	a := compileOK(t, storeDoc, Options{BaseURL: srv.URL})
	rt := a.Transport(noRedirects(), 1<<20)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.invalid/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_item_","arguments":{"itemId":"1"}}}`))
	if _, err := rt.RoundTrip(req); err == nil {
		t.Fatal("a cancelled call answered")
	}
}

// TestEndpoint: what the in-process MCP endpoint answers besides calls.
func TestEndpoint(t *testing.T) {
	a := compileOK(t, storeDoc, Options{Name: "store"})
	rt := a.Transport(noRedirects(), 1<<20)
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, 200, `"supportedVersions":["2026-07-28"]`},
		{`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, 200, `"io.modelcontextprotocol/serverInfo":{"name":"store","version":"2.0"}`},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, 200, `"protocolVersion":"2025-06-18"`},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`, 200, `"name":"createItem"`},
		{`{"jsonrpc":"2.0","id":3,"method":"ping"}`, 200, `"result":{}`},
		{`{"jsonrpc":"2.0","id":4,"method":"prompts/list"}`, 200, `-32601`},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}}`, 200, `-32602`},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, ``},
		{`{"jsonrpc":`, 400, `-32700`},
	} {
		status, body := mcpPost(t, rt, tc.body, nil)
		if status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s", tc.body, status, body)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "http://upstream.invalid/mcp", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %v %v", resp, err)
	}
}

func BenchmarkCall(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	a, err := Compile([]byte(storeDoc), Options{BaseURL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	rt := a.Transport(&http.Client{}, 1<<20)
	for _, size := range []int{100, 10240} {
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"createItem","arguments":{"body":{"name":"` + strings.Repeat("x", size) + `"}}}}`
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, "http://upstream.invalid/mcp", strings.NewReader(msg))
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
