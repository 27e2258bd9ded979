package bridge

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// A Bridge relays requests for input between upstreams and clients of
// either revision. Its zero value is not usable: see New.
type Bridge struct {
	mailbox session.Mailbox // nil when the store has none
	log     *slog.Logger
	metrics *telemetry.Metrics
	caps    func(json.RawMessage) map[string]bool
	observe func(upstream string, msg *jsonrpc.Message)
	shape   func(upstream, method string, params json.RawMessage) json.RawMessage
	own     Owner
	parked  parking
}

// Options configure a Bridge.
type Options struct {
	// Mailbox carries what one replica hands to another: answers, parked
	// calls' states and their pumps' messages. Without one, requests for
	// input reach only a session client on the call's own stream.
	Mailbox session.Mailbox
	Logger  *slog.Logger
	Metrics *telemetry.Metrics
	// Caps returns the names of the capabilities in a capabilities
	// object (the caller caches the parse).
	Caps func(json.RawMessage) map[string]bool
	// Observe is told of the notifications a parked call's upstream sends
	// (nobody else hears them).
	Observe func(upstream string, msg *jsonrpc.Message)
	// Own runs the pumps of parked calls.
	Own Owner
	// Shape, if set, rewrites the params of a request an upstream sends
	// before the client sees it (the resource URIs it holds, exposed in
	// the gateway's namespace).
	Shape func(upstream, method string, params json.RawMessage) json.RawMessage
}

// An Owner runs goroutines that outlive a request, and waits for them.
type Owner interface {
	// Go runs f in a goroutine the owner waits for, with a context the
	// owner ends when it closes. It returns false, and runs nothing, once
	// the owner is closing.
	Go(f func(ctx context.Context)) bool
}

// New returns a Bridge.
func New(opts Options) *Bridge {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	observe := opts.Observe
	if observe == nil {
		observe = func(string, *jsonrpc.Message) {}
	}
	shape := opts.Shape
	if shape == nil {
		shape = func(_, _ string, params json.RawMessage) json.RawMessage { return params }
	}
	return &Bridge{mailbox: opts.Mailbox, log: log, metrics: opts.Metrics, caps: opts.Caps, observe: observe, shape: shape, own: opts.Own}
}

// Relays reports whether the bridge can carry a request for input across
// requests (it has a mailbox), which parking a call needs.
func (b *Bridge) Relays() bool { return b.mailbox != nil }

// A Caller is who a call is for.
type Caller struct {
	Principal string // issuer, subject and tenant, as one key
	Tenant    string
	// Session is the gateway session the call is in (a stateless caller's:
	// the record the gateway keeps for the principal).
	Session string
	// Caps are the client capabilities the caller declared.
	Caps json.RawMessage
	// Stateless is set for a caller of the 2026-07-28 revision.
	Stateless bool
}

// A Call is the client request being relayed.
type Call struct {
	Method string
	Target string // the exposed name or URI it routes on
	Out    Out
}

// An Out is where the client's answer to a call goes.
type Out interface {
	// Event sends a message ahead of the response; an error means the
	// client is gone.
	Event(msg []byte) error
	// Collects reports that nothing but the response can reach the
	// client (a batch).
	Collects() bool
}

// An Upstream is the upstream side of a call: *upstream.Client is one.
type Upstream interface {
	Name() string
	// Reply answers a request the upstream sent on session us.
	Reply(ctx context.Context, us session.Upstream, id jsonrpc.ID, result json.RawMessage, e *jsonrpc.Error) error
	// Timeout bounds a call to the upstream, parked time included.
	Timeout() time.Duration
}

// A Stream is an upstream's answer to a call, read message by message.
type Stream interface {
	Next() (*jsonrpc.Message, []byte, error)
	Close() error
	// Session is the upstream session the call went on.
	Session() session.Upstream
}

// LimitError is a call refused at a limit of the bridge's; its JSON-RPC
// error is what the client gets.
type LimitError struct{ Err *jsonrpc.Error }

func (e *LimitError) Error() string { return e.Err.Error() }
func (e *LimitError) Unwrap() error { return e.Err }
