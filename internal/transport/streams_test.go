package transport

import (
	"net/http/httptest"
	"testing"
	"time"
)

// TestStreamsDrain: drain ends the open streams, marked drained, and a
// stream that opens afterwards (its request was in flight) is ended
// drained at once; the counts stay right for both.
func TestStreamsDrain(t *testing.T) {
	var ss streams
	caps := streamCaps{perPrincipal: 10, perTenant: 10}
	before, _, _ := ss.open("s1", "p", "t", caps)
	ss.drain()
	select {
	case <-before.done:
	default:
		t.Fatal("drain left an open stream running")
	}
	if !before.drained.Load() {
		t.Error("a stream ended by drain is not marked drained")
	}
	after, _, _ := ss.open("s2", "p", "t", caps)
	if after == nil {
		t.Fatal("a stream opened during the drain was refused")
	}
	select {
	case <-after.done:
	default:
		t.Fatal("a stream opened during the drain runs")
	}
	if !after.drained.Load() {
		t.Error("a stream opened during the drain is not marked drained")
	}
	ss.remove(before)
	ss.remove(after)
	if len(ss.bySession) != 0 || len(ss.byPrincipal) != 0 || len(ss.byTenant) != 0 {
		t.Errorf("counts left after the streams ended: %v %v %v", ss.bySession, ss.byPrincipal, ss.byTenant)
	}
}

func TestResponderRetry(t *testing.T) {
	w := httptest.NewRecorder()
	r := newResponder(w)
	if err := r.Retry(time.Second); err != nil || w.Body.Len() != 0 {
		t.Fatalf("Retry before the stream started: %v, wrote %q", err, w.Body.String())
	}
	r.startSSE()
	if err := r.Retry(1500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := w.Body.String(); got != "retry: 1500\n\n" {
		t.Errorf("Retry wrote %q", got)
	}
}
