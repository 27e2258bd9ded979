// Package watch keeps, on each replica, one notification stream open per
// watched upstream, so that the gateway hears of its list changes.
//
// An upstream says its lists changed with a list_changed notification, but
// it sends it where it sends what belongs to no request: the GET stream of
// a 2025-11-25 session, or a 2026-07-28 subscriptions/listen stream. The
// gateway's client sessions do not hold those open upstream (that would be
// one connection per client and upstream), so each replica keeps one per
// watched upstream, on a session of its own, and hands what it hears to
// its Hooks (which invalidate the catalog, which tells the clients'
// streams). A stream that breaks is opened again with backoff, and the
// hooks told that a change may have been missed; an upstream that offers
// no stream, or whose capabilities announce no list changes, is not
// watched.
//
// Watches owns its goroutines: one per watched upstream, stopped when a
// Sync no longer names it, all stopped and waited for by Close.
package watch

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Hooks are told what the watches hear. They are called from the watch's
// goroutine, one call at a time per upstream.
type Hooks[U any] interface {
	// Opened gives the result of the watch session's initialize: the
	// upstream's capabilities and instructions as last seen.
	Opened(up U, res *upstream.InitResult)
	// Notified gives a notification of the upstream's stream, which is on
	// session us.
	Notified(ctx context.Context, up U, us session.Upstream, msg *jsonrpc.Message)
	// Missed says the stream opened again after a break, on session us:
	// changes may have been missed since.
	Missed(ctx context.Context, up U, us session.Upstream)
}

// Watches are the watches of one replica. U is the caller's handle of an
// upstream: a new handle (after a reload changed the upstream) is a new
// watch.
type Watches[U comparable] struct {
	client func(U) *upstream.Client
	hooks  Hooks[U]
	log    *slog.Logger

	mu      sync.Mutex
	m       map[U]*watcher
	stopped []*watcher // stopped but maybe not yet returned, for Close
	closed  bool       // by Close: no watch starts again
}

// watcher is the watch of one upstream.
type watcher struct {
	stop context.CancelFunc
	done chan struct{}
}

// New returns Watches that reach each upstream with client(up) and tell
// hooks what they hear.
func New[U comparable](log *slog.Logger, client func(U) *upstream.Client, hooks Hooks[U]) *Watches[U] {
	return &Watches[U]{client: client, hooks: hooks, log: log, m: make(map[U]*watcher)}
}

// Sync starts a watch for each of ups that has none, and stops those of
// upstreams ups no longer names.
func (w *Watches[U]) Sync(ups []U) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	keep := make(map[U]bool, len(ups))
	for _, up := range ups {
		keep[up] = true
		if w.m[up] != nil {
			continue
		}
		ctx, stop := context.WithCancel(context.Background())
		wt := &watcher{stop: stop, done: make(chan struct{})}
		w.m[up] = wt
		go func() {
			defer close(wt.done)
			w.watch(ctx, up)
		}()
	}
	// Forget the stopped watches that have returned, so the list stays
	// as short as the watches a reload just stopped.
	w.stopped = slices.DeleteFunc(w.stopped, func(wt *watcher) bool {
		select {
		case <-wt.done:
			return true
		default:
			return false
		}
	})
	for up, wt := range w.m {
		if !keep[up] {
			wt.stop()
			delete(w.m, up)
			w.stopped = append(w.stopped, wt)
		}
	}
}

// Close stops every watch, including those a Sync stopped, and waits for
// them to end. No watch starts after it.
func (w *Watches[U]) Close() {
	w.mu.Lock()
	ws := w.stopped
	for _, wt := range w.m {
		ws = append(ws, wt)
	}
	w.m, w.stopped, w.closed = nil, nil, true
	w.mu.Unlock()
	for _, wt := range ws {
		wt.stop()
	}
	for _, wt := range ws {
		<-wt.done
	}
}

// watch keeps up's notification stream open until ctx ends.
func (w *Watches[U]) watch(ctx context.Context, up U) {
	c := w.client(up)
	log := w.log.With("upstream", c.Name())
	var b upstream.Backoff
	connected := false // a stream was open before: changes may have been missed since
	for ctx.Err() == nil {
		start := time.Now()
		err := w.once(ctx, up, c, connected, func() { connected = true })
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, upstream.ErrNoStream), errors.Is(err, errNothingToWatch):
			log.Debug("upstream not watched", "reason", err)
			return
		case err != nil:
			log.Debug("upstream watch ended", "error", err)
		}
		if !b.Wait(ctx, start) {
			return
		}
	}
}

var errNothingToWatch = errors.New("its capabilities announce no list changes")

// noCaps are the client capabilities of a watch's session: it can answer
// no request of the upstream's.
var noCaps = json.RawMessage(`{}`)

// once opens a session and a stream with up and reads the stream until it
// ends. onOpen is called once the stream is open.
func (w *Watches[U]) once(ctx context.Context, up U, c *upstream.Client, missed bool, onOpen func()) error {
	res, err := c.OpenAs(ctx, noCaps)
	if err != nil {
		return err
	}
	us := res.Session
	defer func() {
		if us.SessionID != "" {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = c.Terminate(ctx, us)
		}
	}()
	w.hooks.Opened(up, res)
	if !AnnouncesListChanges(us.Capabilities) {
		return errNothingToWatch
	}
	st, err := c.Watch(ctx, us)
	if err != nil {
		return err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	if missed {
		w.hooks.Missed(ctx, up, us)
	}
	onOpen()
	for {
		msg, _, err := st.Next()
		if err != nil {
			return err
		}
		switch msg.Kind {
		case jsonrpc.KindNotification:
			w.hooks.Notified(ctx, up, us, msg)
		case jsonrpc.KindRequest:
			// Nobody to ask on this session: ping is answered, the rest
			// refused.
			var result json.RawMessage
			var rerr *jsonrpc.Error
			if msg.Method == protocol.MethodPing {
				result = json.RawMessage(`{}`)
			} else {
				rerr = jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s", msg.Method)
			}
			_ = c.Reply(ctx, us, msg.ID, result, rerr)
		}
	}
}

// AnnouncesListChanges reports whether server capabilities announce
// listChanged for tools, prompts or resources.
func AnnouncesListChanges(caps json.RawMessage) bool {
	o, err := jsonx.ParseValidObject(caps)
	if err != nil {
		return false
	}
	for _, c := range []string{"tools", "prompts", "resources"} {
		if v := o.Get(c); v != nil {
			if co, err := jsonx.ParseValidObject(v); err == nil && string(co.Get("listChanged")) == "true" {
				return true
			}
		}
	}
	return false
}
