// Package tasks keeps the tasks upstreams create and serves the tasks/*
// methods.
//
// An upstream may answer a tools/call with a task instead of a result
// (2025-11-25 basic/utilities/tasks; the 2026-07-28 Tasks extension,
// io.modelcontextprotocol/tasks, SEP-2663), to be polled and fetched
// later. The gateway records each such task in the task store under an id
// of its own ("task-" and 128 random bits) bound to the principal that
// created it, and routes the task's later requests to the upstream, and
// the upstream session, that created it. The client never sees the
// upstream's id; every id it may not use (unknown, expired, another
// principal's or tenant's, of an upstream its tenant may no longer use)
// gets the same -32602 (2025-11-25 tasks, "Security Considerations":
// receivers bind tasks to the authorization context).
//
// Revisions: a session client (2025-11-25) gets tasks of 2025-11-25
// upstreams, and tasks/get, tasks/result, tasks/cancel and tasks/list. A
// 2026-07-28 client gets tasks/get, tasks/update and tasks/cancel (routed
// by Mcp-Name = task id, see protocol.NameKey), against upstreams of
// either revision: a 2026-07-28 upstream's task is passed through, a
// 2025-11-25 upstream's is mapped (see legacy.go).
//
// The package owns the task store's use; the request pipeline reaches it
// through a Tasks value and gives it what it needs of the request as a
// Request.
package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Extension is the Tasks extension's identifier; MetaRelated the _meta key
// naming a message's task.
const (
	Extension   = "io.modelcontextprotocol/tasks"
	MetaRelated = "io.modelcontextprotocol/related-task"
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

// errNotFound is the answer to every task id the caller may not use
// (2025-11-25 tasks, "Protocol Errors").
func errNotFound() error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Failed to retrieve task: Task not found")
}

// errUndeclared is a 2026-07-28 caller's request of the extension
// without declaring it (the extension, "Protocol Errors").
func errUndeclared() error {
	return &protocol.CapabilityError{Capability: "extensions", Sub: Extension}
}

// Tasks serves the tasks of all requests; it is safe for concurrent use.
type Tasks struct {
	store session.TaskStore
	log   *slog.Logger
	id    func() jsonrpc.ID
}

// New returns the Tasks kept in store. id numbers the requests the
// package sends upstreams on its own (not a client's).
func New(store session.TaskStore, log *slog.Logger, id func() jsonrpc.ID) *Tasks {
	return &Tasks{store: store, log: log, id: id}
}

// A Caller is who makes a request, and the settings in force for it.
type Caller struct {
	Principal session.Principal
	// Stateless is set for a 2026-07-28 caller; MetaCaps are then its
	// client capabilities.
	Stateless bool
	MetaCaps  json.RawMessage
	Settings  Settings
}

// Settings are the config's bounds on tasks.
type Settings struct {
	Limits   session.TaskLimits
	MaxTTL   time.Duration // how long a task is kept at most
	PageSize int           // of tasks/list
	// RefreshTime bounds the upstream tasks/get one tasks/list page runs.
	RefreshTime time.Duration
}

// maxRefreshTime bounds the upstream tasks/get of one tasks/list page
// together (and at most half the request's server.request_timeout).
const maxRefreshTime = 10 * time.Second

// SettingsOf returns the settings of config t, for requests that may take
// requestTimeout.
func SettingsOf(t config.Tasks, requestTimeout time.Duration) Settings {
	return Settings{
		Limits:      session.TaskLimits{MaxPerPrincipal: t.MaxPerPrincipal, MaxPerTenant: t.MaxPerTenant, MaxTasks: t.MaxTasks},
		MaxTTL:      t.MaxTTL.D(),
		PageSize:    t.ListPageSize,
		RefreshTime: min(maxRefreshTime, requestTimeout/2),
	}
}

// An Upstream is one upstream, as tasks reach it.
type Upstream struct {
	Name   string
	Prefix string // of its names in the tenant's catalog
	Client *upstream.Client
	// Guard, if not nil, admits each request the package sends on its
	// own (its gate and circuit breaker); done reports how it ended.
	Guard func(ctx context.Context) (done func(error), err error)
}

// A Request is the client request a task method serves, as the package
// needs it.
type Request interface {
	Caller() Caller
	// Upstream returns the upstream named, if the caller's tenant may use
	// it now.
	Upstream(name string) (*Upstream, bool)
	// UseSession makes the request's later calls to the upstream go on
	// session us, the one that holds a task: an upstream's tasks may live
	// in its session (server-everything's do), and another session of the
	// same principal, or a 2026-07-28 request, may ask for it. Should that
	// session have expired, the pipeline opens a new one and the upstream
	// knows the task no more.
	UseSession(upstream string, us session.Upstream)
	// Relay sends method with params to up as the client's request,
	// relaying what the upstream sends before its answer, and returns the
	// answer.
	Relay(ctx context.Context, method string, up *Upstream, params json.RawMessage) (json.RawMessage, error)
	// Lacks reports whether the caller declared no capability for msg, a
	// request of the upstream's.
	Lacks(msg *jsonrpc.Message) bool
	// LimitHit records a refusal by limit (a telemetry.Limit* name).
	LimitHit(ctx context.Context, limit string)
}

// own returns the caller's task gid and its upstream, or errNotFound.
func (ts *Tasks) own(ctx context.Context, rq Request, who Caller, gid string) (*session.Task, *Upstream, error) {
	if len(gid) > maxTaskIDLen || !strings.HasPrefix(gid, "task-") {
		return nil, nil, errNotFound()
	}
	t, err := ts.store.GetTask(ctx, gid)
	if errors.Is(err, session.ErrNotFound) {
		return nil, nil, errNotFound()
	}
	if err != nil {
		return nil, nil, err
	}
	if t.Principal != who.Principal {
		return nil, nil, errNotFound()
	}
	up, ok := rq.Upstream(t.Upstream)
	if !ok {
		return nil, nil, errNotFound()
	}
	return t, up, nil
}

// created finds the task in a CreateTaskResult: {"task": Task} from a
// 2025-11-25 upstream, {"resultType": "task", ...Task} from a 2026-07-28
// one. ok is false for any other result.
func created(o *jsonx.Object) (task *jsonx.Object, modern, ok bool) {
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

// MayBeCreated reports whether a tools/call result may be a task: when
// not, Created need not be asked.
func MayBeCreated(res json.RawMessage) bool {
	return bytes.Contains(res, []byte(`"taskId"`))
}

// Created is the tools/call rewrite of a result that is a task, from up
// on session us: it records the task and returns the result with the
// gateway's id. ok is false for a result that is no task.
func (ts *Tasks) Created(ctx context.Context, rq Request, up *Upstream, us session.Upstream, res json.RawMessage) (json.RawMessage, bool, error) {
	if !MayBeCreated(res) {
		return nil, false, nil // the common case: no parse
	}
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return nil, false, nil
	}
	task, modern, ok := created(o)
	if !ok {
		return nil, false, nil
	}
	who := rq.Caller()
	upID, _ := task.GetString("taskId")
	if len(upID) > maxUpstreamTaskIDLen {
		ts.log.Warn("upstream task id too long", "upstream", up.Name, "bytes", len(upID))
		ts.cancelUnrecorded(ctx, up, us, upID)
		return nil, true, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %s answered with a task id longer than %d bytes", up.Name, maxUpstreamTaskIDLen)
	}
	us.Capabilities = nil
	now := time.Now()
	ttl := ttlOf(task, modern, who.Settings.MaxTTL)
	t := &session.Task{
		ID: session.NewTaskID(), Principal: who.Principal, Upstream: up.Name, Session: us,
		UpstreamTaskID: upID, Created: now, Expires: now.Add(ttl),
	}
	if err := ts.store.CreateTask(ctx, t, who.Settings.Limits); err != nil {
		// The upstream runs a task no one could reach: end it.
		ts.cancelUnrecorded(ctx, up, us, upID)
		var le *session.LimitError
		if errors.As(err, &le) {
			rq.LimitHit(ctx, limitName(le.Limit))
			return nil, true, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
				"Too Many Requests: task limit %s (%d) reached; the upstream's task was cancelled", le.Limit, le.Max)
		}
		return nil, true, err
	}
	expose(task, t, modern, who.Settings.MaxTTL)
	if !modern {
		o.Set("task", task.Bytes())
	}
	if who.Stateless && !modern {
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

// ttlOf is how long the gateway keeps a task: its ttl, bounded by maxTTL
// (an unlimited ttl is the bound).
func ttlOf(task *jsonx.Object, modern bool, maxTTL time.Duration) time.Duration {
	key := "ttl"
	if modern {
		key = "ttlMs"
	}
	if ms, err := strconv.ParseFloat(string(task.Get(key)), 64); err == nil && ms > 0 && ms < float64(maxTTL.Milliseconds()) {
		return time.Duration(ms) * time.Millisecond
	}
	return maxTTL
}

// expose puts the gateway's id and ttl in a task object of the
// upstream's (a Task, a CreateTaskResult's, a DetailedTask): a ttl longer
// than the gateway keeps the task is announced as the gateway's
// (2025-11-25 tasks, "TTL and Resource Management": receivers MAY
// override the requested ttl, and MUST say the actual one).
func expose(task *jsonx.Object, t *session.Task, modern bool, maxTTL time.Duration) {
	task.SetString("taskId", t.ID)
	key := "ttl"
	if modern {
		key = "ttlMs"
	}
	if ttlOf(task, modern, maxTTL) == maxTTL {
		task.Set(key, []byte(strconv.FormatInt(maxTTL.Milliseconds(), 10)))
	}
}

// call sends method on session us of up as a request of the gateway's
// own and returns its result.
func (ts *Tasks) call(ctx context.Context, up *Upstream, us session.Upstream, method string, params json.RawMessage) (json.RawMessage, error) {
	resp, err := up.Client.Call(ctx, us, ts.id(), method, params)
	if err != nil {
		return nil, err
	}
	defer resp.Close()
	return resp.Result()
}

// cancelUnrecorded cancels an upstream's task the gateway could not
// record, bounded in time whatever happens to ctx.
func (ts *Tasks) cancelUnrecorded(ctx context.Context, up *Upstream, us session.Upstream, upID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = ts.call(ctx, up, us, protocol.MethodTasksCancel, taskIDParams(upID))
}

func taskIDParams(id string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"taskId": id})
	return b
}

func limitName(limit string) string {
	switch limit {
	case session.LimitTasksPerPrincipal:
		return telemetry.LimitTasksPrincipal
	case session.LimitTasksPerTenant:
		return telemetry.LimitTasksTenant
	}
	return telemetry.LimitTasks
}

// Serve serves tasks/get, tasks/result and tasks/cancel of a session
// client, and tasks/get, tasks/update and tasks/cancel of a 2026-07-28
// one; p are the request's params and gid the task id they name. It
// returns the name of the task's upstream once known.
func (ts *Tasks) Serve(ctx context.Context, rq Request, method string, p *jsonx.Object, gid string) (string, json.RawMessage, error) {
	who := rq.Caller()
	if who.Stateless && !Declares(who.MetaCaps) {
		return "", nil, errUndeclared()
	}
	t, up, err := ts.own(ctx, rq, who, gid)
	if err != nil {
		return "", nil, err
	}
	rq.UseSession(t.Upstream, t.Session)
	p.SetString("taskId", t.UpstreamTaskID)
	modernUp := upstream.IsModern(t.Session)
	switch {
	case who.Stateless && !modernUp:
		res, err := ts.legacy(ctx, rq, who, method, up, t, p)
		return t.Upstream, res, ts.taskError(ctx, err, t, method)
	case !who.Stateless && modernUp:
		// Not made for a session client (see Capabilities).
		return t.Upstream, nil, errNotFound()
	}
	res, err := rq.Relay(ctx, method, up, p.Bytes())
	if err != nil {
		return t.Upstream, nil, ts.taskError(ctx, err, t, method)
	}
	return t.Upstream, exposeResult(method, res, t, up, modernUp, who.Settings.MaxTTL), nil
}

// exposeResult rewrites an upstream's answer to a tasks/* request: the
// task's id and ttl, and in a tool's result the resource URIs and the
// related-task _meta, as for a call.
func exposeResult(method string, res json.RawMessage, t *session.Task, up *Upstream, modern bool, maxTTL time.Duration) json.RawMessage {
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return res
	}
	switch {
	case method == protocol.MethodTasksResult:
		return exposeCallResult(o, t, up.Prefix, true)
	case o.Get("taskId") != nil:
		expose(o, t, modern, maxTTL)
		if r, ok := o.Object("result"); ok {
			o.Set("result", exposeCallResult(r, t, up.Prefix, false))
		}
	}
	return o.Bytes()
}

// exposeCallResult is a task's CallToolResult as the client sees it: its
// resource URIs exposed (prefix is its upstream's) and its related-task
// _meta naming the gateway's id (2025-11-25 tasks, "Related Task
// Metadata": tasks/result MUST carry it), or none (the extension's result
// inside a task names no task).
func exposeCallResult(o *jsonx.Object, t *session.Task, prefix string, related bool) json.RawMessage {
	if meta, ok := o.Object("_meta"); ok && meta.Get(MetaRelated) != nil {
		if related {
			meta.Set(MetaRelated, taskIDParams(t.ID))
		} else {
			meta.Delete(MetaRelated)
		}
		if len(meta.Members) == 0 {
			o.Delete("_meta")
		} else {
			o.Set("_meta", meta.Bytes())
		}
	}
	return catalog.ExposeToolResult(o.Bytes(), prefix)
}

// taskError shapes an upstream's error about a task: its text and data
// name the gateway's id, never the upstream's. A tasks/get the upstream
// answers -32602 means it forgot the task: so does the gateway.
func (ts *Tasks) taskError(ctx context.Context, err error, t *session.Task, method string) error {
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
	if method == protocol.MethodTasksGet && e.Code == jsonrpc.CodeInvalidParams {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = ts.store.DeleteTask(dctx, t.ID)
		return errNotFound()
	}
	return &e
}

// Note rewrites a notification upstream sent in a call on its session
// us: a notifications/tasks/status names the gateway's id (and is
// dropped, nil, for a task the caller does not hold), and a related-task
// _meta names the gateway's id or is removed.
func (ts *Tasks) Note(ctx context.Context, who Caller, upstream string, us session.Upstream, msg *jsonrpc.Message, raw []byte) []byte {
	status := msg.Method == protocol.NotifyTaskStatus
	if !status && !bytes.Contains(raw, []byte(MetaRelated)) {
		return raw
	}
	p, err := jsonx.ParseValidObject(msg.Params)
	if err != nil {
		return raw
	}
	if status {
		if who.Stateless {
			return nil // no such notification in 2026-07-28 (the extension's is notifications/tasks)
		}
		upID, _ := p.GetString("taskId")
		t := ts.find(ctx, who, upstream, us, upID)
		if t == nil {
			return nil
		}
		expose(p, t, false, who.Settings.MaxTTL)
		p.Delete("_meta") // SHOULD NOT carry related-task (tasks, "Task Notifications")
		return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, msg.Method, p.Bytes())
	}
	if !ts.exposeRelated(ctx, who, upstream, us, p) {
		return raw
	}
	return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, msg.Method, p.Bytes())
}

// UpstreamRequest rewrites the related-task _meta of a request upstream
// sent in a call on its session us (an elicitation a task waits on,
// 2025-11-25 tasks, "Input Required Status"), before it is relayed.
func (ts *Tasks) UpstreamRequest(ctx context.Context, who Caller, upstream string, us session.Upstream, msg *jsonrpc.Message) {
	if !bytes.Contains(msg.Params, []byte(MetaRelated)) {
		return
	}
	if p, err := jsonx.ParseValidObject(msg.Params); err == nil && ts.exposeRelated(ctx, who, upstream, us, p) {
		msg.Params = p.Bytes()
	}
}

// exposeRelated makes the related-task _meta of params p name the
// gateway's id, or removes it for a task the caller does not hold. It
// reports whether p changed.
func (ts *Tasks) exposeRelated(ctx context.Context, who Caller, upstream string, us session.Upstream, p *jsonx.Object) bool {
	meta, ok := p.Object("_meta")
	if !ok || meta.Get(MetaRelated) == nil {
		return false
	}
	var t *session.Task
	if rel, err := jsonx.ParseValidObject(meta.Get(MetaRelated)); err == nil {
		upID, _ := rel.GetString("taskId")
		t = ts.find(ctx, who, upstream, us, upID)
	}
	if t != nil {
		meta.Set(MetaRelated, taskIDParams(t.ID))
	} else {
		meta.Delete(MetaRelated)
	}
	p.Set("_meta", meta.Bytes())
	return true
}

// find returns the caller's task that upstream knows as upID in session
// us, or nil.
func (ts *Tasks) find(ctx context.Context, who Caller, upstream string, us session.Upstream, upID string) *session.Task {
	if upID == "" {
		return nil
	}
	t, err := ts.store.FindTask(ctx, upstream, us.SessionID, upID)
	if err != nil || t.Principal != who.Principal {
		return nil
	}
	return t
}

// An Offer is what one upstream offers: its capabilities as last seen,
// and whether it speaks the 2026-07-28 revision.
type Offer struct {
	Caps   json.RawMessage
	Modern bool
}

// Capabilities adds what the gateway offers of tasks to out, given what
// the tenant's upstreams offer: for a session client, the 2025-11-25 tasks
// capability merged from its 2025-11-25 upstreams' (cancel and
// requests.tools.call where one offers them; list whenever one offers
// tasks, as the gateway lists from its own store); for a 2026-07-28
// client (stateless), the extension, when an upstream of either revision
// offers tasks on tools/call.
func Capabilities(stateless bool, offers []Offer, out map[string]json.RawMessage) {
	var offered, cancel, call bool
	for _, of := range offers {
		caps, err := jsonx.ParseValidObject(of.Caps)
		if err != nil {
			continue
		}
		if of.Modern {
			// The extension, offered to 2026-07-28 clients only: a
			// session client's tasks go to 2025-11-25 upstreams.
			if ext, ok := caps.Object("extensions"); ok && ext.Get(Extension) != nil && stateless {
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
	if stateless {
		if call {
			ext := jsonx.Object{}
			if e, err := jsonx.ParseValidObject(out["extensions"]); err == nil {
				ext = *e
			}
			ext.Set(Extension, json.RawMessage(`{}`))
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

// Declares reports whether a 2026-07-28 request's client capabilities
// (caps) declare the Tasks extension.
func Declares(caps json.RawMessage) bool {
	c, err := jsonx.ParseValidObject(caps)
	if err != nil {
		return false
	}
	ext, ok := c.Object("extensions")
	return ok && ext.Get(Extension) != nil && string(ext.Get(Extension)) != "null"
}

// ListenError is the error of a 2026-07-28 caller's subscriptions/listen
// that asks for task notifications without declaring the extension,
// which defines them (-32021, as for any of the extension's requests);
// nil when it declared it.
func ListenError(caps json.RawMessage) *protocol.CapabilityError {
	if Declares(caps) {
		return nil
	}
	return &protocol.CapabilityError{Capability: "extensions", Sub: Extension}
}
