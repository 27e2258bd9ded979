package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
)

// ErrNoStream means the upstream offers no stream of its own notifications:
// a 2025-11-25 upstream answered the GET with 405 (basic/transports,
// "Listening for Messages from the Server").
var ErrNoStream = errors.New("upstream offers no notification stream")

// watchParams subscribe a 2026-07-28 upstream's listen stream to its list
// changes (basic/patterns/subscriptions).
var watchParams = []byte(`{"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true}}`)

// A Stream is an upstream's stream of messages that belong to no request of
// the caller: notifications, and a 2025-11-25 upstream's requests.
type Stream struct {
	c    *Client
	body io.ReadCloser
	sse  *sseReader
	once sync.Once
}

// Watch opens the upstream's stream of its own notifications: the GET
// stream of legacy session s, or, for a 2026-07-28 upstream,
// subscriptions/listen for list changes. Unlike a Call, it has no timeout:
// it lasts until ctx ends, the upstream ends it, or Close. A legacy upstream
// that offers no GET stream gives ErrNoStream.
func (c *Client) Watch(ctx context.Context, s session.Upstream) (*Stream, error) {
	return c.stream(ctx, s, watchParams)
}

// Listen opens subscriptions/listen on 2026-07-28 upstream session s with
// the notification filter notifications (a SubscriptionFilter object),
// whose first message is the upstream's acknowledgment
// (basic/patterns/subscriptions). Like Watch, it has no timeout.
func (c *Client) Listen(ctx context.Context, s session.Upstream, notifications json.RawMessage) (*Stream, error) {
	if !IsModern(s) {
		return nil, c.error("watch", 0, errors.New("subscriptions/listen needs a 2026-07-28 upstream"))
	}
	params := append(append([]byte(`{"notifications":`), notifications...), '}')
	return c.stream(ctx, s, params)
}

// stream opens the GET stream of legacy session s, or subscriptions/listen
// with params on a 2026-07-28 one.
func (c *Client) stream(ctx context.Context, s session.Upstream, params []byte) (*Stream, error) {
	const op = "watch"
	var req *http.Request
	var err error
	if IsModern(s) {
		params := WithModernMeta(params, c.info, c.caps)
		req, err = c.newRequest(ctx, http.MethodPost, s, jsonrpc.AppendRequest(nil, jsonrpc.StringID("watch"), protocol.MethodSubscriptionsListen, params))
		if err == nil {
			setModernHeaders(req.Header, protocol.MethodSubscriptionsListen, jsonrpc.RawParams(params), nil)
		}
	} else {
		req, err = c.newRequest(ctx, http.MethodGet, s, nil)
	}
	if err != nil {
		return nil, c.error(op, 0, err)
	}
	if !IsModern(s) {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := c.openStream(req)
	if err != nil {
		return nil, c.transportError(ctx, op, err)
	}
	if resp.StatusCode == http.StatusMethodNotAllowed && !IsModern(s) {
		discard(resp.Body)
		return nil, c.error(op, resp.StatusCode, ErrNoStream)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, c.callStatusError(op, resp, s)
	}
	if mediaType(resp.Header) != "text/event-stream" {
		resp.Body.Close()
		return nil, c.error(op, resp.StatusCode, fmt.Errorf("stream has content type %q", excerpt([]byte(resp.Header.Get("Content-Type")), 64)))
	}
	return &Stream{c: c, body: resp.Body, sse: newStreamReader(resp.Body, c.maxMsg)}, nil
}

// Next returns the next notification or request on the stream, with its
// bytes as received. A response (the end of a listen) or the end of the
// stream is io.EOF.
func (st *Stream) Next() (*jsonrpc.Message, []byte, error) {
	for {
		ev, err := st.sse.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, nil, io.EOF
			}
			return nil, nil, st.c.error("watch", 0, err)
		}
		if ev.Type != "message" {
			continue
		}
		msg, err := jsonrpc.Decode(ev.Data)
		if err != nil {
			return nil, nil, st.c.error("watch", 0, fmt.Errorf("invalid JSON-RPC message: %s", excerpt([]byte(err.Error()), maxExcerpt)))
		}
		switch msg.Kind {
		case jsonrpc.KindNotification, jsonrpc.KindRequest:
			return msg, ev.Data, nil
		}
		return nil, nil, io.EOF
	}
}

// Close ends the stream.
func (st *Stream) Close() error {
	st.once.Do(func() { st.body.Close() })
	return nil
}
