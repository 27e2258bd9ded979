package relay_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/relay"
	"github.com/mcpgw/gateway/internal/upstream"
)

func TestBreakerOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want budget.Outcome
	}{
		{"answer", nil, budget.Succeeded},
		{"json-rpc error", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no"), budget.Succeeded},
		{"unreachable", &upstream.Error{Upstream: "a", Err: errors.New("refused")}, budget.Failed},
		{"5xx", &upstream.Error{Upstream: "a", Status: 502}, budget.Failed},
		{"4xx", &upstream.Error{Upstream: "a", Status: 403}, budget.Succeeded},
		{"timeout", fmt.Errorf("call: %w", context.DeadlineExceeded), budget.Failed},
		{"other", errors.New("client gone"), budget.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := relay.BreakerOutcome(tc.err); got != tc.want {
				t.Errorf("BreakerOutcome = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFailureReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"none", nil, ""},
		{"timeout", context.DeadlineExceeded, "timeout"},
		{"cancelled", fmt.Errorf("x: %w", context.Canceled), "cancelled"},
		{"unknown", &catalog.ResolveError{Name: "t", Kind: catalog.Tools}, "unknown name"},
		{"conflict", &catalog.ResolveError{Name: "t", Kind: catalog.Tools, Conflict: []string{"a", "b"}}, "name conflict"},
		{"upstream", &upstream.Error{Upstream: "a", Status: 500, Err: errors.New("secret text")}, "upstream unreachable or failing"},
		{"json-rpc", jsonrpc.Errorf(-32602, "quoting the request"), "error -32602"},
		{"other", errors.New("quoting the request"), "internal error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := relay.FailureReason(tc.err); got != tc.want {
				t.Errorf("FailureReason = %q, want %q", got, tc.want)
			}
		})
	}
}
