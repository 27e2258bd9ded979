// Package audit writes the gateway's audit log: one JSON line for every
// tools/call, prompts/get and resources/read, every authentication failure
// and every policy denial, answering "who called what, when, with what
// outcome".
//
// A [Record] holds only what the caller puts in it. Tool arguments and
// results are not logged unless an upstream's audit_arguments says so, and
// then only as [ReduceArguments] makes them (a hash, or the shape with
// every value replaced). Callers must never put a token, a configured
// secret or a raw argument in any field; Reason is a short fixed string
// from the gateway's code, not an error text that may quote a request.
package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/protocol"
)

// Events: the values of Record.Event.
const (
	EventToolCall     = protocol.MethodToolsCall
	EventPromptGet    = protocol.MethodPromptsGet
	EventResourceRead = protocol.MethodResourcesRead
	EventAuthFailure  = "auth_failure"
	EventPolicyDenial = "policy_denial"
	// EventLimit is a request refused at a limit; Reason names the limit.
	EventLimit = "limit_exceeded"
	// EventVaultUnlink is a user's upstream token unlinked from the
	// console: Tenant, Subject and Upstream name the link, Operator who
	// unlinked it.
	EventVaultUnlink = "vault_unlink"
)

// Decisions: the values of Record.Decision.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// Outcomes: the values of Record.Outcome.
const (
	OutcomeOK      = "ok"
	OutcomeError   = "error"    // a JSON-RPC error or a failure reaching the upstream
	OutcomeIsError = "is_error" // a tools/call result with isError: true
	OutcomeDenied  = "denied"
)

// Outputs of config.Audit.Output besides a file path.
const (
	OutputStderr = "stderr"
	OutputStdout = "stdout"
	OutputOff    = "off"
)

// Message is the msg of every audit line, which tells audit lines apart
// from the gateway's other logs when both go to one stream.
const Message = "audit"

// A Record is one audited event. Empty fields are left out of the line.
type Record struct {
	// Time is when the event started; zero means now.
	Time time.Time
	// Event is one of the Event constants.
	Event string
	// Tenant, Subject and ClientID identify the caller: the tenant id, the
	// token's subject and its client id (azp or client_id).
	Tenant, Subject, ClientID string
	// SessionID is the MCP session's id.
	SessionID string
	// Method is the JSON-RPC method.
	Method string
	// Upstream is the upstream the call went, or would have gone, to.
	Upstream string
	// Tool is the tool or prompt's original name; URI the resource's.
	Tool, URI string
	// Decision is DecisionAllow or DecisionDeny.
	Decision string
	// Outcome is one of the Outcome constants.
	Outcome string
	// Duration is how long the call took; zero is left out.
	Duration time.Duration
	// TraceID is the trace the call belongs to; "" means the one of the
	// span in Record's ctx, if any.
	TraceID string
	// Arguments is what [ReduceArguments] made of the arguments, never
	// the raw arguments.
	Arguments string
	// Credentials is how the gateway authenticated to the upstream for
	// this call, when not with static headers alone: client_credentials,
	// token_exchange or signed_identity (never a credential itself).
	Credentials string
	// Operator is who acted on another's behalf, for an administrative
	// event: the console's signed-in subject, or "console".
	Operator string
	// Reason says why a request was denied or failed, as a short fixed
	// string ("hidden by policy", "insufficient scope", "timeout",
	// "upstream error", or an auth failure reason).
	Reason string
}

// A Logger writes audit records as JSON lines, and to a [Ring] if it has
// one (see [Logger.Tee]). Its methods are safe for concurrent use, and a
// nil *Logger writes nothing.
type Logger struct {
	h    slog.Handler // nil: the ring alone
	ring *Ring
}

// New returns a Logger writing one JSON object per line to w, with the
// keys time, level, msg ("audit"), event and the non-empty ones of
// tenant, subject, client_id, session_id, method, upstream, tool, uri,
// decision, outcome, duration_ms, trace_id, arguments, credentials,
// reason and operator. Each
// line is one Write to w.
func New(w io.Writer) *Logger {
	return &Logger{h: slog.NewJSONHandler(w, nil)}
}

// Open returns the Logger cfg.Output asks for and what to close on
// shutdown: "stderr" (and "") write to stderr, "stdout" to stdout, "off"
// gives a nil Logger, and anything else is a file path, appended to and
// created with mode 0600 if missing. The closer is never nil.
func Open(cfg config.Audit, stderr, stdout io.Writer) (*Logger, io.Closer, error) {
	switch cfg.Output {
	case "", OutputStderr:
		return New(stderr), nopCloser{}, nil
	case OutputStdout:
		return New(stdout), nopCloser{}, nil
	case OutputOff:
		return nil, nopCloser{}, nil
	}
	f, err := os.OpenFile(cfg.Output, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the audit log: %w", err)
	}
	return New(f), f, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// Tee returns a Logger that writes what l writes and adds every record to
// ring as well. l may be nil (audit output off): the ring alone is then
// written, so that the console still shows recent records.
func (l *Logger) Tee(ring *Ring) *Logger {
	if ring == nil {
		return l
	}
	// One ring per Logger: a Tee of a Tee replaces the first ring.
	t := &Logger{ring: ring}
	if l != nil {
		t.h = l.h
	}
	return t
}

// Enabled reports whether l writes anything, so that callers can skip
// preparing a record (reducing arguments) for a nil Logger.
func (l *Logger) Enabled() bool { return l != nil }

// Record writes r as one line. It reports no error, since the audit log
// must not fail the call it records; [Logger.Write] returns it.
func (l *Logger) Record(ctx context.Context, r Record) {
	_ = l.Write(ctx, r)
}

// Write is [Logger.Record] returning the write error.
func (l *Logger) Write(ctx context.Context, r Record) error {
	if l == nil {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	if r.TraceID == "" {
		if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
			r.TraceID = sc.TraceID().String()
		}
	}
	if l.ring != nil {
		rr := r
		rr.Time = t
		l.ring.Add(rr)
	}
	if l.h == nil {
		return nil
	}
	rec := slog.NewRecord(t, slog.LevelInfo, Message, 0)
	rec.AddAttrs(slog.String("event", r.Event))
	add := func(key, val string) {
		if val != "" {
			rec.AddAttrs(slog.String(key, val))
		}
	}
	add("tenant", r.Tenant)
	add("subject", r.Subject)
	add("client_id", r.ClientID)
	add("session_id", r.SessionID)
	add("method", r.Method)
	add("upstream", r.Upstream)
	add("tool", r.Tool)
	add("uri", r.URI)
	add("decision", r.Decision)
	add("outcome", r.Outcome)
	if r.Duration != 0 {
		rec.AddAttrs(slog.Float64("duration_ms", float64(r.Duration.Microseconds())/1000))
	}
	add("trace_id", r.TraceID)
	add("arguments", r.Arguments)
	add("credentials", r.Credentials)
	add("reason", r.Reason)
	add("operator", r.Operator)
	// Handle with a context that cannot be cancelled: a client that went
	// away must not cost the record of what it did.
	if err := l.h.Handle(context.WithoutCancel(ctx), rec); err != nil {
		return errors.Join(errors.New("writing the audit log"), err)
	}
	return nil
}
