package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// The client's errors: a failure talking to an upstream, as the gateway
// reports it (its URL, body and credentials never whole in a message), and
// the JSON-RPC error an upstream answered with under a non-2xx status.

// Error is a failure talking to one upstream. Its message names the upstream
// but never its URL or credentials.
type Error struct {
	Upstream string
	Op       string // the JSON-RPC method, or "terminate"
	// Status is the HTTP status the upstream answered, 0 if none.
	Status int
	// RPC is the JSON-RPC error a non-2xx answer carried, if its body was
	// one (a 2026-07-28 upstream answers 400 with -32022, for one).
	RPC *jsonrpc.Error
	Err error
}

func (e *Error) Error() string { return "upstream " + e.Upstream + ": " + e.Op + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// timeoutError is the cause of an upstream request's context when the
// upstream's timeout fired. It matches context.DeadlineExceeded.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string { return "timed out after " + e.d.String() }

func (e *timeoutError) Unwrap() error { return context.DeadlineExceeded }

func (e *timeoutError) Timeout() bool { return true }

// isTimeout reports whether ctx ended because the upstream's timeout fired.
func isTimeout(ctx context.Context) bool {
	var te *timeoutError
	return errors.As(context.Cause(ctx), &te)
}

// error builds the *Error of a failed op. Whatever err says (most of it
// derived from the upstream's answer) is scrubbed of the upstream's
// secrets; errors.Is and errors.As still see err.
func (c *Client) error(op string, status int, err error) *Error {
	if err != nil {
		if msg := err.Error(); c.secrets != nil {
			if clean := c.secrets.Replace(msg); clean != msg {
				err = &scrubbedError{msg: clean, err: err}
			}
		}
	}
	return &Error{Upstream: c.name, Op: op, Status: status, Err: err}
}

// Scrub returns text, derived from the upstream's answers, without the
// upstream's URL, host and secrets, for a message or a log line.
func (c *Client) Scrub(text string) string {
	return c.secrets.Replace(c.redact.Replace(text))
}

// transportError turns an error from the HTTP client into an *Error. If ctx
// is done, that is the error (the timeout or the caller's cancellation);
// otherwise the transport's error, without the URL that net/http puts in it.
func (c *Client) transportError(ctx context.Context, op string, err error) *Error {
	if ctx.Err() != nil {
		return c.error(op, 0, context.Cause(ctx))
	}
	return c.error(op, 0, c.scrub(err))
}

// scrub returns err without the url.Error wrapper and with the upstream's
// URL and host removed from its message; it still unwraps to err.
func (c *Client) scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &scrubbedError{msg: c.Scrub(err.Error()), err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }

func (e *scrubbedError) Unwrap() error { return e.err }

// statusError consumes a non-2xx response and describes it. sentSession
// reports whether the request carried an Mcp-Session-Id.
func (c *Client) statusError(op string, resp *http.Response, sentSession bool) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	code := resp.StatusCode
	switch {
	case sentSession && code == http.StatusNotFound:
		return c.error(op, code, ErrSessionExpired)
	case sentSession && code == http.StatusBadRequest && bytes.Contains(bytes.ToLower(body), []byte("session")) && !namesRequest(body):
		// The spec wants 404 for an unknown session, but the TypeScript
		// SDK's servers answer 400 ("Bad Request: No valid session ID
		// provided", with a null id) when the id is not one of theirs,
		// for instance after a restart. Treating that as expiry lets the
		// caller re-initialize instead of failing until the gateway
		// session ends. An error naming the request is its answer, even
		// one that mentions a session.
		return c.error(op, code, ErrSessionExpired)
	}
	msg := fmt.Sprintf("HTTP %d", code)
	// Scrubbed whole, before the excerpt could cut a secret in two, of the
	// config's secrets and of the credentials this request carried.
	cred := credentialsOf(resp.Request)
	if e := excerpt([]byte(cred.Replace(c.Scrub(string(body)))), maxExcerpt); e != "" {
		msg += ": " + e
	}
	e := c.error(op, code, errors.New(msg))
	if m, err := jsonrpc.Decode(body); err == nil && m.Kind == jsonrpc.KindErrorResponse {
		// The upstream's answer, relayed as it is (dispatch.RelayedError):
		// code, message and data, scrubbed (a data that holds a secret is
		// dropped) and bounded by maxErrorBody with the rest of the body.
		e.RPC = cred.rpcError(c.secrets.rpcError(m.Error))
	}
	return e
}

// namesRequest reports whether body is a JSON-RPC error response with a
// request's id (not null): an answer to that request.
func namesRequest(body []byte) bool {
	m, err := jsonrpc.Decode(body)
	return err == nil && m.Kind == jsonrpc.KindErrorResponse && m.ID.IsValid() && !m.ID.IsNull()
}

// excerpt returns at most n bytes of b as one line of printable text, for an
// error message: upstream bodies are untrusted and may be large.
func excerpt(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	s := strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, string(b))
	return strings.Join(strings.Fields(s), " ")
}

// shortened returns a copy of e with its message cut to an excerpt and
// without data: an upstream's error may be large.
func shortened(e *jsonrpc.Error) *jsonrpc.Error {
	return &jsonrpc.Error{Code: e.Code, Message: excerpt([]byte(e.Message), maxExcerpt)}
}
