package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/gateway/internal/bridge"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/share"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Messages outside a request.
//
// An upstream sends what belongs to no request of its client (log
// messages, notifications/resources/updated, list_changed, and requests
// such as roots/list) on its session's GET stream (2025-11-25
// basic/transports, "Listening for Messages from the Server"). A client
// session's upstream sessions are its own, so those messages are its
// client's: the replica that holds the client's GET stream opens, for
// that stream's life, the GET streams of the session's upstream sessions
// that have something to say to it, and relays what arrives straight to
// the client's stream. Nothing an upstream says crosses replicas.
//
// An upstream session has something to say when
//
//   - the client subscribed to one of its resources, or set a log level
//     it was sent: both are recorded in the session record
//     (session.Upstream.Listen), so that the replica holding the GET
//     stream knows of a POST served elsewhere, which wakes it up over the
//     session bus; or
//   - the client declared roots: any upstream may then ask for them, so
//     every upstream session of the session is heard (but a stdio one,
//     whose process would then never go idle: its roots/list outside a
//     call is not relayed).
//
// A session that needs none costs no upstream stream: the 10k client
// streams of issue 7 stay idle connections.
//
// What an upstream stream carries:
//
//   - notifications/message: passed through (the upstream filters by the
//     level the client set);
//   - notifications/resources/updated: its uri rewritten into the
//     gateway's namespace; it reaches only this session, and only if the
//     session subscribed to the resource (or to one it is a sub-resource
//     of) on this upstream session (subscriptions.go) and the tenant's
//     rules in force let it see the resource (exposeUpdated, the check a
//     subscription makes);
//   - list_changed: dropped for an upstream the gateway watches (its
//     watch tells every session, see watch.go); for one it does not (an
//     upstream reached as each caller, or with watch off), the catalog's
//     listings are marked stale and the client told;
//   - anything else (progress or cancellation of no request, unknown
//     notifications): dropped;
//   - ping: answered by the gateway; roots/list, sampling/createMessage,
//     elicitation/create: forwarded to the client under an id naming the
//     upstream (the bridge's, so the answer, POSTed to any replica, goes
//     back on the session's upstream session with no state kept), if the
//     client declared the capability; refused with -32601 at once
//     otherwise (the bridge's UpstreamRequest).
//
// The session bus carries the rest to the replica holding the stream: a
// wake-up when a POST on any replica set Listen, and messages the gateway
// itself sends a session (see NotifySession). A message for a session
// whose GET stream is open nowhere is dropped.
//
// Bounds: a stream's queue holds listenQueue messages, from its upstream
// streams and the bus alike; past it a notification is dropped and a
// request refused to its upstream at once (-32603), both counted
// (stream_queue; bus_queue for what the bus drops). A session opens at
// most one upstream stream per upstream of its tenant, a replica at most
// limits.upstream_streams, of which a principal and a tenant hold at most
// their share (listenSlots); past that no new one opens until one closes
// (counted under the limit reached; the pool's logged once). The bus bounds its
// message size (session.BusOptions); the upstream client bounds each
// message it reads. A stream that needs no upstream stream costs its
// queue and a bus subscription, and no goroutine.
//
// Only upstream sessions of the 2025-11-25 revision (and older) have a
// GET stream. A 2026-07-28 upstream has no resources/subscribe: the
// resources a session subscribed to there are kept in its record, and
// the replica holding the GET stream opens the upstream's
// subscriptions/listen for them (listenModern), again whenever they
// change; nothing else of such an upstream is heard there. An upstream session that is re-initialized (the
// upstream forgot it: 404) loses what the client subscribed to there, as
// the upstream does: its new entry in the record has no Listen and no
// subscriptions, and the client must subscribe again.

const (
	// listenQueue bounds the messages waiting for a client's GET stream
	// to take them.
	listenQueue = 16
	// missInterval spaces the session record reads of updates that
	// belong to no subscription the listener knows of (listener.holds).
	missInterval = 100 * time.Millisecond
	// noStreamFor is how long an upstream that offers no GET stream (405)
	// is not asked again, by any session.
	noStreamFor = 10 * time.Minute
)

// listenWake is the bus message that tells a GET stream to read its
// session record again; the gateway's own messages are JSON objects.
var listenWake = []byte("wake")

// errStreamFull is a message a client's GET stream had no room for.
var errStreamFull = errors.New("the client's stream is not taking messages")

// errReplaced ends an upstream stream whose upstream a reload replaced or
// took from the tenant.
var errReplaced = errors.New("the upstream was reconfigured")

// listenSlots counts the upstream streams open on this replica, for
// client sessions' GET streams and 2026-07-28 subscriptions alike: at most
// limits.upstream_streams in all, of which one principal holds at most
// limits.upstream_streams_per_principal and one tenant at most
// limits.upstream_streams_per_tenant. A stream past any of them is not
// opened; no open stream is closed for it, since an open stream is in use
// (its session would hear nothing until it reconnected).
type listenSlots struct {
	share.Counts
	logged atomic.Bool // the pool's limit was logged since the count was last under it
}

// take takes a slot for principal and tenant, unless the pool or their
// share is full; a refusal is counted under its limit, and the pool's
// logged once.
func (s *listenSlots) take(h *Server, principal, tenant string, l *config.Limits) bool {
	switch s.Take(principal, tenant, share.Share{Pool: l.UpstreamStreams, Principal: l.UpstreamStreamsPerPrincipal, Tenant: l.UpstreamStreamsPerTenant}) {
	case 0:
		return true
	case share.Principal:
		h.metrics.LimitRejection(telemetry.LimitUpstreamStreamsPrincipal, tenant)
	case share.Tenant:
		h.metrics.LimitRejection(telemetry.LimitUpstreamStreamsTenant, tenant)
	default:
		h.metrics.LimitRejection(telemetry.LimitUpstreamStreams, tenant)
		if !s.logged.Swap(true) {
			h.log.Warn("upstream stream limit reached: sessions hear no more upstreams until streams close",
				"limit", "limits.upstream_streams", "max", l.UpstreamStreams)
		}
	}
	return false
}

func (s *listenSlots) give(principal, tenant string) {
	s.Give(principal, tenant)
	s.logged.Store(false)
}

// NotifySession sends msg, a JSON-RPC message the gateway originates, to
// session sessionID's GET stream, on whichever replica holds it; it is
// dropped if none does. It fails when msg exceeds the bus's size bound or
// the bus cannot be reached.
func (h *Server) NotifySession(ctx context.Context, sessionID string, msg []byte) error {
	if len(msg) == 0 || msg[0] != '{' {
		return errors.New("dispatch: NotifySession: not a JSON-RPC message")
	}
	return h.bus.Publish(ctx, sessionID, msg)
}

// Listen starts relaying to a session's GET stream what reaches it
// outside any request: messages from the session's upstream streams, and
// those the bus carries for it (see the comment above); ctx is the GET
// request's, and rq.Session must be set. It returns the stream's messages,
// shape, which the stream passes each of them through before sending it
// (nil means there is nothing to send), and stop, which ends it all and
// waits. A session that needs no upstream stream costs no goroutine: the
// bus and the upstream streams share the one queue the stream reads, and
// a wake-up is served by the stream's own goroutine, in shape.
func (h *Server) Listen(ctx context.Context, rq *Request) (msgs <-chan []byte, shape func([]byte) []byte, stop func()) {
	ctx, cancel := context.WithCancel(rq.withCaller(ctx))
	l := &listener{
		h:       h,
		rq:      rq,
		ctx:     ctx,
		out:     make(chan []byte, listenQueue),
		streams: make(map[string]bool),
		subs:    make(map[string]subscribedListen),
		who: &bridge.Caller{
			Principal: PrincipalKey(rq), Tenant: rq.principal.Tenant,
			Session: rq.Session.ID, Caps: rq.Session.ClientCapabilities,
		},
	}
	l.roots = h.capSet(rq.Session.ClientCapabilities)["roots"]
	unsubscribe := h.bus.Subscribe(rq.Session.ID, l.out)
	// The record is read again now that the bus listens: a Listen set
	// after the GET loaded the record, and before the subscription, would
	// otherwise go unheard.
	l.reload()
	l.start()
	return l.out, l.shape, func() {
		cancel()
		l.wg.Wait()
		unsubscribe()
	}
}

// listener is what one client GET stream hears beyond the gateway's own
// list_changed.
type listener struct {
	h     *Server
	rq    *Request
	ctx   context.Context // the GET stream's life
	who   *bridge.Caller
	roots bool // the client declared roots
	out   chan []byte

	mu      sync.Mutex
	streams map[string]bool             // upstreams with a running stream goroutine
	subs    map[string]subscribedListen // 2026-07-28 upstreams' running listens
	missed  time.Time                   // when holds last read the record again
	wg      sync.WaitGroup
}

// shape serves a message of the stream's queue: a wake-up from the bus
// starts the upstream streams the session needs now; anything else goes
// to the client.
func (l *listener) shape(msg []byte) []byte {
	if string(msg) == string(listenWake) {
		l.reload()
		l.mu.Lock()
		l.restartChanged()
		l.mu.Unlock()
		l.start()
		return nil
	}
	return msg
}

// reload reads the session record again, for the upstream sessions
// another replica opened or marked. A failure keeps what rq holds.
func (l *listener) reload() {
	ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
	defer cancel()
	rec, err := l.h.store.Get(ctx, l.rq.Session.ID)
	if err != nil {
		if ctx.Err() == nil {
			l.h.log.Debug("listen: reading the session record", "error", err)
		}
		return
	}
	l.rq.replaceUpstreams(rec.Upstreams)
}

// start starts a stream for each upstream session that needs one and has
// none: a goroutine each, owned by the Server (and by stop).
func (l *listener) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return
	}
	for _, up := range l.rq.upstreams() {
		if l.streams[up.cfg.Name] {
			continue
		}
		if _, ok := l.needs(up); !ok {
			continue
		}
		if !l.h.listenSlots.take(l.h, l.who.Principal, l.who.Tenant, &l.rq.st.cfg.Limits) {
			return
		}
		l.wg.Add(1)
		opened, forget := l.h.hearing(l.rq.Session.ID, up.cfg.Name)
		started := l.h.own.Go(func(owned context.Context) {
			defer l.wg.Done()
			defer l.h.listenSlots.give(l.who.Principal, l.who.Tenant)
			defer forget()
			defer func() {
				l.mu.Lock()
				delete(l.streams, up.cfg.Name)
				l.mu.Unlock()
			}()
			ctx, cancel := context.WithCancel(l.ctx)
			defer cancel()
			defer context.AfterFunc(owned, cancel)()
			l.h.metrics.UpstreamStream(1)
			defer l.h.metrics.UpstreamStream(-1)
			l.listenUpstream(ctx, up, opened)
		})
		if !started { // the Server is closing
			forget()
			l.wg.Done()
			l.h.listenSlots.give(l.who.Principal, l.who.Tenant)
			return
		}
		l.streams[up.cfg.Name] = true
	}
}

// current returns upstream name as the config in force has it, or nil when
// the session's tenant no longer uses it.
func (l *listener) current(name string) *upstreamRef {
	st := l.h.Current()
	v, err := st.tenants.Get(l.who.Tenant)
	if err != nil || !v.Allows(name) {
		return nil
	}
	return st.byName[name]
}

// needs returns the session's upstream session with up, and whether it
// needs a stream (see the comment above).
func (l *listener) needs(up *upstreamRef) (session.Upstream, bool) {
	us, ok := l.rq.upstreamEntry(up.cfg.Name)
	// Roots alone do not open a stdio upstream's stream: it would keep
	// the tenant's process from ever going idle
	// (upstreams[].stdio.idle_timeout) while any client holds a GET
	// stream.
	if ok && upstream.IsModern(us) {
		// A 2026-07-28 upstream is heard on a subscriptions/listen of
		// the session's subscriptions, and only for them.
		return us, len(us.Subscribed) > 0
	}
	if !ok || us.SessionID == "" || !(us.Listen || l.roots && !up.cfg.IsStdio()) {
		return us, false
	}
	if t, ok := l.h.noStream.Load(up.cfg.Name); ok && time.Since(t.(time.Time)) < noStreamFor {
		return us, false
	}
	return us, true
}

// listenUpstream keeps up's stream open while the session needs it, on
// the session's current upstream session, opened again with backoff.
func (l *listener) listenUpstream(ctx context.Context, up *upstreamRef, opened func()) {
	name := up.cfg.Name
	log := l.h.log.With("upstream", name)
	var b upstream.Backoff
	for {
		// A reload since may have replaced the upstream's client, or taken
		// the upstream from the tenant.
		if up = l.current(name); up == nil {
			return
		}
		us, ok := l.needs(up)
		if !ok {
			return
		}
		start := time.Now()
		var err error
		if upstream.IsModern(us) {
			err = l.listenModern(ctx, up, us, opened)
		} else {
			err = l.listenOnce(ctx, up, us, opened)
		}
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errResubscribe):
			continue // the session's subscriptions changed: at once
		case errors.Is(err, upstream.ErrNoStream):
			l.h.noStream.Store(up.cfg.Name, time.Now())
			log.Debug("upstream offers no GET stream")
			return
		case errors.Is(err, upstream.ErrSessionExpired):
			// The upstream forgot the session: a new one, for every
			// replica (compare-and-swap), which the client's next
			// request would open anyway.
			if _, err := l.rq.openUpstream(ctx, up, us.SessionID); err != nil {
				log.Debug("listen: re-opening the upstream session", "error", err)
			}
		case err != nil:
			log.Debug("upstream stream ended", "error", err)
		}
		if !b.Wait(ctx, start) {
			return
		}
		l.reload()
	}
}

// listenOnce opens the stream of upstream session us and relays what it
// carries until it ends. It calls opened once the upstream answered the
// stream's request, whether it opened it or not.
func (l *listener) listenOnce(ctx context.Context, up *upstreamRef, us session.Upstream, opened func()) error {
	st, err := up.client.Watch(ctx, us)
	opened()
	if err != nil {
		return err
	}
	defer st.Close()
	defer context.AfterFunc(ctx, func() { st.Close() })()
	watched := up.cfg.Watches() && (up.creds == nil || !up.creds.NeedsCaller(&credentials.Caller{}))
	state := l.h.Current()
	for {
		msg, raw, err := st.Next()
		if err != nil {
			return err
		}
		if cur := l.h.Current(); cur != state {
			// Reloaded: nothing more of an upstream the tenant no longer
			// uses, or of a replaced client's stream.
			if l.current(up.cfg.Name) != up {
				return errReplaced
			}
			state = cur
		}
		switch msg.Kind {
		case jsonrpc.KindNotification:
			// A task's status, and the related-task _meta of the rest,
			// name the gateway's task id (tasks.go); nil: a task the
			// session's principal does not hold.
			if raw = l.rq.h.tasks.Note(ctx, l.rq.taskCaller(), up.cfg.Name, us, msg, raw); raw == nil {
				continue
			}
			switch {
			case msg.Method == protocol.NotifyMessage, msg.Method == protocol.NotifyTaskStatus:
				l.notify(raw)
			case msg.Method == protocol.NotifyResourceUpdated:
				// Checked against the tenant's rules in force.
				if v, err := state.tenants.Get(l.who.Tenant); err == nil {
					if raw = l.rq.exposeUpdated(ctx, v, up, msg, func(uri string) bool { return l.holds(up, uri) }); raw != nil {
						l.notify(raw)
					}
				}
			case catalog.ChangedKinds(msg.Method) != nil && !watched:
				for _, k := range catalog.ChangedKinds(msg.Method) {
					l.h.catalog.Stale(up.cfg.Name, k)
					l.notify(catalog.ListChanged(k))
				}
			}
		case jsonrpc.KindRequest:
			l.rq.h.tasks.UpstreamRequest(ctx, l.rq.taskCaller(), up.cfg.Name, us, msg)
			l.h.bridge.UpstreamRequest(ctx, l.who, l, up.client, us, msg)
		}
	}
}

// holds reports whether an update of uri (up's own) belongs to one of the
// session's subscriptions. The record the listener holds may predate a
// subscription just made, whose wake-up is still on its way: on a miss it
// reads the record again, at most once per missInterval, so that an
// upstream's flood of updates nobody subscribed to costs no more than that.
func (l *listener) holds(up *upstreamRef, uri string) bool {
	if l.rq.holds(up, uri) {
		return true
	}
	l.mu.Lock()
	now := time.Now()
	again := now.Sub(l.missed) >= missInterval
	if again {
		l.missed = now
	}
	l.mu.Unlock()
	if !again {
		return false
	}
	l.reload()
	return l.rq.holds(up, uri)
}

// errResubscribe ends a 2026-07-28 upstream's listen whose resources are
// no longer the session's subscriptions.
var errResubscribe = errors.New("the session's subscriptions changed")

// listenModern opens 2026-07-28 upstream up's subscriptions/listen for
// the resources the session subscribed to there (us.Subscribed) and
// relays their updates, until the stream ends, or the session's
// subscriptions change (errResubscribe: a reload of the record that finds
// them changed ends it, see restartChanged). It calls opened once the
// upstream answered.
func (l *listener) listenModern(ctx context.Context, up *upstreamRef, us session.Upstream, opened func()) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l.mu.Lock()
	l.subs[up.cfg.Name] = subscribedListen{list: us.Subscribed, cancel: cancel}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.subs, up.cfg.Name)
		l.mu.Unlock()
	}()
	filter, _ := json.Marshal(map[string][]string{"resourceSubscriptions": us.Subscribed})
	st, err := up.client.Listen(ctx, us, filter)
	opened()
	if err != nil {
		return err
	}
	defer st.Close()
	defer context.AfterFunc(ctx, func() { st.Close() })()
	for {
		msg, _, err := st.Next()
		if err != nil {
			if c := context.Cause(ctx); errors.Is(c, errResubscribe) {
				return c
			}
			return err
		}
		if msg.Kind != jsonrpc.KindNotification || msg.Method != protocol.NotifyResourceUpdated {
			continue // the acknowledgment; nothing else was asked for
		}
		if v, err := l.h.Current().tenants.Get(l.who.Tenant); err == nil {
			if raw := l.rq.exposeUpdated(ctx, v, up, msg, func(uri string) bool { return l.holds(up, uri) }); raw != nil {
				l.notify(raw)
			}
		}
	}
}

// A subscribedListen is a running 2026-07-28 upstream listen: the
// resources it asked for, and how to end it.
type subscribedListen struct {
	list   []string
	cancel context.CancelCauseFunc
}

// restartChanged ends the 2026-07-28 upstream listens whose resources are
// no longer the session's subscriptions, by the record rq holds: each
// opens again with the new ones (or ends, with none). l.mu is held.
func (l *listener) restartChanged() {
	for name, sl := range l.subs {
		now, _ := l.rq.upstreamEntry(name)
		if !slices.Equal(now.Subscribed, sl.list) {
			sl.cancel(errResubscribe)
		}
	}
}

// notify queues a notification for the client's stream, dropping it
// (counted) when the queue is full.
func (l *listener) notify(msg []byte) {
	if l.Event(msg) != nil {
		l.h.metrics.LimitRejection(telemetry.LimitStreamQueue, l.who.Tenant)
	}
}

// Event implements bridge.Out: an upstream's request goes to the client's
// stream if there is room, and is refused to the upstream otherwise. The
// last place in the queue is kept for the bus, so that an upstream's flood
// never leaves a wake-up without room.
func (l *listener) Event(msg []byte) error {
	if len(l.out) >= cap(l.out)-1 {
		return errStreamFull
	}
	select {
	case l.out <- msg:
		return nil
	default:
		return errStreamFull
	}
}

// Collects implements bridge.Out: a GET stream carries requests.
func (l *listener) Collects() bool { return false }

// markListen records that the session has something to hear from its
// upstream session with up (it subscribed to a resource, or set a log
// level there), and wakes the replica holding its GET stream, the first
// time. A failure is logged: the client then hears nothing, as before.
func (rq *Request) markListen(ctx context.Context, up *upstreamRef) {
	if rq.adm.Stateless || rq.Session == nil {
		return
	}
	us, ok := rq.upstreamEntry(up.cfg.Name)
	if !ok || us.Listen || us.SessionID == "" || upstream.IsModern(us) {
		return
	}
	h := rq.h
	us.Listen = true
	cur, err := h.store.SetUpstream(context.WithoutCancel(ctx), rq.Session.ID, up.cfg.Name, us.SessionID, us)
	if err != nil {
		// A conflict: the upstream session was replaced meanwhile, and the
		// new one has not heard this subscription.
		h.log.Debug("listen: marking the upstream session", "upstream", up.cfg.Name, "error", err)
		return
	}
	rq.setUpstream(up.cfg.Name, cur)
	if err := h.bus.Publish(context.WithoutCancel(ctx), rq.Session.ID, listenWake); err != nil {
		h.log.Debug("listen: waking the session's stream", "error", err)
	}
}

// Calls wait for the session's upstream stream.
//
// An upstream may ask a session's client something (roots/list, say) on
// its GET stream while a call of that client is in flight, unrelated to the
// call (2025-11-25 basic/transports, "Listening for Messages from the
// Server": such messages SHOULD be unrelated to any concurrently-running
// request); server-everything's get-roots-list does. An upstream with no
// GET stream open for the session drops it ("the server MAY send" on the
// stream: there is none), and the call then waits for an answer that never
// comes. The listener opens that stream asynchronously, when the client's
// GET stream begins: a call that arrives meanwhile would reach the upstream
// first. So a call that may need the client (its method may, and the client
// declared roots, which open the stream) waits, on the replica holding the
// client's GET stream, until the upstream answered the stream's request.
// The wait is bounded by openWait and the call's context; a call on
// another replica than the GET stream's does not
// wait.

// A heardSet is the upstream streams of one session being opened, or open,
// on this replica, by upstream name: each channel is closed once its
// upstream answered the stream's request.
type heardSet struct {
	mu   sync.Mutex
	m    map[string]chan struct{}
	dead bool // emptied and taken out of Server.heard: make a new one
}

// hearing records that the listener is opening session sessionID's stream
// with upstream name. It returns opened, which says the upstream answered
// (or the listener gave up), and may be called any number of times; and
// forget, which the listener's goroutine calls on its way out.
func (h *Server) hearing(sessionID, name string) (opened, forget func()) {
	ch := make(chan struct{})
	var set *heardSet
	for {
		v, _ := h.heard.LoadOrStore(sessionID, &heardSet{})
		set = v.(*heardSet)
		set.mu.Lock()
		if !set.dead {
			break
		}
		set.mu.Unlock()
	}
	if set.m == nil {
		set.m = make(map[string]chan struct{})
	}
	set.m[name] = ch
	set.mu.Unlock()
	var once sync.Once
	opened = func() { once.Do(func() { close(ch) }) }
	return opened, func() {
		opened()
		set.mu.Lock()
		defer set.mu.Unlock()
		if set.m[name] == ch {
			delete(set.m, name)
		}
		if len(set.m) == 0 && !set.dead {
			set.dead = true
			h.heard.CompareAndDelete(sessionID, set)
		}
	}
}

// awaitHeard waits until the session's stream with up, if this replica is
// opening one, is open (see above), or ctx ends.
func (rq *Request) awaitHeard(ctx context.Context, up *upstreamRef) {
	v, ok := rq.h.heard.Load(rq.Session.ID)
	if !ok {
		return
	}
	set := v.(*heardSet)
	set.mu.Lock()
	ch := set.m[up.cfg.Name]
	set.mu.Unlock()
	if ch != nil {
		awaitOpen(ctx, ch)
	}
}

// openWait bounds how long a call waits for an upstream to answer the
// request of a GET stream it needs open: an upstream slow to answer it
// delays the call by at most that much, then the call goes as it did
// before the stream was awaited.
const openWait = 5 * time.Second

// awaitOpen waits until ready is closed, ctx ends, or openWait passed.
func awaitOpen(ctx context.Context, ready <-chan struct{}) {
	select {
	case <-ready:
		return
	default:
	}
	t := time.NewTimer(openWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-ctx.Done():
	case <-t.C:
	}
}
