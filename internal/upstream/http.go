package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
)

// The HTTP requests a Client sends: built with the session's headers and
// the caller's credentials (asked again once on a 401), timed, and the
// notifications and session terminations that need no answer.

// reauthorize sends req once more with fresh credentials after the
// upstream answered resp, a 401, if the credentials may differ; else it
// returns resp as it is.
func (c *Client) reauthorize(ctx context.Context, req *http.Request, resp *http.Response) (*http.Response, error) {
	if c.creds == nil || !c.creds.Invalidate(ctx) || req.GetBody == nil && req.Body != nil {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	ctx, cred, err := c.credentials(ctx)
	if err != nil {
		return nil, err
	}
	again := req.Clone(ctx)
	for k, v := range cred {
		again.Header[k] = v
	}
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		again.Body = body
	}
	return c.hc.Do(again)
}

// credentials returns the credentials (Options.Credentials) of the caller
// ctx carries, to set over the config's headers, and ctx keeping them, so
// that they are scrubbed from what the upstream answers (see
// credentialsOf).
func (c *Client) credentials(ctx context.Context) (context.Context, http.Header, error) {
	cred := make(http.Header, 1)
	if err := c.creds.Apply(ctx, cred); err != nil {
		return nil, nil, err
	}
	return context.WithValue(ctx, credKey{}, cred), cred, nil
}

// credKey keys the credentials a request carries in its context.
type credKey struct{}

// credentialsOf returns a scrubber of the per-request credentials req
// carried (Options.Credentials), nil if none.
func credentialsOf(req *http.Request) *Scrubber {
	if req == nil {
		return nil
	}
	h, _ := req.Context().Value(credKey{}).(http.Header)
	if len(h) == 0 {
		return nil
	}
	var vals []string
	for _, v := range h {
		vals = append(vals, v...)
	}
	return NewScrubber(vals...)
}

// callAgain sends req, which was not sent, once more with its body rewound.
func (c *Client) callAgain(ctx context.Context, req *http.Request) (*http.Response, error) {
	again := req.Clone(ctx)
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	again.Body = body
	return c.hc.Do(again)
}

// Notify sends a notification on upstream session s. The upstream should
// answer 202 Accepted; any 2xx is accepted.
func (c *Client) Notify(ctx context.Context, s session.Upstream, method string, params json.RawMessage) error {
	ctx, stop := c.withTimeout(ctx)
	defer stop()
	return c.notify(ctx, s, method, params)
}

// notify sends a notification within ctx's deadline.
func (c *Client) notify(ctx context.Context, s session.Upstream, method string, params json.RawMessage) error {
	return c.post(ctx, s, method, jsonrpc.AppendRequest(nil, jsonrpc.ID{}, method, params))
}

// post sends body, a message the upstream is not to answer (a
// notification, or a response to its request), on session s for op. The
// upstream should answer 202 Accepted; any 2xx is accepted.
func (c *Client) post(ctx context.Context, s session.Upstream, op string, body []byte) error {
	resp, err := c.send(ctx, http.MethodPost, s, op, body)
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return c.statusError(op, resp, s.SessionID != "")
	}
	discard(resp.Body)
	return nil
}

// Terminate ends upstream session s with an HTTP DELETE. It does nothing for
// a session without id. An upstream that does not allow clients to end
// sessions (405), or that no longer knows the session (404), is not an error.
func (c *Client) Terminate(ctx context.Context, s session.Upstream) error {
	if s.SessionID == "" {
		return nil
	}
	ctx, stop := c.withTimeout(ctx)
	defer stop()
	return c.terminate(ctx, s)
}

func (c *Client) terminate(ctx context.Context, s session.Upstream) error {
	const op = "terminate"
	resp, err := c.send(ctx, http.MethodDelete, s, op, nil)
	if err != nil {
		return err
	}
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299, code == http.StatusMethodNotAllowed, code == http.StatusNotFound:
		discard(resp.Body)
		return nil
	}
	return c.statusError(op, resp, true)
}

// terminateInBackground ends a session Initialize opened but cannot hand
// out, without making the caller wait for it.
func (c *Client) terminateInBackground(ctx context.Context, sid string) {
	if sid == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	c.bg.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, cancelTimeout)
		defer cancel()
		if err := c.terminate(ctx, session.Upstream{SessionID: sid}); err != nil {
			c.log.Debug("ending abandoned upstream session", "error", err)
		}
	})
}

// send sends a request built by newRequest, with no headers of its own,
// for op. Its error is an *Error.
func (c *Client) send(ctx context.Context, method string, s session.Upstream, op string, body []byte) (*http.Response, error) {
	req, err := c.newRequest(ctx, method, s, body)
	if err != nil {
		return nil, c.error(op, 0, err)
	}
	resp, err := c.hc.Do(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		resp, err = c.reauthorize(ctx, req, resp)
	}
	if err != nil {
		return nil, c.transportError(ctx, op, err)
	}
	return resp, nil
}

// newRequest builds a request to the upstream. body is a JSON-RPC message
// for POST, nil for GET and DELETE. Only the config's headers and the
// protocol's are set.
func (c *Client) newRequest(ctx context.Context, method string, s session.Upstream, body []byte) (*http.Request, error) {
	if c.setupErr != nil {
		return nil, c.setupErr
	}
	var rd io.Reader
	if body != nil {
		// A *bytes.Reader lets net/http set Content-Length (and GetBody),
		// and is a body it knows to be in memory: it writes the headers
		// and the body at once. Any other reader (a net.Buffers over the
		// params, to spare their copy) makes it flush the headers first:
		// one more write per request, and an upstream that refuses the
		// TLS client certificate then reads as a broken pipe, not as its
		// alert.
		rd = bytes.NewReader(body)
	}
	var cred http.Header
	if c.creds != nil {
		var err error
		if ctx, cred, err = c.credentials(ctx); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, rd)
	if err != nil {
		return nil, errors.New("invalid upstream URL")
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	for k, v := range cred {
		req.Header[k] = v
	}
	if c.inject != nil {
		c.inject(ctx, req.Header)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		// An empty value keeps net/http from sending its default User-Agent.
		req.Header["User-Agent"] = []string{""}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if s.SessionID != "" {
		req.Header.Set(protocol.HeaderSessionID, s.SessionID)
	}
	if s.ProtocolVersion != "" {
		req.Header.Set(protocol.HeaderProtocolVersion, s.ProtocolVersion)
	}
	return req, nil
}

// withTimeout bounds ctx by the upstream's timeout. When that timeout fires,
// context.Cause(ctx) is a *timeoutError.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, c.timeout, &timeoutError{c.timeout})
}

// mediaType returns the lower-cased media type of h's Content-Type, "" if
// there is none or it does not parse.
func mediaType(h http.Header) string {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

// discard reads a little of body, so the connection can be reused, and
// closes it.
func discard(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxErrorBody))
	body.Close()
}
