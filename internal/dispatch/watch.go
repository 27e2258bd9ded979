package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Watching upstreams.
//
// An upstream says its lists changed with a list_changed notification, but
// it sends it where it sends what belongs to no request: the GET stream of
// a 2025-11-25 session, or a 2026-07-28 subscriptions/listen stream. The
// gateway's client sessions do not hold those open upstream (that would be
// one connection per client and upstream), so each replica keeps one per
// watched upstream, on a session of its own: a notification invalidates
// the catalog, which tells the clients' streams (see upstreamListChanged).
// A stream that breaks is opened again with backoff, and the catalog
// invalidated then, since a change may have been missed; an upstream that
// offers no stream, or whose capabilities announce no list changes, is not
// watched.

// A backoff spaces the attempts of a loop that keeps an upstream stream
// open (a watch, a client session's relay, a 2026-07-28 subscription):
// from a second, doubling up to a minute, and from a second again after
// an attempt that lasted longer than that (it worked for a while). Its
// zero value is ready to use.
type backoff struct{ next time.Duration }

const (
	minBackoff = time.Second
	maxBackoff = time.Minute
)

// wait waits before the next attempt, the last having begun at start. It
// reports false, at once, when ctx ends.
func (b *backoff) wait(ctx context.Context, start time.Time) bool {
	if b.next == 0 || time.Since(start) > maxBackoff {
		b.next = minBackoff
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(b.next):
	}
	b.next = min(2*b.next, maxBackoff)
	return true
}

// watcher is the watch of one upstreamRef.
type watcher struct {
	stop context.CancelFunc
	done chan struct{}
}

// watchers tracks the running watches, by upstreamRef, and those stopped
// but maybe not yet returned, so that Close can wait for every one.
type watchers struct {
	mu      sync.Mutex
	m       map[*upstreamRef]*watcher
	stopped []*watcher
	closed  bool // by stopWatches: no watch starts again
}

// syncWatches starts a watch for each upstream of st that wants one and
// has none, and stops those of upstreams st no longer has.
func (h *Server) syncWatches(st *State) {
	h.watch.mu.Lock()
	defer h.watch.mu.Unlock()
	if h.watch.closed {
		return
	}
	if h.watch.m == nil {
		h.watch.m = make(map[*upstreamRef]*watcher)
	}
	keep := make(map[*upstreamRef]bool, len(st.upstreams))
	for _, up := range st.upstreams {
		if !up.cfg.Watches() || up.creds != nil && up.creds.NeedsCaller(&credentials.Caller{}) {
			// An upstream reached as each caller has no stream of the
			// gateway's own: its lists go by the TTL.
			continue
		}
		keep[up] = true
		if h.watch.m[up] != nil {
			continue
		}
		ctx, stop := context.WithCancel(context.Background())
		w := &watcher{stop: stop, done: make(chan struct{})}
		h.watch.m[up] = w
		go func() {
			defer close(w.done)
			h.watchUpstream(ctx, up)
		}()
	}
	// Forget the stopped watches that have returned, so the list stays
	// as short as the watches a reload just stopped.
	h.watch.stopped = slices.DeleteFunc(h.watch.stopped, func(w *watcher) bool {
		select {
		case <-w.done:
			return true
		default:
			return false
		}
	})
	for up, w := range h.watch.m {
		if !keep[up] {
			w.stop()
			delete(h.watch.m, up)
			h.watch.stopped = append(h.watch.stopped, w)
		}
	}
}

// stopWatches stops every watch, including those a reload stopped, and
// waits for them to end. No watch starts after it.
func (h *Server) stopWatches() {
	h.watch.mu.Lock()
	ws := h.watch.stopped
	for _, w := range h.watch.m {
		ws = append(ws, w)
	}
	h.watch.m, h.watch.stopped, h.watch.closed = nil, nil, true
	h.watch.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
	for _, w := range ws {
		<-w.done
	}
}

// watchUpstream keeps up's notification stream open until ctx ends.
func (h *Server) watchUpstream(ctx context.Context, up *upstreamRef) {
	log := h.log.With("upstream", up.cfg.Name)
	var b backoff
	connected := false // a stream was open before: changes may have been missed since
	for ctx.Err() == nil {
		start := time.Now()
		err := h.watchOnce(ctx, up, connected, func() { connected = true })
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, upstream.ErrNoStream), errors.Is(err, errNothingToWatch):
			log.Debug("upstream not watched", "reason", err)
			return
		case err != nil:
			log.Debug("upstream watch ended", "error", err)
		}
		if !b.wait(ctx, start) {
			return
		}
	}
}

var errNothingToWatch = errors.New("its capabilities announce no list changes")

// watchOnce opens a session and a stream with up and reads the stream until
// it ends. onOpen is called once the stream is open.
func (h *Server) watchOnce(ctx context.Context, up *upstreamRef, missed bool, onOpen func()) error {
	res, err := up.client.OpenAs(ctx, noCaps)
	if err != nil {
		return err
	}
	us := res.Session
	defer func() {
		if us.SessionID != "" {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = up.client.Terminate(ctx, us)
		}
	}()
	h.rememberCaps(up.cfg.Name, us.Capabilities)
	h.rememberInstructions(up.cfg.Name, res.Instructions)
	if !announcesListChanges(us.Capabilities) {
		return errNothingToWatch
	}
	st, err := up.client.Watch(ctx, us)
	if err != nil {
		return err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	if missed {
		had, partitioned := h.catalog.Stale(up.cfg.Name, catalog.Tools, catalog.Prompts, catalog.Resources, catalog.Templates)
		h.refresh(ctx, up, us, had, partitioned)
	}
	onOpen()
	for {
		msg, _, err := st.Next()
		if err != nil {
			return err
		}
		switch msg.Kind {
		case jsonrpc.KindNotification:
			had, partitioned := h.observe(up, msg)
			h.refresh(ctx, up, us, had, partitioned)
		case jsonrpc.KindRequest:
			// Nobody to ask on this session: ping is answered, the rest
			// refused.
			var result json.RawMessage
			var rerr *jsonrpc.Error
			if msg.Method == "ping" {
				result = json.RawMessage(`{}`)
			} else {
				rerr = jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s", msg.Method)
			}
			_ = up.client.Reply(ctx, us, msg.ID, result, rerr)
		}
	}
}

// announcesListChanges reports whether server capabilities announce
// listChanged for tools, prompts or resources.
func announcesListChanges(caps json.RawMessage) bool {
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

// refresh fetches again the listings of kinds had that the catalog holds
// for up, on the watch's session, so that the catalog tells the clients
// whose view changed (catalog.onChange) and has the new lists ready. The
// listings of partitioned kinds were fetched on sessions announced other
// capabilities, or with other credentials, than the watch's: it cannot
// fetch them as they were, so it tells the clients at once, and each
// listing is fetched again when next used.
func (h *Server) refresh(ctx context.Context, up *upstreamRef, us session.Upstream, had, partitioned []catalog.Kind) {
	for _, k := range partitioned {
		h.upstreamListChanged(up.cfg.Name, k)
	}
	for _, k := range had {
		if slices.Contains(partitioned, k) {
			continue // told already
		}
		_, err := h.catalog.Get(ctx, &up.cat, k, catalog.Scope{}, func(ctx context.Context, b catalog.Bounds) ([]json.RawMessage, bool, error) {
			return listOn(ctx, up.client, us, k, "watch", b)
		})
		if err != nil {
			h.log.Debug("refreshing a changed list", "upstream", up.cfg.Name, "list", k.Info().ListMethod, "error", err)
		}
	}
}
