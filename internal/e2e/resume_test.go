package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/testkit"
)

// TestSIGTERMDrainResumesElsewhere: on the binary, a call runs on one
// replica while its client, having hung up, follows it from another (a GET
// with Last-Event-ID), where it also holds the session's GET stream. That
// replica gets SIGTERM: both streams end with a retry field, the replica
// exits, and both resume through the load balancer on a replica left,
// losing nothing: the call's result arrives once, after no event twice.
func TestSIGTERMDrainResumesElsewhere(t *testing.T) {
	const runner, victim = 0, 1
	c := startCluster(t, func(o *clusterOptions) { o.shutdownGrace = "10s" })
	token := c.token(t, "acme-app")
	sid := initialize(t, c.endpoint, token)

	// alpha's gate tool sends one progress notification, then waits for
	// Release.
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	call := sseRequest(t, ctx, http.MethodPost, c.replicas[runner].Endpoint, token, sid, "",
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__gate","_meta":{"progressToken":"g"}}}`)
	priming := nextEvent(t, call)
	waiting := nextEvent(t, call)
	if priming.ID == "" || !strings.Contains(waiting.Data, `"waiting"`) {
		t.Fatalf("the call's first events: %+v %+v", priming, waiting)
	}
	hangUp()

	follow := sseRequest(t, context.Background(), http.MethodGet, c.replicas[victim].Endpoint, token, sid, waiting.ID, "")
	get := sseRequest(t, context.Background(), http.MethodGet, c.replicas[victim].Endpoint, token, sid, "", "")
	getPrime := nextEvent(t, get)

	p := c.replicas[victim]
	c.markStopped(victim)
	c.lb.Remove(victim)
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan event{"followed call": follow, "GET stream": get} {
		var rest []event
		for ev := range ch {
			rest = append(rest, ev)
		}
		if len(rest) != 1 || rest[0].Retry != "1000" {
			t.Errorf("%s on the draining replica ended with %+v, want only retry: 1000", name, rest)
		}
	}
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the victim still runs 10s after SIGTERM")
	}
	if err := p.Stop(); err != nil {
		t.Errorf("the victim did not exit cleanly: %v", err)
	}

	resumed := sseRequest(t, context.Background(), http.MethodGet, c.endpoint, token, sid, waiting.ID, "")
	getBack := sseRequest(t, context.Background(), http.MethodGet, c.endpoint, token, sid, getPrime.ID, "")
	time.Sleep(300 * time.Millisecond)
	c.alpha.Release()
	var rest []event
	for ev := range resumed {
		rest = append(rest, ev)
	}
	if len(rest) != 1 || !strings.Contains(rest[0].Data, `"released"`) || !strings.HasPrefix(rest[0].ID, strings.Split(waiting.ID, ".")[0]+".") {
		t.Fatalf("the call resumed elsewhere: %+v, want its result only, under its stream's id", rest)
	}
	select {
	case ev, ok := <-getBack:
		t.Errorf("the resumed GET stream sent %+v (open: %v), want nothing yet", ev, ok)
	case <-time.After(200 * time.Millisecond):
	}
	c.assertAlive(t)
}

// event is one SSE event.
type event = testkit.SSEEvent

// sseRequest sends a request whose answer is an SSE stream, with
// Last-Event-ID lastID if not empty, and returns its events, closed at
// its end.
func sseRequest(t *testing.T, ctx context.Context, method, url, token, sid, lastID, body string) <-chan event {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return testkit.ReadSSE(resp.Body)
}

func nextEvent(t *testing.T, ch <-chan event) event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10s")
		return event{}
	}
}
