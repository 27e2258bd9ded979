package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Tasks: an upstream may answer a tools/call with a task instead of a
// result (2025-11-25 basic/utilities/tasks; the 2026-07-28 Tasks
// extension, io.modelcontextprotocol/tasks, SEP-2663), to be polled and
// fetched later. The gateway records each such task in the task store
// under an id of its own ("task-" and 128 random bits) bound to the
// principal that created it, and routes the task's later requests to the
// upstream, and the upstream session, that created it. The client never
// sees the upstream's id; every id it may not use (unknown, expired,
// another principal's or tenant's, of an upstream its tenant may no longer
// use) gets the same -32602 (2025-11-25 tasks, "Security Considerations":
// receivers bind tasks to the authorization context).
//
// Revisions: a session client (2025-11-25) gets tasks of 2025-11-25
// upstreams, and tasks/get, tasks/result, tasks/cancel and tasks/list. A
// 2026-07-28 client gets tasks/get, tasks/update and tasks/cancel (routed
// by Mcp-Name = task id, see protocol.NameKey), against upstreams of
// either revision: a 2026-07-28 upstream's task is passed through, a
// 2025-11-25 upstream's is mapped (see legacyTask).

// The extension's identifier and the _meta key naming a message's task.
const (
	taskExtension   = "io.modelcontextprotocol/tasks"
	metaRelatedTask = "io.modelcontextprotocol/related-task"
)

// maxTaskIDLen bounds a task id the gateway looks up: its own are 37
// bytes, and a longer one is unknown without asking the store.
const maxTaskIDLen = 64

// minReplacedID is the shortest upstream task id replaced inside an
// error's text; see taskError.
const minReplacedID = 8

// maxUpstreamTaskIDLen bounds an upstream's task id the gateway records:
// the id is the upstream's choice, and kept in the store.
const maxUpstreamTaskIDLen = 256

// errTaskNotFound is the answer to every task id the caller may not use
// (2025-11-25 tasks, "Protocol Errors").
func errTaskNotFound() error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Failed to retrieve task: Task not found")
}

func (rq *Request) taskLimits() session.TaskLimits {
	t := rq.st.cfg.Sessions.Tasks
	return session.TaskLimits{MaxPerPrincipal: t.MaxPerPrincipal, MaxPerTenant: t.MaxPerTenant, MaxTasks: t.MaxTasks}
}

func (rq *Request) taskPrincipal() session.Principal {
	p := rq.principal
	return session.Principal{Issuer: p.Issuer, Subject: p.Subject, Tenant: p.Tenant}
}

// ownTask returns the caller's task gid and its upstream, or
// errTaskNotFound.
func (rq *Request) ownTask(ctx context.Context, gid string) (*session.Task, *upstreamRef, error) {
	if len(gid) > maxTaskIDLen || !strings.HasPrefix(gid, "task-") {
		return nil, nil, errTaskNotFound()
	}
	t, err := rq.h.tasks.GetTask(ctx, gid)
	if errors.Is(err, session.ErrNotFound) {
		return nil, nil, errTaskNotFound()
	}
	if err != nil {
		return nil, nil, err
	}
	up := rq.st.byName[t.Upstream]
	if t.Principal != rq.taskPrincipal() || up == nil || !slices.Contains(rq.view.Upstreams, t.Upstream) {
		return nil, nil, errTaskNotFound()
	}
	return t, up, nil
}

// useTaskSession makes the request's calls to the task's upstream go on
// the upstream session that holds the task: an upstream's tasks may live
// in its session (server-everything's do), and another session of the
// same principal, or a 2026-07-28 request, may ask for it. Only this
// request's copy of the record changes; should the upstream session have
// expired, callWith opens a new one and the upstream knows the task no
// more.
func (rq *Request) useTaskSession(t *session.Task) {
	cur, _ := rq.upstreamEntry(t.Upstream)
	if cur.SessionID != t.Session.SessionID || cur.ProtocolVersion != t.Session.ProtocolVersion {
		us := t.Session
		us.Capabilities = cur.Capabilities
		rq.setUpstream(t.Upstream, us)
	}
}

// createdTask finds the task in a CreateTaskResult: {"task": Task} from a
// 2025-11-25 upstream, {"resultType": "task", ...Task} from a 2026-07-28
// one. ok is false for any other result.
func createdTask(o *jsonx.Object) (task *jsonx.Object, modern, ok bool) {
	if rt, _ := o.GetString("resultType"); rt == "task" {
		if id, _ := o.GetString("taskId"); id != "" {
			return o, true, true
		}
		return nil, true, false
	}
	if o.Get("content") != nil {
		return nil, false, false
	}
	if t, isObj := o.Object("task"); isObj {
		if id, _ := t.GetString("taskId"); id != "" {
			return t, false, true
		}
	}
	return nil, false, false
}

// taskCreated is the tools/call rewrite of a result that is a task: it
// records the task and returns the result with the gateway's id. ok is
// false for a result that is no task.
func (rq *Request) taskCreated(ctx context.Context, c *call, up *upstreamRef, res json.RawMessage) (json.RawMessage, bool, error) {
	if !bytes.Contains(res, []byte(`"taskId"`)) {
		return nil, false, nil // the common case: no parse
	}
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return nil, false, nil
	}
	task, modern, ok := createdTask(o)
	if !ok {
		return nil, false, nil
	}
	upID, _ := task.GetString("taskId")
	us := rq.upstreamSessions()[up.cfg.Name]
	if len(upID) > maxUpstreamTaskIDLen {
		rq.h.log.Warn("upstream task id too long", "upstream", up.cfg.Name, "bytes", len(upID))
		rq.cancelUnrecorded(ctx, up, us, upID)
		return nil, true, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %s answered with a task id longer than %d bytes", up.cfg.Name, maxUpstreamTaskIDLen)
	}
	us.Capabilities = nil
	now := time.Now()
	ttl := rq.taskTTL(task, modern)
	t := &session.Task{
		ID: session.NewTaskID(), Principal: rq.taskPrincipal(), Upstream: up.cfg.Name, Session: us,
		UpstreamTaskID: upID, Created: now, Expires: now.Add(ttl),
	}
	if err := rq.h.tasks.CreateTask(ctx, t, rq.taskLimits()); err != nil {
		// The upstream runs a task no one could reach: end it.
		rq.cancelUnrecorded(ctx, up, us, upID)
		var le *session.LimitError
		if errors.As(err, &le) {
			rq.h.LimitHit(ctx, rq, taskLimitName(le.Limit), c.method)
			return nil, true, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
				"Too Many Requests: task limit %s (%d) reached; the upstream's task was cancelled", le.Limit, le.Max)
		}
		return nil, true, err
	}
	rq.exposeTask(task, t, modern)
	if !modern {
		o.Set("task", task.Bytes())
	}
	if rq.adm.Stateless && !modern {
		// A 2026-07-28 client is answered in its revision's shape
		// (extension, "Task Creation").
		out := modernTask(task)
		out.SetString("resultType", "task")
		if meta := o.Get("_meta"); meta != nil {
			out.Set("_meta", meta)
		}
		return out.Bytes(), true, nil
	}
	return o.Bytes(), true, nil
}

// taskTTL is how long the gateway keeps a task: its ttl, bounded by
// sessions.tasks.max_ttl (an unlimited ttl is the bound).
func (rq *Request) taskTTL(task *jsonx.Object, modern bool) time.Duration {
	maxTTL := rq.st.cfg.Sessions.Tasks.MaxTTL.D()
	key := "ttl"
	if modern {
		key = "ttlMs"
	}
	if ms, err := strconv.ParseFloat(string(task.Get(key)), 64); err == nil && ms > 0 && ms < float64(maxTTL.Milliseconds()) {
		return time.Duration(ms) * time.Millisecond
	}
	return maxTTL
}

// exposeTask puts the gateway's id and ttl in a task object of the
// upstream's (a Task, a CreateTaskResult's, a DetailedTask): a ttl longer
// than the gateway keeps the task is announced as the gateway's
// (2025-11-25 tasks, "TTL and Resource Management": receivers MAY
// override the requested ttl, and MUST say the actual one).
func (rq *Request) exposeTask(task *jsonx.Object, t *session.Task, modern bool) {
	task.SetString("taskId", t.ID)
	key := "ttl"
	if modern {
		key = "ttlMs"
	}
	if maxTTL := rq.st.cfg.Sessions.Tasks.MaxTTL.D(); rq.taskTTL(task, modern) == maxTTL {
		task.Set(key, []byte(strconv.FormatInt(maxTTL.Milliseconds(), 10)))
	}
}

// cancelUnrecorded cancels an upstream's task the gateway could not
// record, bounded in time whatever happens to ctx.
func (rq *Request) cancelUnrecorded(ctx context.Context, up *upstreamRef, us session.Upstream, upID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	params, _ := json.Marshal(map[string]string{"taskId": upID})
	resp, err := up.client.Call(ctx, us, rq.h.internalID(), "tasks/cancel", params)
	if err != nil {
		return
	}
	defer resp.Close()
	_, _ = resultOf(resp.Next, nil)
}

func taskLimitName(limit string) string {
	switch limit {
	case session.LimitTasksPerPrincipal:
		return telemetry.LimitTasksPrincipal
	case session.LimitTasksPerTenant:
		return telemetry.LimitTasksTenant
	}
	return telemetry.LimitTasks
}

// taskMethod serves tasks/get, tasks/result and tasks/cancel of a session
// client, and tasks/get, tasks/update and tasks/cancel of a 2026-07-28
// one.
func taskMethod(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
	p, gid, err := routedParams(c.params, "taskId")
	if err != nil {
		return nil, err
	}
	if rq.adm.Stateless && !rq.declaresTasks() {
		// Extension, "Protocol Errors".
		return nil, &CapabilityError{Capability: "extensions", Sub: taskExtension}
	}
	t, up, err := rq.ownTask(ctx, gid)
	if err != nil {
		return nil, err
	}
	c.upstream = t.Upstream
	rq.useTaskSession(t)
	p.SetString("taskId", t.UpstreamTaskID)
	modernUp := upstream.IsModern(t.Session)
	switch {
	case rq.adm.Stateless && !modernUp:
		res, err := rq.legacyTask(ctx, c, up, t, p)
		return res, rq.taskError(ctx, err, t, c.method)
	case !rq.adm.Stateless && modernUp:
		// Not made for a session client (see capabilities).
		return nil, errTaskNotFound()
	}
	res, err := rq.relay(ctx, c, up, p.Bytes(), func(res json.RawMessage) (json.RawMessage, error) {
		return rq.exposeTaskResult(c.method, res, t, up, modernUp), nil
	})
	return res, rq.taskError(ctx, err, t, c.method)
}

// exposeTaskResult rewrites an upstream's answer to a tasks/* request: the
// task's id and ttl, and in a tool's result the resource URIs and the
// related-task _meta, as for a call.
func (rq *Request) exposeTaskResult(method string, res json.RawMessage, t *session.Task, up *upstreamRef, modern bool) json.RawMessage {
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return res
	}
	switch {
	case method == "tasks/result":
		return exposeCallResult(o, t, up, true)
	case o.Get("taskId") != nil:
		rq.exposeTask(o, t, modern)
		if r, ok := o.Object("result"); ok {
			o.Set("result", exposeCallResult(r, t, up, false))
		}
	}
	return o.Bytes()
}

// exposeCallResult is a task's CallToolResult as the client sees it: its
// resource URIs exposed and its related-task _meta naming the gateway's
// id (2025-11-25 tasks, "Related Task Metadata": tasks/result MUST carry
// it), or none (the extension's result inside a task names no task).
func exposeCallResult(o *jsonx.Object, t *session.Task, up *upstreamRef, related bool) json.RawMessage {
	if meta, ok := o.Object("_meta"); ok && meta.Get(metaRelatedTask) != nil {
		if related {
			meta.Set(metaRelatedTask, relatedTask(t.ID))
		} else {
			meta.Delete(metaRelatedTask)
		}
		if len(meta.Members) == 0 {
			o.Delete("_meta")
		} else {
			o.Set("_meta", meta.Bytes())
		}
	}
	return catalog.ExposeToolResult(o.Bytes(), up.cat.Prefix)
}

func relatedTask(id string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"taskId": id})
	return b
}

// taskError shapes an upstream's error about a task: its text and data
// name the gateway's id, never the upstream's. A tasks/get the upstream
// answers -32602 means it forgot the task: so does the gateway.
func (rq *Request) taskError(ctx context.Context, err error, t *session.Task, method string) error {
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return err
	}
	e := *je
	up := t.UpstreamTaskID
	if len(up) < minReplacedID {
		// Replacing so short an id would mangle the text around it.
		if strings.Contains(e.Message, up) {
			e.Message = "Task " + t.ID + ": the upstream refused the request"
		}
		if strings.Contains(string(e.Data), up) {
			e.Data = nil
		}
	} else {
		e.Message = strings.ReplaceAll(e.Message, up, t.ID)
		if len(e.Data) > 0 {
			e.Data = json.RawMessage(strings.ReplaceAll(string(e.Data), up, t.ID))
			if !json.Valid(e.Data) {
				e.Data = nil
			}
		}
	}
	if method == "tasks/get" && e.Code == jsonrpc.CodeInvalidParams {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = rq.h.tasks.DeleteTask(dctx, t.ID)
		return errTaskNotFound()
	}
	return &e
}

// exposeTaskNote rewrites a notification an upstream sent in a call on
// session us: a notifications/tasks/status names the gateway's id (and is
// dropped, nil, for a task the caller does not hold), and a related-task
// _meta names the gateway's id or is removed.
func (rq *Request) exposeTaskNote(ctx context.Context, up *upstreamRef, us session.Upstream, msg *jsonrpc.Message, raw []byte) []byte {
	status := msg.Method == "notifications/tasks/status"
	if !status && !bytes.Contains(raw, []byte(metaRelatedTask)) {
		return raw
	}
	p, err := jsonx.ParseValidObject(msg.Params)
	if err != nil {
		return raw
	}
	if status {
		if rq.adm.Stateless {
			return nil // no such notification in 2026-07-28 (the extension's is notifications/tasks)
		}
		upID, _ := p.GetString("taskId")
		t := rq.findTask(ctx, up, us, upID)
		if t == nil {
			return nil
		}
		rq.exposeTask(p, t, false)
		p.Delete("_meta") // SHOULD NOT carry related-task (tasks, "Task Notifications")
		return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, msg.Method, p.Bytes())
	}
	if !rq.exposeRelated(ctx, up, us, p) {
		return raw
	}
	return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, msg.Method, p.Bytes())
}

// exposeTaskRequest rewrites the related-task _meta of a request an
// upstream sent in a call on session us (an elicitation a task waits on,
// 2025-11-25 tasks, "Input Required Status"), before it is relayed.
func (rq *Request) exposeTaskRequest(ctx context.Context, up *upstreamRef, us session.Upstream, msg *jsonrpc.Message) {
	if !bytes.Contains(msg.Params, []byte(metaRelatedTask)) {
		return
	}
	if p, err := jsonx.ParseValidObject(msg.Params); err == nil && rq.exposeRelated(ctx, up, us, p) {
		msg.Params = p.Bytes()
	}
}

// exposeRelated makes the related-task _meta of params p name the
// gateway's id, or removes it for a task the caller does not hold. It
// reports whether p changed.
func (rq *Request) exposeRelated(ctx context.Context, up *upstreamRef, us session.Upstream, p *jsonx.Object) bool {
	meta, ok := p.Object("_meta")
	if !ok || meta.Get(metaRelatedTask) == nil {
		return false
	}
	var t *session.Task
	if rel, err := jsonx.ParseValidObject(meta.Get(metaRelatedTask)); err == nil {
		upID, _ := rel.GetString("taskId")
		t = rq.findTask(ctx, up, us, upID)
	}
	if t != nil {
		meta.Set(metaRelatedTask, relatedTask(t.ID))
	} else {
		meta.Delete(metaRelatedTask)
	}
	p.Set("_meta", meta.Bytes())
	return true
}

// findTask returns the caller's task that up knows as upID in session us,
// or nil.
func (rq *Request) findTask(ctx context.Context, up *upstreamRef, us session.Upstream, upID string) *session.Task {
	if upID == "" {
		return nil
	}
	t, err := rq.h.tasks.FindTask(ctx, up.cfg.Name, us.SessionID, upID)
	if err != nil || t.Principal != rq.taskPrincipal() {
		return nil
	}
	return t
}

// taskCapabilities adds what the gateway offers of tasks to out: for a
// session client, the 2025-11-25 tasks capability merged from its
// 2025-11-25 upstreams' (cancel and requests.tools.call where one offers
// them; list whenever one offers tasks, as the gateway lists from its own
// store); for a 2026-07-28 client, the extension, when an upstream of
// either revision offers tasks on tools/call.
func (rq *Request) taskCapabilities(ups []*upstreamRef, out map[string]json.RawMessage) {
	var offered, cancel, call bool
	for _, up := range ups {
		caps, err := jsonx.ParseValidObject(rq.caps(up))
		if err != nil {
			continue
		}
		if rq.modern(up) {
			// The extension, offered to 2026-07-28 clients only: a
			// session client's tasks go to 2025-11-25 upstreams.
			if ext, ok := caps.Object("extensions"); ok && ext.Get(taskExtension) != nil && rq.adm.Stateless {
				offered, call = true, true
			}
			continue
		}
		tasks, ok := caps.Object("tasks")
		if !ok {
			continue
		}
		offered = true
		if tasks.Get("cancel") != nil {
			cancel = true
		}
		if reqs, ok := tasks.Object("requests"); ok {
			if tools, ok := reqs.Object("tools"); ok && tools.Get("call") != nil {
				call = true
			}
		}
	}
	if !offered {
		return
	}
	if rq.adm.Stateless {
		if call {
			ext := jsonx.Object{}
			if e, err := jsonx.ParseValidObject(out["extensions"]); err == nil {
				ext = *e
			}
			ext.Set(taskExtension, json.RawMessage(`{}`))
			out["extensions"] = ext.Bytes()
		}
		return
	}
	t := jsonx.Object{}
	t.Set("list", json.RawMessage(`{}`))
	if cancel {
		t.Set("cancel", json.RawMessage(`{}`))
	}
	if call {
		t.Set("requests", json.RawMessage(`{"tools":{"call":{}}}`))
	}
	out["tasks"] = t.Bytes()
}
