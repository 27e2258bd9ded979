// Package listen relays to a client session's GET stream what reaches it
// outside any request.
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
//     of) on this upstream session (Session.Holds) and the tenant's
//     rules in force let it see the resource (Session.Updated, the check a
//     subscription makes);
//   - list_changed: dropped for an upstream the gateway watches (its
//     watch tells every session, see internal/watch); for one it does not (an
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
// itself sends a session (see Hub.Notify). A message for a session
// whose GET stream is open nowhere is dropped.
//
// Bounds: a stream's queue holds listenQueue messages, from its upstream
// streams and the bus alike; past it a notification is dropped and a
// request refused to its upstream at once (-32603), both counted
// (stream_queue; bus_queue for what the bus drops). A session opens at
// most one upstream stream per upstream of its tenant, a replica at most
// limits.upstream_streams, of which a principal and a tenant hold at most
// their share (Hub.Take); past that no new one opens until one closes
// (counted under the limit reached; the pool's logged once). The bus bounds its
// message size (session.BusOptions); the upstream client bounds each
// message it reads. A stream that needs no upstream stream costs its
// queue and a bus subscription, and no goroutine.
//
// Only upstream sessions of the 2025-11-25 revision (and older) have a
// GET stream. A 2026-07-28 upstream has no resources/subscribe: the
// resources a session subscribed to there are kept in its record, and
// the replica holding the GET stream opens the upstream's
// subscriptions/listen for them (listener.modern), again whenever they
// change; nothing else of such an upstream is heard there. An upstream session that is re-initialized (the
// upstream forgot it: 404) loses what the client subscribed to there, as
// the upstream does: its new entry in the record has no Listen and no
// subscriptions, and the client must subscribe again.

// A Hub is one replica's share of this: the pool of upstream streams (also
// taken by the 2026-07-28 subscriptions and shared streams of the request
// pipeline), the upstreams that offer no stream, the streams being opened
// for each session, and the bus. It owns the listeners' goroutines (through
// the owner it is given).
package listen

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/share"
	"github.com/mcpgw/gateway/internal/telemetry"
)

const (
	// Queue bounds the messages waiting for a client's GET stream to take
	// them.
	Queue = 16
	// missInterval spaces the session record reads of updates that
	// belong to no subscription the listener knows of (listener.holds).
	missInterval = 100 * time.Millisecond
	// noStreamFor is how long an upstream that offers no GET stream (405)
	// is not asked again, by any session.
	noStreamFor = 10 * time.Minute
	// OpenWait bounds how long a call waits for an upstream to answer the
	// request of a GET stream it needs open: an upstream slow to answer
	// it delays the call by at most that much, then the call goes as it
	// did before the stream was awaited.
	OpenWait = 5 * time.Second
)

// wake is the bus message that tells a GET stream to read its session
// record again; the gateway's own messages are JSON objects.
var wake = []byte("wake")

// errStreamFull is a message a client's GET stream had no room for.
var errStreamFull = errors.New("the client's stream is not taking messages")

// Options configure a Hub.
type Options struct {
	// Bus reaches the replica holding a session's GET stream.
	Bus session.Bus
	// Go runs a goroutine its owner waits for, with a context the owner
	// ends; false means the owner is closing, and nothing ran.
	Go      func(f func(ctx context.Context)) bool
	Metrics *telemetry.Metrics
	Logger  *slog.Logger
}

// A Hub is one replica's listening: see the package comment.
type Hub struct {
	bus     session.Bus
	goOwned func(f func(ctx context.Context)) bool
	metrics *telemetry.Metrics
	log     *slog.Logger

	slots    share.Counts
	logged   atomic.Bool // the pool's limit was logged since the count was last under it
	noStream sync.Map    // upstream name → when it answered a GET with 405
	heard    sync.Map    // session id → *heardSet: its upstream streams opening or open here

	sharedMu sync.Mutex
	shared   map[string]*sharedStream // upstream name, upstream session id → its GET stream (shared.go)
}

// New returns a Hub.
func New(opts Options) *Hub {
	return &Hub{bus: opts.Bus, goOwned: opts.Go, metrics: opts.Metrics, log: opts.Logger}
}

// Take takes one of the replica's upstream streams for principal and
// tenant, unless the pool (limits.upstream_streams) or their share is
// full; a refusal is counted under its limit, and the pool's logged once
// until the count falls under it again. No open stream is closed for it,
// since an open stream is in use (its session would hear nothing until it
// reconnected).
func (hb *Hub) Take(principal, tenant string, l *config.Limits) bool {
	switch hb.slots.Take(principal, tenant, share.Share{Pool: l.UpstreamStreams, Principal: l.UpstreamStreamsPerPrincipal, Tenant: l.UpstreamStreamsPerTenant}) {
	case 0:
		return true
	case share.Principal:
		hb.metrics.LimitRejection(telemetry.LimitUpstreamStreamsPrincipal, tenant)
	case share.Tenant:
		hb.metrics.LimitRejection(telemetry.LimitUpstreamStreamsTenant, tenant)
	default:
		hb.metrics.LimitRejection(telemetry.LimitUpstreamStreams, tenant)
		if !hb.logged.Swap(true) {
			hb.log.Warn("upstream stream limit reached: sessions hear no more upstreams until streams close",
				"limit", "limits.upstream_streams", "max", l.UpstreamStreams)
		}
	}
	return false
}

// Give gives back a stream Take took.
func (hb *Hub) Give(principal, tenant string) {
	hb.slots.Give(principal, tenant)
	hb.logged.Store(false)
}

// NoStream reports whether upstream name answered a GET stream's request
// with 405 lately: it is not asked again for noStreamFor.
func (hb *Hub) NoStream(name string) bool {
	t, ok := hb.noStream.Load(name)
	return ok && time.Since(t.(time.Time)) < noStreamFor
}

// MarkNoStream records that upstream name offers no GET stream.
func (hb *Hub) MarkNoStream(name string) { hb.noStream.Store(name, time.Now()) }

// Notify sends msg, a JSON-RPC message the gateway originates, to session
// sessionID's GET stream, on whichever replica holds it; it is dropped if
// none does. It fails when msg exceeds the bus's size bound or the bus
// cannot be reached.
func (hb *Hub) Notify(ctx context.Context, sessionID string, msg []byte) error {
	if len(msg) == 0 || msg[0] != '{' {
		return errors.New("listen: Notify: not a JSON-RPC message")
	}
	return hb.bus.Publish(ctx, sessionID, msg)
}

// Wake tells the replica holding session sessionID's GET stream to read
// the session record again: a request elsewhere gave it something to hear.
func (hb *Hub) Wake(ctx context.Context, sessionID string) error {
	return hb.bus.Publish(ctx, sessionID, wake)
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
// client's GET stream, until the upstream answered the stream's request
// (Await). The wait is bounded by OpenWait and the call's context; a call
// on another replica than the GET stream's does not wait.

// A heardSet is the upstream streams of one session being opened, or open,
// on this replica, by upstream name: each channel is closed once its
// upstream answered the stream's request.
type heardSet struct {
	mu   sync.Mutex
	m    map[string]chan struct{}
	dead bool // emptied and taken out of Hub.heard: make a new one
}

// hearing records that a listener is opening session sessionID's stream
// with upstream name. It returns opened, which says the upstream answered
// (or the listener gave up), and may be called any number of times; and
// forget, which the listener's goroutine calls on its way out.
func (hb *Hub) hearing(sessionID, name string) (opened, forget func()) {
	ch := make(chan struct{})
	var set *heardSet
	for {
		v, _ := hb.heard.LoadOrStore(sessionID, &heardSet{})
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
			hb.heard.CompareAndDelete(sessionID, set)
		}
	}
}

// Await waits until session sessionID's stream with upstream name, if this
// replica is opening one, is open (see above), or ctx ends, or OpenWait
// passed.
func (hb *Hub) Await(ctx context.Context, sessionID, name string) {
	v, ok := hb.heard.Load(sessionID)
	if !ok {
		return
	}
	set := v.(*heardSet)
	set.mu.Lock()
	ch := set.m[name]
	set.mu.Unlock()
	if ch != nil {
		AwaitOpen(ctx, ch)
	}
}

// AwaitOpen waits until ready is closed, ctx ends, or OpenWait passed.
func AwaitOpen(ctx context.Context, ready <-chan struct{}) {
	select {
	case <-ready:
		return
	default:
	}
	t := time.NewTimer(OpenWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-ctx.Done():
	case <-t.C:
	}
}
