package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/session"
)

// loggedCall is one call's answer stream, read to its end: the priming
// event's id (where a resume from the start begins) and the events with
// data.
type loggedCall struct {
	prime  string
	events int
}

// floodAs opens a session as token's principal and calls slow__flood in
// it (n progress notifications of 1000 bytes, then the result), reading
// the whole stream. It returns the session and the call's stream.
func floodAs(t *testing.T, url, token string, n int) (string, loggedCall) {
	t.Helper()
	resp, body := do(t, authedPost(t, url, token, "", initBody))
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, authedPost(t, url, token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", resp.StatusCode, body)
	}
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow__flood","arguments":{"n":%d,"bytes":1000},"_meta":{"progressToken":"p"}}}`, n)
	r, err := http.DefaultClient.Do(authedPost(t, url, token, sid, call))
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		t.Fatalf("call: %d %s %s", r.StatusCode, r.Header.Get("Content-Type"), b)
	}
	var c loggedCall
	for ev := range readSSE(r.Body) {
		if c.prime == "" {
			if ev.ID == "" || ev.Data != "" {
				t.Fatalf("first event %+v, want a priming event", ev)
			}
			c.prime = ev.ID
			continue
		}
		c.events++
	}
	if c.events != n+1 {
		t.Fatalf("the call's stream had %d events, want %d", c.events, n+1)
	}
	return sid, c
}

// resumeAs resumes sid's stream from the event with id last, as token's
// principal, and returns the status and the number of events replayed.
func resumeAs(t *testing.T, url, token, sid, last string) (int, int) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", last)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, 0
	}
	n := 0
	for ev := range readSSE(resp.Body) {
		if ev.Data != "" {
			n++
		}
	}
	return resp.StatusCode, n
}

// TestEventLogShares (issue 26): one principal writing big answers in
// many sessions holds at most its share of the memory store's event
// bytes, losing its own oldest logs; another principal's stream stays
// resumable whole. When the store itself is full (the share as large as
// the pool), the heaviest holder's oldest logs go first, and the other
// principal's stream is still resumable.
func TestEventLogShares(t *testing.T) {
	const n = 100 // events of about 1.1 KB: a log of about 110 KB
	for _, tc := range []struct {
		name     string
		limits   func(*config.Config)
		floods   int   // mallory's calls
		poolFull bool  // bob's call comes last, when mallory fills the pool
		bound    int64 // of the log's bytes
	}{
		{"principal share", func(c *config.Config) {
			c.Sessions.Events.MaxBytes = 4 << 20
			c.Sessions.Events.MaxBytesPerPrincipal = 400 << 10
			c.Sessions.Events.BytesPerStream = 256 << 10
		}, 8, false, 400<<10 + 120<<10},
		{"pool full", func(c *config.Config) {
			c.Sessions.Events.MaxBytes = 500 << 10
			c.Sessions.Events.MaxBytesPerPrincipal = 500 << 10
			c.Sessions.Events.MaxBytesPerTenant = 500 << 10
			c.Sessions.Events.BytesPerStream = 256 << 10
		}, 4, true, 500 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startSlowUpstream(t)
			lab := newLabIssuer(t)
			g, url := startGatewayG(t, []upstreamSpec{{name: "slow", url: up.url}}, labAuth(lab), tc.limits)
			log := gateway.EventLogOf(g).(*session.MemoryEvents)
			mallory, bob := labToken(t, lab, url, "mallory", "acme"), labToken(t, lab, url, "bob", "globex")
			whole := func(who, token, sid string, c loggedCall) {
				t.Helper()
				if status, got := resumeAs(t, url, token, sid, c.prime); status != http.StatusOK || got != n+1 {
					t.Fatalf("%s's stream: resume got %d, %d events; want 200, %d", who, status, got, n+1)
				}
			}

			var bobSID string
			var bobCall loggedCall
			if !tc.poolFull {
				bobSID, bobCall = floodAs(t, url, bob, n)
			}
			var sids []string
			var calls []loggedCall
			for range tc.floods {
				sid, c := floodAs(t, url, mallory, n)
				sids, calls = append(sids, sid), append(calls, c)
			}
			if tc.poolFull {
				// mallory holds about 440 KB of 500: bob's answer passes
				// the pool, and mallory, the heaviest, pays.
				whole("mallory", mallory, sids[0], calls[0])
				bobSID, bobCall = floodAs(t, url, bob, n)
			}
			if b := log.Bytes(); b > tc.bound {
				t.Fatalf("the log holds %d bytes, want at most %d", b, tc.bound)
			}
			whole("bob", bob, bobSID, bobCall)
			// mallory's oldest log went, her newest is whole.
			if status, _ := resumeAs(t, url, mallory, sids[0], calls[0].prime); status != http.StatusBadRequest {
				t.Errorf("mallory's oldest log: resume got %d, want 400 (dropped)", status)
			}
			last := len(sids) - 1
			whole("mallory", mallory, sids[last], calls[last])
		})
	}
}
