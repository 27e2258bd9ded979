package upcall

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Held guards the upstream sessions a gateway session's record holds
// (Record.Upstreams, by upstream name) as one request reads and changes
// them: requests fanned out to several upstreams, and a GET stream's
// listeners, change them concurrently. The map is read and changed only
// through Held's methods, under its mutex.
//
// The record is named at each call, not when Held is made: the request
// that holds it is given its record after it is made, and initialize
// gives it another. Its zero value is ready; it must not be copied once
// used.
type Held struct {
	mu sync.Mutex
}

// Snapshot returns a copy of rec's upstream sessions; nil when rec is nil.
func (h *Held) Snapshot(rec *session.Record) map[string]session.Upstream {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rec == nil {
		return nil
	}
	return maps.Clone(rec.Upstreams)
}

// Entry returns rec's upstream session with upstream name, and whether
// there is one (none when rec is nil).
func (h *Held) Entry(rec *session.Record, name string) (session.Upstream, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rec == nil {
		return session.Upstream{}, false
	}
	us, ok := rec.Upstreams[name]
	return us, ok
}

// Set makes us rec's upstream session with upstream name. rec must not be
// nil.
func (h *Held) Set(rec *session.Record, name string, us session.Upstream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rec.Upstreams == nil {
		rec.Upstreams = make(map[string]session.Upstream)
	}
	rec.Upstreams[name] = us
}

// Replace makes m (as the store has it now) rec's upstream sessions; m is
// rec's from then on. rec must not be nil.
func (h *Held) Replace(rec *session.Record, m map[string]session.Upstream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rec.Upstreams = m
}

// A Hop is how one gateway session's requests reach one upstream: on the
// upstream session its record holds (under Held), opened with Opener on
// first use, and again when the upstream forgot it.
type Hop struct {
	Held   *Held
	Record *session.Record // the gateway session
	Opener *Opener
	Client *upstream.Client
	// Caps returns the capabilities announced to the upstream; it is
	// asked only when a session is opened.
	Caps func() json.RawMessage
}

// Session returns the record's upstream session with the hop's upstream,
// opening one if there is none yet.
func (p Hop) Session(ctx context.Context) (session.Upstream, error) {
	if us, ok := p.Held.Entry(p.Record, p.Client.Name()); ok {
		return us, nil
	}
	return p.Open(ctx, "")
}

// Open opens a new upstream session to replace the one with id prev (""
// when there is none), stores it (see Opener.Open) and holds it. The
// record must not be nil.
func (p Hop) Open(ctx context.Context, prev string) (session.Upstream, error) {
	us, err := p.Opener.Open(ctx, p.Record.ID, p.Client, p.Caps(), prev)
	if err != nil {
		return session.Upstream{}, err
	}
	p.Held.Set(p.Record, p.Client.Name(), us)
	return us, nil
}

// A Call is one request a Hop sends.
type Call struct {
	// Tracer (required) and Metrics (nil: none) are those of its client
	// span, in Tenant (see Begin).
	Tracer  trace.Tracer
	Metrics *telemetry.Metrics
	Tenant  string

	ID     jsonrpc.ID
	Method string
	// Params may be an object, encoded only into the request's body
	// (see jsonrpc.Params): it is not changed, only copied to be edited.
	Params jsonrpc.Params
	Header http.Header // extra headers (the Mcp-Param-* of a tools/call), or nil

	// Shape, if set, shapes Params for the upstream session they go on
	// (see ShapeParams).
	Shape func(us session.Upstream, params jsonrpc.Params) jsonrpc.Params
	// Guard, if set, admits the request once its span started, before a
	// session is opened: an error refuses it; the func it returns is
	// called with how the request ended (see Response.Done).
	Guard func(ctx context.Context) (done func(error), err error)
	// Note, if set, is told how the upstream answered (nil: it did), when
	// the request was sent: see Health.
	Note func(err error)
	Log  *slog.Logger // nil: no logging
}

// Call sends c on the hop's upstream session, opened if there is none
// yet, in a client span whose context travels upstream in the headers and
// in params._meta. When the upstream no longer knows the session
// (upstream.ErrSessionExpired) a new one is opened and held, and c is
// sent once more; a second expiry is the error. The span ends, and the
// request is counted, when the response is closed, or here when there is
// none.
func (p Hop) Call(ctx context.Context, c Call) (*Response, error) {
	ctx, tr := Begin(ctx, c.Tracer, c.Metrics, p.Client.Name(), c.Method, c.Tenant)
	if c.Guard != nil {
		done, err := c.Guard(ctx)
		if err != nil {
			tr.Finish(err)
			return nil, err
		}
		tr.Done = done
	}
	us, err := p.Session(ctx)
	if err != nil {
		tr.Finish(err)
		return nil, err
	}
	resp, err := p.send(ctx, us, c)
	if errors.Is(err, upstream.ErrSessionExpired) {
		if c.Log != nil {
			c.Log.Info("upstream session expired; opening a new one", "upstream", p.Client.Name())
		}
		if us, err = p.Open(ctx, us.SessionID); err != nil {
			tr.Finish(err)
			return nil, err
		}
		resp, err = p.send(ctx, us, c)
	}
	if c.Note != nil {
		c.Note(err)
	}
	if err != nil {
		tr.Finish(err)
		return nil, err
	}
	tr.Start(resp, us)
	return tr, nil
}

// send sends c on upstream session us, its params shaped for us and
// carrying the span's context.
func (p Hop) send(ctx context.Context, us session.Upstream, c Call) (*upstream.Response, error) {
	params := c.Params
	if c.Shape != nil {
		params = c.Shape(us, params)
	}
	if o, ok := params.Object(); ok {
		// The trace context goes into a copy of the object (the call's
		// own stays as it is, to be sent once more on a new session), and
		// the params are encoded only into the request's body.
		if withTrace, err := telemetry.InjectMetaObject(ctx, o); err == nil {
			params = jsonrpc.ObjectParams(withTrace)
		}
	} else if withTrace, err := telemetry.InjectMeta(ctx, params.Bytes()); err == nil {
		params = jsonrpc.RawParams(withTrace)
	}
	return p.Client.CallParams(ctx, us, c.ID, c.Method, params, c.Header)
}
