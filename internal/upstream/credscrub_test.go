package upstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// tokenCreds sets a bearer token, as a credentials mode that fetches one
// does.
type tokenCreds string

func (t tokenCreds) Apply(_ context.Context, h http.Header) error {
	h.Set("Authorization", "Bearer "+string(t))
	return nil
}
func (tokenCreds) Invalidate(context.Context) bool { return false }
func (tokenCreds) Close()                          {}

// TestFetchedCredentialsScrubbed: an upstream that echoes its request's
// Authorization header in a result and in a notification hands the
// client neither the fetched token nor the header; what holds no
// credential passes byte for byte.
func TestFetchedCredentialsScrubbed(t *testing.T) {
	const tok = "fetched-token-0123456789abcdef"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &m)
		switch m.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"1"}}}`)
		case "tools/call":
			auth, _ := json.Marshal(r.Header.Get("Authorization"))
			text := `"clean"`
			if m.Params.Name == "leak" {
				text = `"I was called with ` + strings.Trim(string(auth), `"`) + `"`
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":"+string(auth)+"}}\n\n")
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+string(m.ID)+",\"result\":{\"content\":[{\"type\":\"text\",\"text\":"+text+"}]}}\n\n")
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{Credentials: tokenCreds(tok)})
	s := initialize(t, c)
	ctx := context.Background()
	for _, name := range []string{"leak", "clean"} {
		r, err := callTool(ctx, c, s, jsonrpc.IntID(1), name, map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := readAll(t, r)
		if err != nil || len(msgs) != 2 {
			t.Fatalf("%s: %d messages, %v", name, len(msgs), err)
		}
		for _, m := range msgs {
			if strings.Contains(m.raw, tok) {
				t.Errorf("%s: the token reached the client: %s", name, m.raw)
			}
			if m.msg == nil || !json.Valid([]byte(m.raw)) {
				t.Errorf("%s: not a valid message: %s", name, m.raw)
			}
		}
		res := msgs[1].raw
		switch {
		case name == "leak" && !strings.Contains(res, "I was called with "+Redacted):
			t.Errorf("leak: %s", res)
		case name == "clean" && !strings.Contains(res, `"text":"clean"`):
			t.Errorf("clean: %s", res)
		}
	}
}
