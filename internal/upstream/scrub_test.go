package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
)

func TestScrubber(t *testing.T) {
	s := NewScrubber("Bearer tok-123456", "key/with\"quote", "eu", "  sk-live-abcdef  ")
	for in, want := range map[string]string{
		"Authorization: Bearer tok-123456":   "Authorization: [redacted]",
		"token=tok-123456;":                  "token=[redacted];",
		`{"h":"key/with\"quote"}`:            `{"h":"[redacted]"}`,
		`raw key/with"quote`:                 `raw [redacted]`,
		"region eu stays":                    "region eu stays", // too short to be a secret
		"X-Key: sk-live-abcdef\r\n":          "X-Key: [redacted]\r\n",
		"nothing here":                       "nothing here",
		"bearer tok-123456 (scheme lowered)": "bearer [redacted] (scheme lowered)",
	} {
		if got := s.Replace(in); got != want {
			t.Errorf("Replace(%q) = %q, want %q", in, got, want)
		}
	}
	var nilS *Scrubber
	if nilS.Replace("x") != "x" || NewScrubber().Replace("abcd") != "abcd" {
		t.Error("an empty scrubber changed text")
	}
	e := &jsonrpc.Error{Code: 1, Message: "no"}
	if s.rpcError(e) != e {
		t.Error("rpcError copied a clean error")
	}
	got := s.rpcError(&jsonrpc.Error{Code: 1, Message: "saw tok-123456", Data: json.RawMessage(`{"h":"tok-123456"}`)})
	if got.Message != "saw [redacted]" || got.Data != nil {
		t.Errorf("rpcError = %+v", got)
	}
}

// TestSecretsNotInErrors: an upstream whose errors echo the request headers
// (a 500 page, a JSON-RPC error in a 500 and in a 200, an SSE error event)
// yields errors and messages without the configured header values or the
// Options.Secrets, and logs none of them.
func TestSecretsNotInErrors(t *testing.T) {
	const bearer, apiKey, extra = "s3cr3t-bearer-token", "api-key-0123456789", "later-credential-xyz"
	echo := func(r *http.Request) string {
		var b strings.Builder
		r.Header.Write(&b)
		return b.String()
	}
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
	}{
		{"500 text", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			io.WriteString(w, "debug: "+echo(r)+" extra "+extra)
		}},
		{"500 JSON-RPC error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "error": map[string]any{"code": -32603, "message": echo(r), "data": echo(r)}})
			w.Write(b)
		}},
		{"400 JSON-RPC error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "error": map[string]any{"code": -32602, "message": echo(r) + extra, "data": map[string]any{"uri": "x", "h": echo(r)}}})
			w.Write(b)
		}},
		{"200 JSON-RPC error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "error": map[string]any{"code": -32603, "message": echo(r) + extra, "data": echo(r)}})
			w.Write(b)
		}},
		{"SSE JSON-RPC error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "error": map[string]any{"code": -32603, "message": echo(r)}})
			writeSSE(w, "event: "+r.Header.Get("X-Api-Key")+"\ndata: x\n\n", "data: "+string(b)+"\n\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := rawUpstream(t, tc.h)
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c := newTestClient(t, srv.URL, 5*time.Second,
				map[string]string{"Authorization": "Bearer " + bearer, "X-Api-Key": apiKey},
				Options{Logger: log, Secrets: []string{extra}})
			r, err := c.Call(context.Background(), session.Upstream{SessionID: "s", ProtocolVersion: "2025-11-25"}, jsonrpc.IntID(1), "tools/list", nil)
			var text string
			if err == nil {
				msgs, rerr := readAll(t, r)
				err = rerr
				for _, m := range msgs {
					text += m.raw
					if m.msg.Error != nil {
						text += fmt.Sprint(m.msg.Error.Message, string(m.msg.Error.Data))
					}
				}
			}
			if err != nil {
				text += err.Error()
				var e *Error
				if errors.As(err, &e) && e.RPC != nil {
					text += e.RPC.Message + string(e.RPC.Data)
				}
			}
			if text == "" {
				t.Fatal("neither an error nor a message")
			}
			text += logs.String()
			for _, secret := range []string{bearer, apiKey, extra} {
				if strings.Contains(text, secret) {
					t.Errorf("secret %q in %q", secret, text)
				}
			}
			if !strings.Contains(text, Redacted) {
				t.Errorf("nothing redacted in %q", text)
			}
		})
	}
}

// TestNeedsEscape: a string needsEscape passes is marshalled as itself
// between quotes, so the Scrubber may skip its escaped form.
func TestNeedsEscape(t *testing.T) {
	for _, s := range []string{"Bearer abc.DEF-123_~+/=", "plain", `a"b`, `a\b`, "a<b", "a>b", "a&b", "tab\there", "é", "\u2028", "\xff", "\x7f", "key with spaces"} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if same := string(b[1:len(b)-1]) == s; !same && !needsEscape(s) {
			t.Errorf("needsEscape(%q) = false, but JSON writes it as %s", s, b)
		}
	}
}

// TestScrubberBuildsOnUse: a Scrubber whose secrets are not found builds
// no replacer (a call's per-request credentials cost nothing unless the
// upstream echoes them), and replaces as before once one is found.
func TestScrubberBuildsOnUse(t *testing.T) {
	sc := NewScrubber("Bearer per-call-token-0123456789")
	if got := sc.Replace("nothing to see"); got != "nothing to see" {
		t.Errorf("Replace = %q", got)
	}
	if out, found := sc.message([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)); found || string(out) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("message = %s, %v", out, found)
	}
	if e := (&jsonrpc.Error{Code: 1, Message: "no secret"}); sc.rpcError(e) != e {
		t.Error("rpcError made a new error of one without a secret")
	}
	if sc.r != nil || sc.long != nil {
		t.Error("the replacers were built, though nothing was found")
	}
	if got := sc.Replace("echo: Bearer per-call-token-0123456789 and per-call-token-0123456789"); got != "echo: [redacted] and [redacted]" {
		t.Errorf("Replace = %q", got)
	}
	out, found := sc.message([]byte(`{"jsonrpc":"2.0","id":1,"result":{"h":"per-call-token-0123456789"}}`))
	if !found || string(out) != `{"jsonrpc":"2.0","id":1,"result":{"h":"[redacted]"}}` {
		t.Errorf("message = %s, %v", out, found)
	}
}
