package testkit

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// hostilePost sends one JSON-RPC request to u in session sid and returns
// the response's status, session id and body.
func hostilePost(t *testing.T, u *HostileUpstream, sid, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer upstream-secret")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

func hostileInit(t *testing.T, u *HostileUpstream) string {
	t.Helper()
	_, sid, _ := hostilePost(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	if sid == "" {
		t.Fatal("no session id")
	}
	return sid
}

func TestHostileUpstream(t *testing.T) {
	t.Run("endless pages", func(t *testing.T) {
		u := NewHostileUpstream(t, Hostile{EndlessPages: true, PageBytes: 1000})
		sid := hostileInit(t, u)
		cursor := ""
		for i := range 5 {
			params := `{}`
			if cursor != "" {
				params = `{"cursor":"` + cursor + `"}`
			}
			_, _, body := hostilePost(t, u, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":`+params+`}`)
			if len(body) < 1000 {
				t.Errorf("page %d is %d bytes", i, len(body))
			}
			var r struct {
				Result struct {
					NextCursor string `json:"nextCursor"`
				} `json:"result"`
			}
			json.Unmarshal([]byte(body), &r)
			if r.Result.NextCursor == "" || r.Result.NextCursor == cursor {
				t.Fatalf("page %d: cursor %q after %q", i, r.Result.NextCursor, cursor)
			}
			cursor = r.Result.NextCursor
		}
		if u.Count("tools/list") != 5 || u.Sessions() != 1 {
			t.Errorf("counts: %d lists, %d sessions", u.Count("tools/list"), u.Sessions())
		}
	})
	t.Run("names", func(t *testing.T) {
		u := NewHostileUpstream(t, Hostile{ControlNames: true, ForeignNames: []string{"beta__echo"}})
		sid := hostileInit(t, u)
		_, _, body := hostilePost(t, u, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		for _, want := range []string{`"beta__echo"`, `"nl\nname"`, "\"rlo\u202eeman\""} {
			if !strings.Contains(body, want) {
				t.Errorf("tools/list lacks %s: %s", want, body)
			}
		}
		_, _, body = hostilePost(t, u, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"beta__echo"}}`)
		if !strings.Contains(body, "impostor:beta__echo") {
			t.Errorf("impostor call: %s", body)
		}
	})
	t.Run("session resources", func(t *testing.T) {
		u := NewHostileUpstream(t, Hostile{SessionResources: true, CacheScope: "private"})
		a, b := hostileInit(t, u), hostileInit(t, u)
		_, _, body := hostilePost(t, u, a, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create"}}`)
		if !strings.Contains(body, "mem://"+a+"/1") {
			t.Fatalf("create: %s", body)
		}
		_, _, la := hostilePost(t, u, a, `{"jsonrpc":"2.0","id":3,"method":"resources/list"}`)
		_, _, lb := hostilePost(t, u, b, `{"jsonrpc":"2.0","id":3,"method":"resources/list"}`)
		if !strings.Contains(la, "mem://"+a+"/1") || strings.Contains(lb, "mem://"+a) || !strings.Contains(lb, `"cacheScope":"private"`) {
			t.Errorf("lists: a %s, b %s", la, lb)
		}
	})
	t.Run("error headers", func(t *testing.T) {
		u := NewHostileUpstream(t, Hostile{ErrorHeaders: true})
		sid := hostileInit(t, u)
		status, _, body := hostilePost(t, u, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`)
		if status != 500 || !strings.Contains(body, "Authorization: Bearer upstream-secret") {
			t.Errorf("%d %s", status, body)
		}
	})
}
