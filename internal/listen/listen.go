package listen

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/bridge"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/upstream"
)

// An Upstream is one upstream of a session's tenant, as the listener
// reaches it.
type Upstream struct {
	Name   string
	Client *upstream.Client
	// Stdio is set for a stdio upstream: roots alone do not open its
	// stream, which would keep the tenant's process from ever going idle
	// (upstreams[].stdio.idle_timeout) while any client holds a GET
	// stream.
	Stdio bool
	// Watched is set when the gateway watches the upstream's lists itself
	// (internal/watch): its list_changed is dropped here.
	Watched bool
	// Ref is the caller's handle of the upstream: a stream whose upstream
	// has another Ref now (a reload replaced it) ends.
	Ref any
}

// A Session is the client session whose GET stream listens, as the
// listener needs it.
type Session interface {
	// Upstreams are the upstreams of the session's tenant, as the request
	// that opened the GET stream saw them.
	Upstreams() []Upstream
	// Current returns upstream name as the config in force has it, and
	// false when the session's tenant no longer uses it.
	Current(name string) (Upstream, bool)
	// Version changes when the config in force does.
	Version() any
	// Entry returns the session's upstream session with upstream name.
	Entry(name string) (session.Upstream, bool)
	// Reload reads the session record again, for the upstream sessions
	// another replica opened or marked; a failure keeps what it held.
	Reload(ctx context.Context)
	// Reopen opens a new upstream session with up in place of expired,
	// which the upstream forgot.
	Reopen(ctx context.Context, up Upstream, expired string) error
	// Holds reports whether the session subscribed there to uri (up's
	// own), or to a resource uri is a sub-resource of.
	Holds(up Upstream, uri string) bool
	// Updated returns a notifications/resources/updated of up as the
	// client may see it, or nil when it may not hear of it: held says
	// whether it subscribed to the upstream's uri.
	Updated(ctx context.Context, up Upstream, msg *jsonrpc.Message, held func(uri string) bool) []byte
	// Note rewrites another notification of up's, sent on upstream
	// session us (the tasks it names); nil drops it.
	Note(ctx context.Context, up Upstream, us session.Upstream, msg *jsonrpc.Message, raw []byte) []byte
	// Request relays a request of up's, sent on upstream session us, to
	// the client through out, or refuses it to the upstream.
	Request(ctx context.Context, up Upstream, us session.Upstream, msg *jsonrpc.Message, out bridge.Out)
	// Stale marks up's listing of kind k stale.
	Stale(up Upstream, k catalog.Kind)
}

// A Client is who holds the GET stream.
type Client struct {
	SessionID string
	Who       *bridge.Caller
	// Roots is set when the client declared roots: any upstream may then
	// ask for them.
	Roots bool
	// Limits are the config's limits when the stream opened.
	Limits *config.Limits
}

// errReplaced ends an upstream stream whose upstream a reload replaced or
// took from the tenant.
var errReplaced = errors.New("the upstream was reconfigured")

// errResubscribe ends a 2026-07-28 upstream's listen whose resources are
// no longer the session's subscriptions.
var errResubscribe = errors.New("the session's subscriptions changed")

// Listen starts relaying to a session's GET stream what reaches it
// outside any request: messages from the session's upstream streams, and
// those the bus carries for it (see the package comment); ctx is the GET
// request's. It returns the stream's messages; shape, which the stream
// passes each of them through before sending it (nil means there is
// nothing to send); and stop, which ends it all and waits. A session that
// needs no upstream stream costs no goroutine: the bus and the upstream
// streams share the one queue the stream reads, and a wake-up is served by
// the stream's own goroutine, in shape.
func (hb *Hub) Listen(ctx context.Context, s Session, c Client) (msgs <-chan []byte, shape func([]byte) []byte, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	l := &listener{
		hb:      hb,
		s:       s,
		c:       c,
		ctx:     ctx,
		out:     make(chan []byte, Queue),
		streams: make(map[string]bool),
		subs:    make(map[string]subscribedListen),
	}
	unsubscribe := hb.bus.Subscribe(c.SessionID, l.out)
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
	hb  *Hub
	s   Session
	c   Client
	ctx context.Context // the GET stream's life
	out chan []byte

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
	if string(msg) == string(wake) {
		l.reload()
		l.mu.Lock()
		l.restartChanged()
		l.mu.Unlock()
		l.start()
		return nil
	}
	return msg
}

func (l *listener) reload() {
	ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
	defer cancel()
	l.s.Reload(ctx)
}

// start starts a stream for each upstream session that needs one and has
// none: a goroutine each, owned by the Hub's owner (and by stop).
func (l *listener) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return
	}
	who := l.c.Who
	for _, up := range l.s.Upstreams() {
		if l.streams[up.Name] {
			continue
		}
		if _, ok := l.needs(up); !ok {
			continue
		}
		if !l.hb.Take(who.Principal, who.Tenant, l.c.Limits) {
			return
		}
		l.wg.Add(1)
		opened, forget := l.hb.hearing(l.c.SessionID, up.Name)
		started := l.hb.goOwned(func(owned context.Context) {
			defer l.wg.Done()
			defer l.hb.Give(who.Principal, who.Tenant)
			defer forget()
			defer func() {
				l.mu.Lock()
				delete(l.streams, up.Name)
				l.mu.Unlock()
			}()
			ctx, cancel := context.WithCancel(l.ctx)
			defer cancel()
			defer context.AfterFunc(owned, cancel)()
			l.hb.metrics.UpstreamStream(1)
			defer l.hb.metrics.UpstreamStream(-1)
			l.listenUpstream(ctx, up.Name, opened)
		})
		if !started { // the owner is closing
			forget()
			l.wg.Done()
			l.hb.Give(who.Principal, who.Tenant)
			return
		}
		l.streams[up.Name] = true
	}
}

// needs returns the session's upstream session with up, and whether it
// needs a stream (see the package comment).
func (l *listener) needs(up Upstream) (session.Upstream, bool) {
	us, ok := l.s.Entry(up.Name)
	if ok && upstream.IsModern(us) {
		// A 2026-07-28 upstream is heard on a subscriptions/listen of
		// the session's subscriptions, and only for them.
		return us, len(us.Subscribed) > 0
	}
	if !ok || us.SessionID == "" || !(us.Listen || l.c.Roots && !up.Stdio) {
		return us, false
	}
	if l.hb.NoStream(up.Name) {
		return us, false
	}
	return us, true
}

// listenUpstream keeps upstream name's stream open while the session
// needs it, on the session's current upstream session, opened again with
// backoff.
func (l *listener) listenUpstream(ctx context.Context, name string, opened func()) {
	log := l.hb.log.With("upstream", name)
	var b upstream.Backoff
	for {
		// A reload since may have replaced the upstream's client, or taken
		// the upstream from the tenant.
		up, ok := l.s.Current(name)
		if !ok {
			return
		}
		us, ok := l.needs(up)
		if !ok {
			return
		}
		start := time.Now()
		var err error
		if upstream.IsModern(us) {
			err = l.modern(ctx, up, us, opened)
		} else {
			err = l.legacy(ctx, up, us, opened)
		}
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errResubscribe):
			continue // the session's subscriptions changed: at once
		case errors.Is(err, upstream.ErrNoStream):
			l.hb.MarkNoStream(name)
			log.Debug("upstream offers no GET stream")
			return
		case errors.Is(err, upstream.ErrSessionExpired):
			// The upstream forgot the session: a new one, for every
			// replica (compare-and-swap), which the client's next
			// request would open anyway.
			if err := l.s.Reopen(ctx, up, us.SessionID); err != nil {
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

// legacy opens the GET stream of upstream session us and relays what it
// carries until it ends. It calls opened once the upstream answered the
// stream's request, whether it opened it or not.
func (l *listener) legacy(ctx context.Context, up Upstream, us session.Upstream, opened func()) error {
	st, err := up.Client.Watch(ctx, us)
	opened()
	if err != nil {
		return err
	}
	defer st.Close()
	defer context.AfterFunc(ctx, func() { st.Close() })()
	version := l.s.Version()
	held := func(uri string) bool { return l.holds(up, uri) }
	for {
		msg, raw, err := st.Next()
		if err != nil {
			return err
		}
		if v := l.s.Version(); v != version {
			// Reloaded: nothing more of an upstream the tenant no longer
			// uses, or of a replaced client's stream.
			if cur, ok := l.s.Current(up.Name); !ok || cur.Ref != up.Ref {
				return errReplaced
			}
			version = v
		}
		switch msg.Kind {
		case jsonrpc.KindNotification:
			// A task's status, and the related-task _meta of the rest,
			// name the gateway's task id; nil: a task the session's
			// principal does not hold.
			if raw = l.s.Note(ctx, up, us, msg, raw); raw == nil {
				continue
			}
			switch {
			case msg.Method == protocol.NotifyMessage, msg.Method == protocol.NotifyTaskStatus:
				l.notify(raw)
			case msg.Method == protocol.NotifyResourceUpdated:
				if raw = l.s.Updated(ctx, up, msg, held); raw != nil {
					l.notify(raw)
				}
			case catalog.ChangedKinds(msg.Method) != nil && !up.Watched:
				for _, k := range catalog.ChangedKinds(msg.Method) {
					l.s.Stale(up, k)
					l.notify(catalog.ListChanged(k))
				}
			}
		case jsonrpc.KindRequest:
			l.s.Request(ctx, up, us, msg, l)
		}
	}
}

// holds reports whether an update of uri (up's own) belongs to one of the
// session's subscriptions. The record the listener holds may predate a
// subscription just made, whose wake-up is still on its way: on a miss it
// reads the record again, at most once per missInterval, so that an
// upstream's flood of updates nobody subscribed to costs no more than that.
func (l *listener) holds(up Upstream, uri string) bool {
	if l.s.Holds(up, uri) {
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
	return l.s.Holds(up, uri)
}

// modern opens 2026-07-28 upstream up's subscriptions/listen for the
// resources the session subscribed to there (us.Subscribed) and relays
// their updates, until the stream ends, or the session's subscriptions
// change (errResubscribe: a reload of the record that finds them changed
// ends it, see restartChanged). It calls opened once the upstream
// answered.
func (l *listener) modern(ctx context.Context, up Upstream, us session.Upstream, opened func()) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l.mu.Lock()
	l.subs[up.Name] = subscribedListen{list: us.Subscribed, cancel: cancel}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.subs, up.Name)
		l.mu.Unlock()
	}()
	filter, _ := json.Marshal(map[string][]string{"resourceSubscriptions": us.Subscribed})
	st, err := up.Client.Listen(ctx, us, filter)
	opened()
	if err != nil {
		return err
	}
	defer st.Close()
	defer context.AfterFunc(ctx, func() { st.Close() })()
	held := func(uri string) bool { return l.holds(up, uri) }
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
		if raw := l.s.Updated(ctx, up, msg, held); raw != nil {
			l.notify(raw)
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
// no longer the session's subscriptions, by the record the session holds:
// each opens again with the new ones (or ends, with none). l.mu is held.
func (l *listener) restartChanged() {
	for name, sl := range l.subs {
		now, _ := l.s.Entry(name)
		if !slices.Equal(now.Subscribed, sl.list) {
			sl.cancel(errResubscribe)
		}
	}
}

// notify queues a notification for the client's stream, dropping it
// (counted) when the queue is full.
func (l *listener) notify(msg []byte) {
	if l.Event(msg) != nil {
		l.hb.metrics.LimitRejection(telemetry.LimitStreamQueue, l.c.Who.Tenant)
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
