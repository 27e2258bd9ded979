package dispatch

import (
	"sync"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/listen"
)

// A 2026-07-28 caller's call that may need the client holds its shared
// upstream session's GET stream (listen.Hub.HoldShared): the requests of
// that stream that are the call's join its response here.

// merge returns the call's upstream response resp joined with the
// requests handed to the call from the GET stream: what either carries,
// in the order it comes. One goroutine reads resp; Close ends it, waits
// for it, and gives the hold back.
func merge(hold *listen.Hold, resp *tracedResponse) *mergedResponse {
	m := &mergedResponse{tracedResponse: resp, hold: hold, next: make(chan nextMessage), stop: make(chan struct{})}
	m.wg.Go(func() {
		for {
			msg, raw, err := resp.Next()
			select {
			case m.next <- nextMessage{msg, raw, err}:
			case <-m.stop:
				return
			}
			if err != nil {
				return
			}
		}
	})
	return m
}

// A mergedResponse is a call's response joined with its hold's inbox.
type mergedResponse struct {
	*tracedResponse
	hold *listen.Hold
	next chan nextMessage
	stop chan struct{}
	end  *nextMessage // the response's end, once read
	wg   sync.WaitGroup
	once sync.Once
}

type nextMessage struct {
	msg *jsonrpc.Message
	raw []byte
	err error
}

// Next returns the next message of the response or of the inbox. Calls
// of Next do not overlap.
func (m *mergedResponse) Next() (*jsonrpc.Message, []byte, error) {
	for {
		if m.end != nil {
			return m.end.msg, m.end.raw, m.end.err
		}
		select {
		case n := <-m.next:
			if n.err != nil {
				m.end = &n
			}
			return n.msg, n.raw, n.err
		case raw := <-m.hold.Inbox:
			if msg, err := jsonrpc.Decode(raw); err == nil {
				return msg, raw, nil
			}
		}
	}
}

// Close closes the response, waits for its reader, and gives the hold
// back.
func (m *mergedResponse) Close() error {
	var err error
	m.once.Do(func() {
		close(m.stop)
		err = m.Response.Close()
		m.wg.Wait()
		m.finish(m.tracedResponse.err)
		m.hold.Release()
	})
	return err
}
