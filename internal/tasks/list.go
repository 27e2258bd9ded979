package tasks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// refreshes bounds the upstream tasks/get one tasks/list page runs at
// once: a page is never held up by a slow upstream for longer than
// Settings.RefreshTime.
const refreshes = 8

// List serves tasks/list (params) from the task store: the caller's
// tasks, a page of at most Settings.PageSize, each refreshed with its
// upstream's tasks/get (one the upstream forgot is forgotten and left out;
// one whose upstream fails, or does not answer in time, is left out of
// this page).
func (ts *Tasks) List(ctx context.Context, rq Request, params json.RawMessage) (json.RawMessage, error) {
	var cur session.TaskCursor
	if len(params) > 0 {
		p, err := jsonx.ParseValidObject(params)
		if err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: must be an object")
		}
		if s, ok := p.GetString("cursor"); ok {
			if cur, ok = decodeCursor(s); !ok {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: invalid cursor")
			}
		}
	}
	who := rq.Caller()
	page, more, err := ts.store.ListTasks(ctx, who.Principal, cur, who.Settings.PageSize)
	if err != nil {
		return nil, err
	}
	tasks := make([]json.RawMessage, len(page))
	rctx, cancel := context.WithTimeout(ctx, who.Settings.RefreshTime)
	defer cancel()
	sem := make(chan struct{}, refreshes)
	var wg sync.WaitGroup
	for i, t := range page {
		up, ok := rq.Upstream(t.Upstream)
		if !ok || upstream.IsModern(t.Session) {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			tasks[i] = ts.refresh(rctx, who, up, t)
		})
	}
	wg.Wait()
	kept := tasks[:0]
	for _, t := range tasks {
		if t != nil {
			kept = append(kept, t)
		}
	}
	out := jsonx.Object{}
	out.Set("tasks", jsonx.AppendArray(nil, kept))
	if more && len(page) > 0 {
		b, _ := json.Marshal(encodeCursor(session.After(page[len(page)-1])))
		out.Set("nextCursor", b)
	}
	return out.Bytes(), nil
}

// refresh returns the task as its upstream has it now, or nil.
func (ts *Tasks) refresh(ctx context.Context, who Caller, up *Upstream, t *session.Task) json.RawMessage {
	done := func(error) {}
	if up.Guard != nil {
		var err error
		if done, err = up.Guard(ctx); err != nil {
			return nil
		}
	}
	res, err := ts.call(ctx, up, t.Session, protocol.MethodTasksGet, taskIDParams(t.UpstreamTaskID))
	done(err)
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams {
		_ = ts.store.DeleteTask(context.WithoutCancel(ctx), t.ID)
		return nil
	}
	if err != nil {
		return nil
	}
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return nil
	}
	expose(o, t, false, who.Settings.MaxTTL)
	return o.Bytes()
}

// A tasks/list cursor is the position after a page's last task, opaque to
// the client.
func encodeCursor(c session.TaskCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.Expires, 10) + "." + c.ID))
}

func decodeCursor(s string) (session.TaskCursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 128 {
		return session.TaskCursor{}, false
	}
	ms, id, ok := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || !strings.HasPrefix(id, "task-") {
		return session.TaskCursor{}, false
	}
	return session.TaskCursor{Expires: n, ID: id}, true
}
