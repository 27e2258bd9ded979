package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"strconv"
)

// Error kinds, the keys of [report.ErrorKinds].
const (
	errInit        = "init"          // initialize or notifications/initialized failed: the client did not run
	errTransport   = "transport"     // the request failed before a response (connection refused, reset)
	errTimeout     = "timeout"       // no complete response within -timeout
	errRead        = "read"          // the response body broke off (a truncated stream)
	errStatus      = "http_status"   // not 200 (see the sample for the code)
	errContentType = "content_type"  // neither application/json nor text/event-stream
	errParse       = "parse"         // the body, or an SSE event's data, is not a JSON-RPC response
	errNoResponse  = "no_response"   // an SSE stream ended without the response to the request
	errID          = "id_mismatch"   // a JSON response with another id
	errRPC         = "rpc_error"     // a JSON-RPC error
	errNoResult    = "no_result"     // neither result nor error
	errToolError   = "tool_error"    // a tool result with isError
	errEcho        = "echo_mismatch" // echo returned other text than was sent
	errTools       = "tools"         // a tools/list result without tools, or not -expect-tools of them
)

// response is the part of a JSON-RPC response that mcpload checks. Its
// result holds the members of every result mcpload asks for, so that each
// response is decoded once, without a second pass over its result.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  *struct {
		ProtocolVersion string `json:"protocolVersion"` // initialize
		Content         []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"` // tools/call
		IsError bool `json:"isError"`
		Tools   []struct {
			Name string `json:"name"`
		} `json:"tools"` // tools/list
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// checkError is a failed check: its kind counts it, its message is shown
// as a sample of the kind.
type checkError struct {
	kind string
	msg  string
}

func (e *checkError) Error() string { return e.kind + ": " + e.msg }

func failf(kind, format string, args ...any) *checkError {
	return &checkError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// findResponse returns the response with the given id from a POST's body of
// the given Content-Type: the body itself for application/json, the event
// whose data is the JSON-RPC response with that id for text/event-stream
// (other events, such as notifications, are skipped). An event is complete
// only when a blank line ends it, so a stream cut short is [errNoResponse].
func findResponse(contentType string, body []byte, id int64) (*response, *checkError) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil && contentType != "" {
		return nil, failf(errContentType, "%q: %v", contentType, err)
	}
	want := strconv.AppendInt(make([]byte, 0, 20), id, 10)
	switch mt {
	case "application/json":
		var r response
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, failf(errParse, "%v", err)
		}
		if r.JSONRPC != "2.0" {
			return nil, failf(errParse, "jsonrpc is %q, want \"2.0\"", r.JSONRPC)
		}
		if !bytes.Equal(bytes.TrimSpace(r.ID), want) {
			return nil, failf(errID, "id %s, want %s", r.ID, want)
		}
		return &r, nil
	case "text/event-stream":
		return findEvent(body, want)
	default:
		return nil, failf(errContentType, "%q", contentType)
	}
}

// findEvent parses an SSE stream (only its data fields matter here) and
// returns the first event holding the JSON-RPC response with id want.
// Events with empty data (a server may send one to prime resumption) and
// messages with other ids (notifications, requests) are skipped.
func findEvent(body, want []byte) (*response, *checkError) {
	var (
		data     []byte
		hasData  bool
		events   int
		parseErr error
	)
	for {
		i := bytes.IndexAny(body, "\r\n")
		if i < 0 {
			break // no more lines; an unterminated one means the stream was cut short
		}
		line := body[:i]
		if body[i] == '\r' && i+1 < len(body) && body[i+1] == '\n' {
			body = body[i+2:]
		} else {
			body = body[i+1:]
		}
		if len(line) == 0 { // a blank line ends an event
			if hasData && len(data) > 0 {
				events++
				var r response
				if err := json.Unmarshal(data, &r); err != nil {
					parseErr = err
				} else if r.ID != nil && bytes.Equal(bytes.TrimSpace(r.ID), want) {
					if r.JSONRPC != "2.0" {
						return nil, failf(errParse, "jsonrpc is %q, want \"2.0\"", r.JSONRPC)
					}
					return &r, nil
				}
			}
			data, hasData = data[:0], false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue // event, id, retry and comments are not needed here
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if hasData {
			data = append(data, '\n')
		}
		data = append(data, value...)
		hasData = true
	}
	if parseErr != nil {
		return nil, failf(errParse, "event data: %v", parseErr)
	}
	return nil, failf(errNoResponse, "stream ended after %d complete events without the response to id %s", events, want)
}

// checkCall checks a tools/call response. With echo set, the result must
// hold one text block equal to text.
func checkCall(r *response, echo bool, text []byte) *checkError {
	if ce := checkResult(r); ce != nil {
		return ce
	}
	if r.Result.IsError {
		msg := ""
		if len(r.Result.Content) > 0 {
			msg = r.Result.Content[0].Text
		}
		return failf(errToolError, "isError: %.200s", msg)
	}
	if echo {
		if len(r.Result.Content) == 0 || r.Result.Content[0].Type != "text" {
			return failf(errEcho, "no text content block")
		}
		if got := r.Result.Content[0].Text; got != string(text) {
			return failf(errEcho, "got %d bytes %.40q..., sent %d bytes %.40q...", len(got), got, len(text), text)
		}
	}
	return nil
}

// checkList checks a tools/list response and returns the number of tools.
// With expect > 0 there must be exactly that many.
func checkList(r *response, expect int) (int, *checkError) {
	if ce := checkResult(r); ce != nil {
		return 0, ce
	}
	n := len(r.Result.Tools)
	switch {
	case n == 0:
		return 0, failf(errTools, "no tools listed")
	case expect > 0 && n != expect:
		return n, failf(errTools, "%d tools listed, want %d", n, expect)
	}
	return n, nil
}

// checkResult checks that r is a success.
func checkResult(r *response) *checkError {
	if r.Error != nil {
		return failf(errRPC, "%d %.200s", r.Error.Code, r.Error.Message)
	}
	if r.Result == nil {
		return failf(errNoResult, "neither result nor error")
	}
	return nil
}
