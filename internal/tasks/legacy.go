package tasks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// A 2026-07-28 client of a 2025-11-25 upstream's tasks: the Tasks
// extension's requests mapped onto that revision's (see legacy).

// modernTask is a 2025-11-25 Task in the extension's shape: ttl and
// pollInterval are ttlMs and pollIntervalMs; every other member stays.
func modernTask(task *jsonx.Object) *jsonx.Object {
	out := &jsonx.Object{}
	for _, m := range task.Members {
		switch m.Name {
		case "ttl":
			out.Set("ttlMs", m.Value)
		case "pollInterval":
			out.Set("pollIntervalMs", m.Value)
		default:
			out.Set(m.Name, m.Value)
		}
	}
	return out
}

// Augment asks a 2025-11-25 upstream for a task where a 2026-07-28
// client cannot: that revision's clients never augment a request, the
// server decides (extension, "Capability Negotiation"). A tool (tool, its
// definition) whose execution.taskSupport is "required" is called as a
// task when the client declared the extension, and refused with -32021
// naming it when not; any other tool is called plainly. p are the
// tools/call params; us returns the upstream session the call goes on.
func Augment(who Caller, tool json.RawMessage, p *jsonx.Object, us func() (session.Upstream, error)) error {
	if !who.Stateless || !bytes.Contains(tool, []byte(`"required"`)) {
		return nil
	}
	t, err := jsonx.ParseValidObject(tool)
	if err != nil {
		return nil
	}
	exec, ok := t.Object("execution")
	if !ok {
		return nil
	}
	if s, _ := exec.GetString("taskSupport"); s != "required" {
		return nil
	}
	// The session the call goes on says the upstream's revision; the
	// call opens it anyway.
	if s, err := us(); err != nil || upstream.IsModern(s) {
		return nil
	}
	if !Declares(who.MetaCaps) {
		return errUndeclared()
	}
	p.Set("task", json.RawMessage(`{}`))
	return nil
}

// legacy serves a 2026-07-28 client's request about a 2025-11-25
// upstream's task, as the extension's methods map onto that revision's:
//
//   - tasks/get is tasks/get, its Task in the extension's shape; a task
//     the upstream calls completed or failed is fetched with tasks/result
//     (which answers at once for a terminal task) and inlined: a result
//     is "completed" with it (a tool error included, as the extension
//     says), a JSON-RPC error "failed" with it. An input_required task
//     asks for input on tasks/result's stream (2025-11-25 tasks, "Input
//     Required Status"): the gateway reads that stream up to the first
//     request (see inputs), keeps it in the task's record and shows it as
//     inputRequests until it is answered; when none comes, the task is
//     shown as working.
//   - tasks/update answers the kept requests its inputResponses name, as
//     responses to the upstream's requests, and ignores other keys (the
//     extension, "Task Update Requests"); it is acknowledged with {}.
//   - tasks/cancel is tasks/cancel, acknowledged with {} (a task already
//     terminal too: cancellation is cooperative in the extension).
func (ts *Tasks) legacy(ctx context.Context, rq Request, who Caller, method string, up *Upstream, t *session.Task, p *jsonx.Object) (json.RawMessage, error) {
	switch method {
	case protocol.MethodTasksUpdate:
		return ts.answerInput(ctx, up, t, p)
	case protocol.MethodTasksCancel:
		_, err := rq.Relay(ctx, method, up, p.Bytes())
		if je := (*jsonrpc.Error)(nil); err != nil && !(errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams) {
			return nil, err
		}
		return json.RawMessage(`{}`), nil
	}
	res, err := rq.Relay(ctx, method, up, p.Bytes())
	if err != nil {
		return nil, err
	}
	task, err := jsonx.ParseValidObject(res)
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %s: malformed task", up.Name)
	}
	expose(task, t, false, who.Settings.MaxTTL)
	out := modernTask(task)
	switch status, _ := task.GetString("status"); status {
	case "completed", "failed":
		r, err := rq.Relay(ctx, protocol.MethodTasksResult, up, p.Bytes())
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			out.SetString("status", "failed")
			e, _ := json.Marshal(ts.taskError(ctx, je, t, protocol.MethodTasksResult))
			out.Set("error", e)
		case err != nil:
			return nil, err
		default:
			ro, err := jsonx.ParseValidObject(r)
			if err != nil {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %s: malformed task result", up.Name)
			}
			out.SetString("status", "completed")
			out.Set("result", exposeCallResult(ro, t, up.Prefix, false))
		}
	case "input_required":
		if reqs := ts.inputs(ctx, rq, who, up, t); reqs != nil {
			out.Set("inputRequests", reqs)
		} else {
			out.SetString("status", "working")
		}
	}
	return out.Bytes(), nil
}

// An input is an upstream's request for input that a 2025-11-25 task
// waits on, kept in the task's record (session.Task.Input, an object of
// these by inputRequests key) until a tasks/update answers it.
type input struct {
	ID     json.RawMessage `json:"id"` // the upstream's request id
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// inputWait bounds how long a tasks/get waits on a 2025-11-25 upstream's
// tasks/result stream for the task's request for input; maxInputBytes
// bounds the requests a task record keeps.
const (
	inputWait     = 2 * time.Second
	maxInputBytes = 256 << 10
)

// inputs returns the inputRequests of an input_required 2025-11-25 task:
// those kept in its record, else the first request its upstream sends on
// a tasks/result stream within inputWait (then kept). nil means none.
func (ts *Tasks) inputs(ctx context.Context, rq Request, who Caller, up *Upstream, t *session.Task) json.RawMessage {
	pending := map[string]input{}
	if len(t.Input) > 0 {
		_ = json.Unmarshal(t.Input, &pending)
	}
	if len(pending) == 0 {
		in, ok := ts.fetchInput(ctx, rq, who, up, t)
		if !ok {
			return nil
		}
		pending["input-"+base64.RawURLEncoding.EncodeToString(in.ID)] = in
		b, _ := json.Marshal(pending)
		if len(b) > maxInputBytes {
			refuseInput(ctx, up, t, in, "request for input too large to relay")
			return nil
		}
		t.Input = b
		if err := ts.store.UpdateTask(ctx, t); err != nil {
			return nil
		}
	}
	keys := slices.Sorted(maps.Keys(pending))
	out := jsonx.Object{}
	for _, k := range keys {
		in := pending[k]
		b, _ := json.Marshal(struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params,omitempty"`
		}{in.Method, in.Params})
		out.Set(k, b)
	}
	return out.Bytes()
}

// fetchInput reads an upstream's tasks/result stream up to its first
// request for input, within inputWait, and closes it. A request the
// caller declared no capability for is refused at once.
func (ts *Tasks) fetchInput(ctx context.Context, rq Request, who Caller, up *Upstream, t *session.Task) (input, bool) {
	ctx, cancel := context.WithTimeout(ctx, inputWait)
	defer cancel()
	resp, err := up.Client.Call(ctx, t.Session, ts.id(), protocol.MethodTasksResult, taskIDParams(t.UpstreamTaskID))
	if err != nil {
		return input{}, false
	}
	defer resp.Close()
	for {
		msg, _, err := resp.Next()
		if err != nil {
			return input{}, false
		}
		switch msg.Kind {
		case jsonrpc.KindRequest:
			in := input{ID: msg.ID.Raw(), Method: msg.Method}
			ts.UpstreamRequest(ctx, who, up.Name, t.Session, msg)
			in.Params = msg.Params
			if rq.Lacks(msg) {
				refuseInput(ctx, up, t, in, "the client did not declare the capability for "+msg.Method)
				return input{}, false
			}
			return in, true
		case jsonrpc.KindResponse, jsonrpc.KindErrorResponse:
			return input{}, false // terminal now: the next poll says so
		}
	}
}

// refuseInput answers an upstream's request for input with an error.
func refuseInput(ctx context.Context, up *Upstream, t *session.Task, in input, why string) {
	if id, err := jsonrpc.RawID(in.ID); err == nil {
		_ = up.Client.Reply(context.WithoutCancel(ctx), t.Session, id, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: why})
	}
}

// answerInput serves a 2026-07-28 client's tasks/update of a 2025-11-25
// upstream's task: each response to a kept request goes to the upstream
// as the response to its request; other keys are ignored.
func (ts *Tasks) answerInput(ctx context.Context, up *Upstream, t *session.Task, p *jsonx.Object) (json.RawMessage, error) {
	responses, ok := p.Object("inputResponses")
	if !ok {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses must be an object")
	}
	pending := map[string]input{}
	if len(t.Input) > 0 {
		_ = json.Unmarshal(t.Input, &pending)
	}
	answered := false
	for _, m := range responses.Members {
		in, ok := pending[m.Name]
		if !ok {
			continue
		}
		id, err := jsonrpc.RawID(in.ID)
		if err != nil {
			continue
		}
		if err := up.Client.Reply(ctx, t.Session, id, m.Value, nil); err != nil {
			return nil, err
		}
		delete(pending, m.Name)
		answered = true
	}
	if answered {
		t.Input = nil
		if len(pending) > 0 {
			t.Input, _ = json.Marshal(pending)
		}
		if err := ts.store.UpdateTask(ctx, t); err != nil && !errors.Is(err, session.ErrNotFound) {
			return nil, err
		}
	}
	return json.RawMessage(`{}`), nil
}
