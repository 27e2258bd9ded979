package rpcerr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// A ToolFailure is a tools/call the gateway answers itself with a tool
// execution error, which a model can act on (2025-11-25 server/tools,
// "Error Handling"): a method returns it as its error, and the client gets
// a result with isError: true and its text ([ToolError]), not a JSON-RPC
// error.
type ToolFailure struct{ Text string }

func (e *ToolFailure) Error() string { return e.Text }

// FailTool returns the [ToolFailure] with text.
func FailTool(text string) error { return &ToolFailure{Text: text} }

// IsToolError reports whether res, a CallToolResult, says isError: true.
// Most results do not name it, and are not parsed.
func IsToolError(res json.RawMessage) bool {
	if !bytes.Contains(res, []byte(`"isError"`)) {
		return false
	}
	o, err := jsonx.ParseValidObject(res)
	return err == nil && string(o.Get("isError")) == "true"
}

// ToolError is a tools/call result with isError: true and one text.
func ToolError(text string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}{Content: []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{{"text", text}}, IsError: true})
	return b
}

// Cancelled reports whether a request ended because its client cancelled
// it (notifications/cancelled) or went away ([ClientGone]).
func Cancelled(ctx context.Context, err error) bool {
	return errors.Is(context.Cause(ctx), ErrCancelledByClient) || ClientGone(ctx, err)
}
