package dispatch

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// taskRefreshes bounds the upstream tasks/get one tasks/list page runs at
// once, and maxRefreshTime how long they take together (at most half the
// request's server.request_timeout): a page is never held up by a slow
// upstream for longer.
const (
	taskRefreshes  = 8
	maxRefreshTime = 10 * time.Second
)

// listTasks serves tasks/list from the task store: the caller's tasks, a
// page of at most sessions.tasks.list_page_size, each refreshed with its
// upstream's tasks/get (one the upstream forgot is forgotten and left
// out; one whose upstream fails, or does not answer in time, is left out
// of this page).
func listTasks(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
	var cur session.TaskCursor
	if len(c.params) > 0 {
		p, err := jsonx.ParseValidObject(c.params)
		if err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: must be an object")
		}
		if s, ok := p.GetString("cursor"); ok {
			if cur, ok = decodeTaskCursor(s); !ok {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: invalid cursor")
			}
		}
	}
	page, more, err := rq.h.tasks.ListTasks(ctx, rq.taskPrincipal(), cur, rq.st.cfg.Sessions.Tasks.ListPageSize)
	if err != nil {
		return nil, err
	}
	tasks := make([]json.RawMessage, len(page))
	rctx, cancel := context.WithTimeout(ctx, min(maxRefreshTime, rq.st.cfg.Server.RequestTimeout.D()/2))
	defer cancel()
	sem := make(chan struct{}, taskRefreshes)
	var wg sync.WaitGroup
	for i, t := range page {
		up := rq.st.byName[t.Upstream]
		if up == nil || !slices.Contains(rq.view.Upstreams, t.Upstream) || upstream.IsModern(t.Session) {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			tasks[i] = rq.refreshTask(rctx, up, t)
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
		b, _ := json.Marshal(encodeTaskCursor(session.After(page[len(page)-1])))
		out.Set("nextCursor", b)
	}
	return out.Bytes(), nil
}

// refreshTask returns the task as its upstream has it now, or nil.
func (rq *Request) refreshTask(ctx context.Context, up *upstreamRef, t *session.Task) json.RawMessage {
	done, err := rq.guard(ctx, up)
	if err != nil {
		return nil
	}
	params, _ := json.Marshal(map[string]string{"taskId": t.UpstreamTaskID})
	var res json.RawMessage
	resp, err := up.client.Call(ctx, t.Session, rq.h.internalID(), "tasks/get", params)
	if err == nil {
		res, err = resultOf(resp.Next, nil)
		resp.Close()
	}
	done(err)
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams {
		_ = rq.h.tasks.DeleteTask(context.WithoutCancel(ctx), t.ID)
		return nil
	}
	if err != nil {
		return nil
	}
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return nil
	}
	rq.exposeTask(o, t, false)
	return o.Bytes()
}

// A tasks/list cursor is the position after a page's last task, opaque to
// the client.
func encodeTaskCursor(c session.TaskCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.Expires, 10) + "." + c.ID))
}

func decodeTaskCursor(s string) (session.TaskCursor, bool) {
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
