package dispatch

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// A 2026-07-28 client of a 2025-11-25 upstream's tasks: the Tasks
// extension's requests mapped onto that revision's (see legacyTask).

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

// augmentTask asks a 2025-11-25 upstream for a task where a 2026-07-28
// client cannot: that revision's clients never augment a request, the
// server decides (extension, "Capability Negotiation"). A tool whose
// execution.taskSupport is "required" is called as a task when the client
// declared the extension, and refused with -32021 naming it when not; any
// other tool is called plainly.
func (rq *Request) augmentTask(ctx context.Context, up *upstreamRef, it *catalog.Item, p *jsonx.Object) error {
	if !rq.adm.Stateless || !bytes.Contains(it.Raw, []byte(`"required"`)) {
		return nil
	}
	tool, err := jsonx.ParseValidObject(it.Raw)
	if err != nil {
		return nil
	}
	exec, ok := tool.Object("execution")
	if !ok {
		return nil
	}
	if s, _ := exec.GetString("taskSupport"); s != "required" {
		return nil
	}
	// The session the call goes on says the upstream's revision; relay
	// opens it anyway.
	if us, err := rq.upstreamSession(ctx, up); err != nil || upstream.IsModern(us) {
		return nil
	}
	if !rq.declaresTasks() {
		return &CapabilityError{Capability: "extensions", Sub: taskExtension}
	}
	p.Set("task", json.RawMessage(`{}`))
	return nil
}

// declaresTasks reports whether a 2026-07-28 request declared the Tasks
// extension in its client capabilities.
func (rq *Request) declaresTasks() bool {
	caps, err := jsonx.ParseValidObject(rq.adm.MetaCaps)
	if err != nil {
		return false
	}
	ext, ok := caps.Object("extensions")
	return ok && ext.Get(taskExtension) != nil && string(ext.Get(taskExtension)) != "null"
}

// legacyTask serves a 2026-07-28 client's request about a 2025-11-25
// upstream's task, as the extension's methods map onto that revision's:
//
//   - tasks/get is tasks/get, its Task in the extension's shape; a task
//     the upstream calls completed or failed is fetched with tasks/result
//     (which answers at once for a terminal task) and inlined: a result
//     is "completed" with it (a tool error included, as the extension
//     says), a JSON-RPC error "failed" with it. An input_required task
//     asks for input on tasks/result's stream (2025-11-25 tasks, "Input
//     Required Status"): the gateway reads that stream up to the first
//     request (see taskInputs), keeps it in the task's record and shows
//     it as inputRequests until it is answered; when none comes, the
//     task is shown as working.
//   - tasks/update answers the kept requests its inputResponses name, as
//     responses to the upstream's requests, and ignores other keys (the
//     extension, "Task Update Requests"); it is acknowledged with {}.
//   - tasks/cancel is tasks/cancel, acknowledged with {} (a task already
//     terminal too: cancellation is cooperative in the extension).
func (rq *Request) legacyTask(ctx context.Context, c *call, up *upstreamRef, t *session.Task, p *jsonx.Object) (json.RawMessage, error) {
	switch c.method {
	case "tasks/update":
		return rq.answerTaskInput(ctx, up, t, p)
	case "tasks/cancel":
		_, err := rq.relay(ctx, c, up, p.Bytes(), nil)
		if je := (*jsonrpc.Error)(nil); err != nil && !(errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams) {
			return nil, err
		}
		return json.RawMessage(`{}`), nil
	}
	res, err := rq.relay(ctx, c, up, p.Bytes(), nil)
	if err != nil {
		return nil, err
	}
	task, err := jsonx.ParseValidObject(res)
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %s: malformed task", up.cfg.Name)
	}
	rq.exposeTask(task, t, false)
	out := modernTask(task)
	switch status, _ := task.GetString("status"); status {
	case "completed", "failed":
		rc := *c
		rc.method = "tasks/result"
		r, err := rq.relay(ctx, &rc, up, p.Bytes(), nil)
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			out.SetString("status", "failed")
			e, _ := json.Marshal(rq.taskError(ctx, je, t, rc.method))
			out.Set("error", e)
		case err != nil:
			return nil, err
		default:
			ro, err := jsonx.ParseValidObject(r)
			if err != nil {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %s: malformed task result", up.cfg.Name)
			}
			out.SetString("status", "completed")
			out.Set("result", exposeCallResult(ro, t, up, false))
		}
	case "input_required":
		if reqs := rq.taskInputs(ctx, up, t); reqs != nil {
			out.Set("inputRequests", reqs)
		} else {
			out.SetString("status", "working")
		}
	}
	return out.Bytes(), nil
}

// A taskInput is an upstream's request for input that a 2025-11-25
// task waits on, kept in the task's record (session.Task.Input, an object
// of these by inputRequests key) until a tasks/update answers it.
type taskInput struct {
	ID     json.RawMessage `json:"id"` // the upstream's request id
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// inputWait bounds how long a tasks/get waits on a 2025-11-25 upstream's
// tasks/result stream for the task's request for input; maxTaskInputBytes
// bounds the requests a task record keeps.
const (
	inputWait         = 2 * time.Second
	maxTaskInputBytes = 256 << 10
)

// taskInputs returns the inputRequests of an input_required 2025-11-25
// task: those kept in its record, else the first request its upstream
// sends on a tasks/result stream within inputWait (then kept). nil means
// none.
func (rq *Request) taskInputs(ctx context.Context, up *upstreamRef, t *session.Task) json.RawMessage {
	pending := map[string]taskInput{}
	if len(t.Input) > 0 {
		_ = json.Unmarshal(t.Input, &pending)
	}
	if len(pending) == 0 {
		in, ok := rq.fetchTaskInput(ctx, up, t)
		if !ok {
			return nil
		}
		pending["input-"+base64.RawURLEncoding.EncodeToString(in.ID)] = in
		b, _ := json.Marshal(pending)
		if len(b) > maxTaskInputBytes {
			rq.refuseInput(ctx, up, t, in, "request for input too large to relay")
			return nil
		}
		t.Input = b
		if err := rq.h.tasks.UpdateTask(ctx, t); err != nil {
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

// fetchTaskInput reads an upstream's tasks/result stream up to its first
// request for input, within inputWait, and closes it. A request the
// caller declared no capability for is refused at once.
func (rq *Request) fetchTaskInput(ctx context.Context, up *upstreamRef, t *session.Task) (taskInput, bool) {
	ctx, cancel := context.WithTimeout(ctx, inputWait)
	defer cancel()
	params, _ := json.Marshal(map[string]string{"taskId": t.UpstreamTaskID})
	resp, err := up.client.Call(ctx, t.Session, rq.h.internalID(), "tasks/result", params)
	if err != nil {
		return taskInput{}, false
	}
	defer resp.Close()
	for {
		msg, _, err := resp.Next()
		if err != nil {
			return taskInput{}, false
		}
		switch msg.Kind {
		case jsonrpc.KindRequest:
			in := taskInput{ID: msg.ID.Raw(), Method: msg.Method}
			rq.exposeTaskRequest(ctx, up, t.Session, msg)
			in.Params = msg.Params
			if _, _, lacks := rq.h.bridge.Lacks(rq.caller(), msg); lacks {
				rq.refuseInput(ctx, up, t, in, "the client did not declare the capability for "+msg.Method)
				return taskInput{}, false
			}
			return in, true
		case jsonrpc.KindResponse, jsonrpc.KindErrorResponse:
			return taskInput{}, false // terminal now: the next poll says so
		}
	}
}

// refuseInput answers an upstream's request for input with an error.
func (rq *Request) refuseInput(ctx context.Context, up *upstreamRef, t *session.Task, in taskInput, why string) {
	if id, err := jsonrpc.RawID(in.ID); err == nil {
		_ = up.client.Reply(context.WithoutCancel(ctx), t.Session, id, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: why})
	}
}

// answerTaskInput serves a 2026-07-28 client's tasks/update of a
// 2025-11-25 upstream's task: each response to a kept request goes to the
// upstream as the response to its request; other keys are ignored.
func (rq *Request) answerTaskInput(ctx context.Context, up *upstreamRef, t *session.Task, p *jsonx.Object) (json.RawMessage, error) {
	responses, ok := p.Object("inputResponses")
	if !ok {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses must be an object")
	}
	pending := map[string]taskInput{}
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
		if err := up.client.Reply(ctx, t.Session, id, m.Value, nil); err != nil {
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
		if err := rq.h.tasks.UpdateTask(ctx, t); err != nil && !errors.Is(err, session.ErrNotFound) {
			return nil, err
		}
	}
	return json.RawMessage(`{}`), nil
}
