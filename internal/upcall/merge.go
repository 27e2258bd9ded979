package upcall

import (
	"sync"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// A 2026-07-28 caller's call that may need the client holds its shared
// upstream session's GET stream (listen.Hub.HoldShared): the requests of
// that stream that are the call's join its response here.

// Merge returns the call's upstream response resp joined with the
// requests handed to the call from the GET stream (inbox): what either
// carries, in the order it comes. One goroutine reads resp; Close ends
// it, waits for it, and calls release (which gives the stream back).
func Merge(resp *Response, inbox <-chan []byte, release func()) *Merged {
	m := &Merged{Response: resp, inbox: inbox, release: release, next: make(chan nextMessage), stop: make(chan struct{})}
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

// A Merged is a call's response joined with its hold's inbox.
type Merged struct {
	*Response
	inbox   <-chan []byte
	release func()
	next    chan nextMessage
	stop    chan struct{}
	end     *nextMessage // the response's end, once read
	wg      sync.WaitGroup
	once    sync.Once
}

type nextMessage struct {
	msg *jsonrpc.Message
	raw []byte
	err error
}

// Next returns the next message of the response or of the inbox. Calls
// of Next do not overlap.
func (m *Merged) Next() (*jsonrpc.Message, []byte, error) {
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
		case raw := <-m.inbox:
			if msg, err := jsonrpc.Decode(raw); err == nil {
				return msg, raw, nil
			}
		}
	}
}

// Close closes the response, waits for its reader, and calls release.
func (m *Merged) Close() error {
	var err error
	m.once.Do(func() {
		close(m.stop)
		err = m.Response.Response.Close()
		m.wg.Wait()
		m.Finish(m.Response.err)
		m.release()
	})
	return err
}
