package rpcerr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
)

// TestStatelessStatus: the HTTP status of a 2026-07-28 error answer follows
// its code.
func TestStatelessStatus(t *testing.T) {
	for code, want := range map[int64]int{
		-32601: http.StatusNotFound,
		-32602: http.StatusBadRequest,
		-32020: http.StatusBadRequest,
		-32021: http.StatusBadRequest,
		-32022: http.StatusBadRequest,
		-32603: http.StatusOK,
		-32002: http.StatusOK,
		-32000: http.StatusOK,
		42:     http.StatusOK,
	} {
		if got := Status(code); got != want {
			t.Errorf("%d: %d, want %d", code, got, want)
		}
	}
}

// TestMap: each kind of error gets its wire code and message, wrapped or
// not, and an unknown error says no more than "Internal error".
func TestMap(t *testing.T) {
	relayed := &jsonrpc.Error{Code: -32050, Message: "the upstream's own"}
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(ErrCancelledByClient)
	gone, stop := context.WithCancel(context.Background())
	stop()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		code int64
		msg  string
	}{
		{"scope", context.Background(), &ScopeError{Scopes: []string{"a", "b"}}, jsonrpc.CodeInvalidRequest, "Insufficient scope: this tool requires a b"},
		{"unknown tool", context.Background(), &catalog.ResolveError{Kind: catalog.Tools}, jsonrpc.CodeInvalidParams, ""},
		{"unknown resource", context.Background(), &catalog.ResolveError{Kind: catalog.Resources}, protocol.CodeResourceNotFound, ""},
		{"relayed", context.Background(), fmt.Errorf("up: %w", relayed), -32050, "the upstream's own"},
		{"cancelled by the client", cancelled, context.Canceled, jsonrpc.CodeInternalError, "Request cancelled"},
		{"timed out", context.Background(), fmt.Errorf("x: %w", context.DeadlineExceeded), jsonrpc.CodeInternalError, "Request timed out"},
		{"client gone", gone, errors.New("write failed"), jsonrpc.CodeInternalError, "Request cancelled"},
		{"write to a gone client", context.Background(), fmt.Errorf("%w: broken pipe", ErrClientGone), jsonrpc.CodeInternalError, "Request cancelled"},
		{"unknown", context.Background(), errors.New("secret detail"), jsonrpc.CodeInternalError, "Internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Map(tt.ctx, nil, "tools/call", tt.err)
			if got.Code != tt.code {
				t.Errorf("code %d, want %d", got.Code, tt.code)
			}
			if tt.msg != "" && got.Message != tt.msg {
				t.Errorf("message %q, want %q", got.Message, tt.msg)
			}
		})
	}
}

// TestAnswer: an Answer is found in a wrapped error and says its error's
// message.
func TestAnswer(t *testing.T) {
	err := fmt.Errorf("refused: %w", &Answer{Err: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no such method"}, Status: http.StatusNotFound})
	var a *Answer
	if !errors.As(err, &a) || a.Status != http.StatusNotFound || a.Error() != (&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no such method"}).Error() {
		t.Errorf("got %v", err)
	}
}
