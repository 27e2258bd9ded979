package upcall

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpgw/gateway/internal/own"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// TestTerminate: each upstream session with an id whose upstream is still
// configured is ended, even when ctx is done already.
func TestTerminate(t *testing.T) {
	f := newFakeUpstream(t)
	c := f.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Terminate(ctx, map[string]session.Upstream{
		"fake": {SessionID: "s1"}, "gone": {SessionID: "s2"}, "never": {},
	}, func(name string) *upstream.Client {
		if name == "fake" || name == "never" {
			return c
		}
		return nil
	}, nil)
	if n := f.terminated.Load(); n != 1 {
		t.Errorf("%d sessions ended, want 1", n)
	}
}

// TestExpiries: an expired record's upstream sessions are handed to end,
// with only their ids; a record that has none queues nothing.
func TestExpiries(t *testing.T) {
	var g own.Group
	got := make(chan *session.Record, 2)
	x := NewExpiries(&g, func(rec *session.Record) { got <- rec }, nil)
	x.Add(&session.Record{ID: "none", Upstreams: map[string]session.Upstream{"a": {}}})
	x.Add(&session.Record{ID: "g1", Principal: session.Principal{Subject: "alice"}, Upstreams: map[string]session.Upstream{
		"a": {SessionID: "s1", ProtocolVersion: "2025-11-25", Capabilities: json.RawMessage(`{"tools":{}}`)},
		"b": {},
	}})
	rec := <-got
	g.Close()
	if len(rec.Upstreams) != 1 || rec.Upstreams["a"].SessionID != "s1" || rec.Upstreams["a"].Capabilities != nil || rec.Principal.Subject != "alice" {
		t.Errorf("ended %+v", rec)
	}
	select {
	case rec := <-got:
		t.Errorf("a record without upstream sessions was queued: %+v", rec)
	default:
	}
}
