package listen

import "testing"

// TestHandOff: a request of a shared upstream session's GET stream goes to
// the one call holding it, at most sharedInbox unread; with two calls, or
// none, it goes to neither.
func TestHandOff(t *testing.T) {
	h := &Hub{}
	s := &sharedStream{calls: map[*Hold]struct{}{}}
	raw := []byte(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	if h.handOff(s, raw) {
		t.Fatal("handed to no call")
	}
	a := &Hold{Inbox: make(chan []byte, sharedInbox)}
	s.calls[a] = struct{}{}
	for i := range sharedInbox {
		if !h.handOff(s, raw) {
			t.Fatalf("request %d not handed to the one call", i)
		}
	}
	if h.handOff(s, raw) {
		t.Fatal("handed past the call's inbox")
	}
	<-a.Inbox
	b := &Hold{Inbox: make(chan []byte, sharedInbox)}
	s.calls[b] = struct{}{}
	if h.handOff(s, raw) || len(a.Inbox) != sharedInbox-1 || len(b.Inbox) != 0 {
		t.Fatal("handed to one of two calls")
	}
}
