package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/mcpgw/gateway/internal/bridge"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/listen"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/tasks"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/upcall"
	"github.com/mcpgw/gateway/internal/upstream"
)

// A Relayer relays client requests to upstreams (Relay). Its fields are
// set once, before the first Relay.
type Relayer struct {
	// Bridge bridges requests for input between the revisions.
	Bridge *bridge.Bridge
	// Tasks routes what upstreams say of their tasks.
	Tasks *tasks.Tasks
	// IDs number a 2026-07-28 caller's requests upstream.
	IDs *upcall.IDs
}

// An Out is where the client's answer to a request goes (dispatch.Out is
// one).
type Out interface {
	bridge.Out
	// Stream switches the answer to a stream before any event.
	Stream()
}

// A Request is one client request to relay to one upstream.
type Request struct {
	ID     jsonrpc.ID
	Method string
	// Target is the exposed name or URI the request routes on.
	Target string
	// Params may be an object, encoded only into the upstream request's
	// body (see jsonrpc.Params); it must not change once given.
	Params jsonrpc.Params
	// Input says the method may be answered with input_required
	// (tools/call, prompts/get, resources/read).
	Input bool
	Out   Out
	// Stateless is set for a request of the 2026-07-28 revision;
	// WantsLogs says it asked for log messages, of LogLevel or above.
	Stateless, WantsLogs bool
	LogLevel             string
	// Upstream is the upstream's client, and Prefix the prefix of the
	// names it is exposed under.
	Upstream *upstream.Client
	Prefix   string
	// MailboxMessages bounds a session's mailbox (sessions.mailbox_messages);
	// ParkedCalls the principal's parked calls (limits.parked_calls_per_principal).
	MailboxMessages, ParkedCalls int
	// Rewrite, if set, makes the upstream's result the client's.
	Rewrite func(json.RawMessage) (json.RawMessage, error)
}

// A Hop is what Relay needs of the request beyond its values: its
// upstream session and calls on it, what the gateway makes of what the
// upstream says, and who the caller is. Its methods are called on the
// request's goroutine.
type Hop interface {
	// Session returns the request's upstream session, opening one.
	Session(ctx context.Context) (session.Upstream, error)
	// Call sends one request upstream on the request's upstream session
	// (opening or re-opening it), with the request's own headers.
	Call(ctx context.Context, id jsonrpc.ID, params jsonrpc.Params) (*upcall.Response, error)
	// Observe is told each notification the upstream sends.
	Observe(msg *jsonrpc.Message)
	// ExposeUpdated returns a notifications/resources/updated as the
	// caller may hear it, or nil when it may not.
	ExposeUpdated(ctx context.Context, msg *jsonrpc.Message) []byte
	// EnableLogs makes the upstream log on the 2026-07-28 request's
	// shared upstream session.
	EnableLogs(ctx context.Context)
	// HoldShared holds the GET stream of shared upstream session us for
	// the request (see listen.Hub.HoldShared).
	HoldShared(ctx context.Context, us session.Upstream) *listen.Hold
	// AwaitRoots waits, for a session client that declared roots, until
	// its GET stream with the upstream is open (see listen.Hub.Await).
	AwaitRoots(ctx context.Context)
	// Caller is who the request is for, to the bridge; TaskCaller to
	// internal/tasks.
	Caller() *bridge.Caller
	TaskCaller() tasks.Caller
	// LimitHit records a refusal at limit (a telemetry.Limit* name).
	LimitHit(ctx context.Context, limit string)
}

// A run is one Relay: the call as the bridge sees it, and a 2026-07-28
// caller's hold on the shared GET stream and parked call.
type run struct {
	r      *Relayer
	hop    Hop
	rq     *Request
	call   *bridge.Call
	hold   *listen.Hold
	parked bool
	// cancelParked, set while the call may be parked, ends the upstream
	// call.
	cancelParked context.CancelCauseFunc
}

// Relay forwards rq to its upstream and relays the answer: each
// notification as it arrives, then the result (through rq.Rewrite, if
// set) or the upstream's error. Requests for input are bridged between
// the revisions (see internal/bridge).
func (r *Relayer) Relay(ctx context.Context, hop Hop, rq *Request) (json.RawMessage, error) {
	x := &run{r: r, hop: hop, rq: rq, call: &bridge.Call{Method: rq.Method, Target: rq.Target, Out: rq.Out}}
	params := rq.Params
	// A 2026-07-28 client's call may be parked for its retry: then the
	// upstream call outlives this request, and ends with the client gone
	// only while it is not parked.
	callCtx := ctx
	if rq.Stateless && rq.Input && r.Bridge.Relays() {
		us, err := hop.Session(ctx)
		if err != nil {
			return nil, err
		}
		if !upstream.IsModern(us) {
			if p := retryParams(params); p != nil {
				if state, ok := p.GetString("requestState"); ok {
					return r.Bridge.Resume(ctx, hop.Caller(), x.call, rq.Upstream, us, p, state, rq.Rewrite)
				}
				if p.Get("inputResponses") != nil {
					p.Delete("inputResponses")
					params = jsonrpc.ObjectParams(p)
				}
			}
			detached, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
			stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
			defer func() {
				if stop() && !x.parked {
					cancel(nil)
				}
			}()
			callCtx = detached
			x.cancelParked = cancel
		}
	}
	if rq.Stateless && rq.WantsLogs {
		hop.EnableLogs(ctx)
	}
	x.hold = listen.NoHold
	if rq.Stateless && rq.Input {
		// The upstream may ask on the shared session's GET stream (see
		// listen.Hub.HoldShared), which must be open first. A parked call's hold is
		// given back when its upstream call ends (upcall.Merged.Close).
		if us, err := hop.Session(ctx); err == nil {
			x.hold = hop.HoldShared(ctx, us)
			defer func() {
				if !x.parked {
					x.hold.Release()
				}
			}()
		}
	}
	// The principal's 2026-07-28 clients share its upstream sessions, and
	// each numbers its requests on its own: ids of the gateway's keep two
	// in flight apart. Nothing names them later (see dispatch's Serve).
	id := upcall.ForwardID(rq.ID)
	if rq.Stateless {
		id = r.IDs.Stateless()
	}
	for round := 1; ; round++ {
		res, us, err := x.once(ctx, callCtx, id, params)
		if err != nil || x.parked {
			return res, err
		}
		if !rq.Stateless && upstream.IsModern(us) && rq.Input && bridge.InputRequired(res) {
			// A 2026-07-28 upstream asks a session client for input.
			if round > bridge.MaxInputRounds {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %s asked for input more than %d times", rq.Upstream.Name(), bridge.MaxInputRounds)
			}
			raw, err := r.Bridge.AskClient(ctx, hop.Caller(), x.call, rq.Upstream, params.Bytes(), res, rq.MailboxMessages)
			if err != nil {
				return nil, err
			}
			params = jsonrpc.RawParams(raw)
			// A retry is a new request, with an id of its own (mrtr,
			// "Client Requirements" 3).
			id = jsonrpc.StringID("c." + rq.ID.String() + "/" + strconv.Itoa(round))
			continue
		}
		if rq.Rewrite != nil {
			return rq.Rewrite(res)
		}
		return res, nil
	}
}

// retryParams returns params as an object that may be edited (a copy of
// an object given), when they may be a 2026-07-28 client's retry (they
// have requestState or inputResponses), else nil. Raw params are parsed
// only when they contain either name: most calls skip the parse.
func retryParams(params jsonrpc.Params) *jsonx.Object {
	if o, ok := params.Object(); ok {
		if o.Get("requestState") == nil && o.Get("inputResponses") == nil {
			return nil
		}
		return o.Clone()
	}
	raw := params.Bytes()
	if !bytes.Contains(raw, []byte(`"requestState"`)) && !bytes.Contains(raw, []byte(`"inputResponses"`)) {
		return nil
	}
	p, err := jsonx.ParseValidObject(raw)
	if err != nil || p.Get("requestState") == nil && p.Get("inputResponses") == nil {
		return nil
	}
	return p
}

// once sends one request of Relay and relays what comes back until its
// result, which it returns with the upstream session it went on. A
// request for input it parks sets x.parked and returns the input_required
// result.
func (x *run) once(ctx, callCtx context.Context, id jsonrpc.ID, params jsonrpc.Params) (json.RawMessage, session.Upstream, error) {
	r, hop, rq := x.r, x.hop, x.rq
	name := rq.Upstream.Name()
	if !rq.Stateless && rq.Input {
		// The upstream may ask the client for its roots on its GET
		// stream, which must be open first (see listen.Hub.Await).
		hop.AwaitRoots(callCtx)
	}
	resp, err := hop.Call(callCtx, id, params)
	if err != nil {
		return nil, session.Upstream{}, Error(rq.Prefix, err)
	}
	// What the call reads: its response, and the requests of the shared
	// GET stream that are the call's (listen.Hub.HoldShared, upcall.Merge).
	var stream bridge.Stream = resp
	if x.hold != nil && x.hold.Inbox != nil {
		stream = upcall.Merge(resp, x.hold.Inbox, x.hold.Release)
	}
	defer func() {
		if !x.parked {
			stream.Close()
		}
	}()
	// A 2026-07-28 caller's call that may need a capability it did not
	// declare is answered 400 (see protocol.CapabilityError), which only a
	// response not yet begun can carry: its stream starts with the first
	// event relayed instead of with the upstream's.
	if resp.Streaming() && !(rq.Stateless && rq.Input) {
		rq.Out.Stream()
	}
	for {
		msg, raw, err := stream.Next()
		if err != nil {
			return nil, resp.Session(), err
		}
		switch msg.Kind {
		case jsonrpc.KindNotification:
			hop.Observe(msg)
			if msg.Method == protocol.NotifyCancelled {
				continue // about the upstream's own requests, of which we relay none
			}
			if msg.Method == protocol.NotifyResourceUpdated {
				// A 2026-07-28 caller hears of updates only on the
				// subscriptions/listen stream that subscribed
				// (basic/patterns/subscriptions): the principal's shared
				// upstream session subscribed to nothing of its.
				if rq.Stateless {
					continue
				}
				if raw = hop.ExposeUpdated(ctx, msg); raw == nil {
					continue
				}
			}
			if raw = r.Tasks.Note(ctx, hop.TaskCaller(), name, resp.Session(), msg, raw); raw == nil {
				continue // about a task the caller does not hold
			}
			if msg.Method == protocol.NotifyMessage && rq.Stateless && !(rq.WantsLogs && WantsLog(rq.LogLevel, msg)) {
				// 2026-07-28: no log messages for requests that did not
				// ask for them (_meta logLevel), nor below the level
				// they asked for.
				continue
			}
			if err := rq.Out.Event(raw); err != nil {
				return nil, resp.Session(), err // the client is gone
			}
		case jsonrpc.KindRequest:
			r.Tasks.UpstreamRequest(ctx, hop.TaskCaller(), name, resp.Session(), msg)
			who := hop.Caller()
			_, _, lacks := r.Bridge.Lacks(who, msg)
			if x.cancelParked != nil && !lacks {
				res, err := r.Bridge.Park(ctx, who, x.call, rq.Upstream, stream, msg, x.cancelParked, rq.ParkedCalls)
				if le := (*bridge.LimitError)(nil); errors.As(err, &le) {
					hop.LimitHit(ctx, telemetry.LimitParkedCalls)
				}
				if err != nil {
					return nil, resp.Session(), err
				}
				x.parked = true
				return res, resp.Session(), nil
			}
			r.Bridge.UpstreamRequest(ctx, who, rq.Out, rq.Upstream, resp.Session(), msg)
			if need, sub, lacks := r.Bridge.Lacks(who, msg); rq.Stateless && lacks {
				// The upstream was refused above and hears no more of the
				// call; the client is told what it lacks (2026-07-28
				// basic/index, "Per-request protocol fields").
				return nil, resp.Session(), &protocol.CapabilityError{Capability: need, Sub: sub}
			}
		case jsonrpc.KindResponse:
			return msg.Result, resp.Session(), nil
		case jsonrpc.KindErrorResponse:
			return nil, resp.Session(), Error(rq.Prefix, msg.Error)
		}
	}
}
