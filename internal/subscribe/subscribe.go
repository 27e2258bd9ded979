// Package subscribe keeps the resource subscriptions of clients.
//
// A session client (2025-11-25 and older) subscribes with
// resources/subscribe on its own upstream session, and the upstream sends
// the updates on that session's GET stream, which may be open on another
// replica than the one that served the subscription. The session record
// keeps, per upstream session, the URIs the client subscribed to
// (session.Upstream.Subscribed), so that whichever replica hears an update
// checks it against them ([Covers]): an update of a resource the client
// did not subscribe to (nor a sub-resource of one) is not the session's,
// whatever the upstream says, and is dropped. The list is bounded
// ([MaxURIs] URIs, [MaxBytes] bytes of them per upstream session); a
// subscription past it is refused before it reaches the upstream
// ([ErrTooMany]). A 2026-07-28 upstream has no resources/subscribe: the
// session's subscriptions of it are the gateway's to keep, and the GET
// stream's subscriptions/listen of the upstream asks for them (see
// internal/listen).
//
// A 2026-07-28 caller subscribes with subscriptions/listen, whose
// subscriptions internal/listen keeps (Hub.Subscribe); [Targets] resolves
// the URIs it names in the tenant's namespace, under its rules.
//
// The package holds no state of its own but the [Keeper]'s collaborators:
// the subscriptions are in the session record, and the request is reached
// through [Request] (and [SessionRequest]), which the dispatcher
// implements.
package subscribe

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/listen"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Bounds of a session's subscriptions with one upstream session.
const (
	MaxURIs  = 128
	MaxBytes = 8 << 10
)

// MaxListen bounds the resources one subscriptions/listen may subscribe
// to; the rest are not agreed. With limits.streams_per_principal it bounds
// the upstream subscriptions one principal holds on a replica.
const MaxListen = 64

// ErrTooMany refuses a subscription past [MaxURIs] or [MaxBytes].
var ErrTooMany = jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
	"a session subscribes to at most %d resources of one upstream (%d bytes of URIs): unsubscribe from one first", MaxURIs, MaxBytes)

// Fits reports whether subs holds uri or has room for it.
func Fits(subs []string, uri string) bool {
	if slices.Contains(subs, uri) {
		return true
	}
	n := len(uri)
	for _, s := range subs {
		n += len(s)
	}
	return len(subs) < MaxURIs && n <= MaxBytes
}

// Covers reports whether an update of uri belongs to one of subs: uri is
// one of them, or a sub-resource of one (see protocol.UpdateCovers).
func Covers(subs []string, uri string) bool {
	for _, s := range subs {
		if protocol.UpdateCovers(s, uri) {
			return true
		}
	}
	return false
}

// Offered reports whether an upstream's capabilities caps offer
// resources.subscribe, in either revision.
func Offered(caps json.RawMessage) bool {
	if caps == nil {
		return false
	}
	o, err := jsonx.ParseValidObject(caps)
	if err != nil {
		return false
	}
	res, ok := o.Object("resources")
	return ok && string(res.Get("subscribe")) == "true"
}

// An Upstream is the caller's handle of an upstream (its Ref is the
// dispatcher's own).
type Upstream = listen.Upstream

// Known is what a request knows of an upstream.
type Known struct {
	// Caps are its capabilities, as the request's upstream session with
	// it (else the replica) last saw them; nil when unknown.
	Caps json.RawMessage
	// Modern is set when the request's upstream session with it is of
	// the 2026-07-28 revision.
	Modern bool
	// PerSession is set when each client has an upstream session of its
	// own, rather than one piped session all share.
	PerSession bool
}

// A Request is a request that subscribes, as this package needs it.
type Request interface {
	// Resolve returns the upstream serving the exposed uri and the URI
	// it has there, or an error when there is none the caller may see
	// (the tenant's rules, the principal's policy).
	Resolve(ctx context.Context, uri string) (Upstream, string, error)
	// Open makes sure the request has an upstream session with up,
	// opening one when it has none.
	Open(ctx context.Context, up Upstream) error
	// Known returns what the request knows of up now.
	Known(up Upstream) Known
}

// Targets returns what a 2026-07-28 subscriptions/listen of the exposed
// uris subscribes to at each upstream, in the order the upstreams are
// first named. A URI the caller may not see, whose upstream cannot be
// reached or offers no subscriptions, or past the first [MaxListen]
// distinct ones, is left out.
func Targets(ctx context.Context, rq Request, uris []string) []listen.Target {
	byUp := map[string]int{}
	var targets []listen.Target
	seen, opened := map[string]bool{}, map[string]bool{}
	for _, uri := range uris {
		if seen[uri] || len(seen) >= MaxListen {
			continue
		}
		seen[uri] = true
		up, orig, err := rq.Resolve(ctx, uri)
		if err == nil && !opened[up.Name] {
			// The upstream's revision and capabilities, known once the
			// principal's session with it is.
			opened[up.Name] = true
			err = rq.Open(ctx, up)
		}
		if err != nil {
			continue // hidden, unknown or unreachable
		}
		k := rq.Known(up)
		if !Offered(k.Caps) || !k.Modern && !k.PerSession {
			continue // not to be subscribed to
		}
		i, ok := byUp[up.Name]
		if !ok {
			i = len(targets)
			byUp[up.Name] = i
			targets = append(targets, listen.Target{Up: up, Modern: k.Modern, URIs: map[string]string{}})
		}
		targets[i].URIs[orig] = uri
	}
	return targets
}

// A SessionRequest is a session client's resources/subscribe or
// resources/unsubscribe.
type SessionRequest interface {
	Request
	Entries
	// SessionID is the gateway session whose record keeps the
	// subscriptions; "" when there is none (a 2026-07-28 caller's).
	SessionID() string
	// Relay forwards the request to up, with uri (up's own) in place of
	// the exposed one, and returns the upstream's result.
	Relay(ctx context.Context, up Upstream, uri string) (json.RawMessage, error)
}

// Entries are a request's copy of its session's upstream sessions, by
// upstream name.
type Entries interface {
	Entry(name string) (session.Upstream, bool)
	SetEntry(name string, us session.Upstream)
}

// A Store is the session store, as far as subscriptions go (see
// session.Store).
type Store interface {
	Get(ctx context.Context, id string) (*session.Record, error)
	SetUpstream(ctx context.Context, id, name, prev string, u session.Upstream) (session.Upstream, error)
}

// A Waker wakes the replica holding a session's GET stream, to read the
// record again (see listen.Hub.Wake).
type Waker interface {
	Wake(ctx context.Context, sessionID string) error
}

// A Keeper records session clients' subscriptions in their session
// records. Its methods are safe for use by multiple goroutines.
type Keeper struct {
	store Store
	wake  Waker
	log   *slog.Logger
}

// NewKeeper returns a Keeper writing to store and waking GET streams with
// wake. A nil log means no logging.
func NewKeeper(store Store, wake Waker, log *slog.Logger) *Keeper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Keeper{store: store, wake: wake, log: log}
}

// Serve serves a session client's resources/subscribe (on) or
// resources/unsubscribe (!on) of the exposed uri: the upstream serving it
// is asked, or for a 2026-07-28 upstream (which has no such method) the
// subscription is only recorded, and the session record then keeps it
// (see [Keeper.Note]).
func (k *Keeper) Serve(ctx context.Context, rq SessionRequest, uri string, on bool) (json.RawMessage, error) {
	up, orig, err := rq.Resolve(ctx, uri)
	if err != nil {
		return nil, err
	}
	if on {
		if us, _ := rq.Entry(up.Name); !Fits(us.Subscribed, orig) {
			return nil, ErrTooMany
		}
	}
	if err := rq.Open(ctx, up); err == nil {
		if kn := rq.Known(up); kn.Modern {
			// The GET stream's subscriptions/listen of the upstream asks
			// for the session's subscriptions (internal/listen).
			if !Offered(kn.Caps) {
				return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: the resource's server offers no subscriptions")
			}
			k.Note(ctx, rq.SessionID(), rq, up.Name, orig, on)
			return json.RawMessage(`{}`), nil
		}
	}
	res, err := rq.Relay(ctx, up, orig)
	if err == nil {
		// Updates come on the upstream's GET stream, and are checked
		// against the session's subscriptions (Covers).
		k.Note(ctx, rq.SessionID(), rq, up.Name, orig, on)
	}
	return res, err
}

// Note records in session sessionID's record that its client subscribed
// to (on) or unsubscribed from (!on) uri, upstream name's own, on its
// upstream session with that upstream (as rq, the request's copy, holds
// it), once the upstream accepted it; a subscription also marks the
// upstream session as having something to say (Listen). The replica
// holding the client's GET stream is woken to read the record again.
// Requests of one session may change the list concurrently, and the store
// compares only the upstream session id: the list is read fresh, and the
// change checked and made again if another overwrote it. A failure is
// logged: the client then hears nothing of uri. An empty sessionID (no
// session) records nothing.
func (k *Keeper) Note(ctx context.Context, sessionID string, rq Entries, name, uri string, on bool) {
	if sessionID == "" {
		return
	}
	cur, _ := rq.Entry(name)
	used := cur.SessionID // the session the upstream answered on
	ctx = context.WithoutCancel(ctx)
	for range 3 {
		rec, err := k.store.Get(ctx, sessionID)
		if err != nil {
			k.log.Debug("subscriptions: reading the session record", "error", err)
			return
		}
		us, ok := rec.Upstreams[name]
		// A 2026-07-28 upstream has no session: the entry holds the
		// session's subscriptions of it.
		if !ok || !upstream.IsModern(us) && (us.SessionID == "" || us.SessionID != used) {
			return // replaced meanwhile: the new upstream session holds no subscription
		}
		if slices.Contains(us.Subscribed, uri) == on && (us.Listen || !on) {
			rq.SetEntry(name, us)
			return
		}
		next := us
		if on {
			if !Fits(us.Subscribed, uri) {
				k.log.Debug("subscriptions: a concurrent subscription took the room", "upstream", name)
				return
			}
			next.Listen = true
			next.Subscribed = append(slices.Clip(us.Subscribed), uri)
		} else {
			next.Subscribed = slices.DeleteFunc(slices.Clone(us.Subscribed), func(s string) bool { return s == uri })
		}
		cur, err := k.store.SetUpstream(ctx, sessionID, name, us.SessionID, next)
		if err != nil {
			k.log.Debug("subscriptions: recording", "upstream", name, "error", err)
			return
		}
		rq.SetEntry(name, cur)
		if err := k.wake.Wake(ctx, sessionID); err != nil {
			k.log.Debug("subscriptions: waking the session's stream", "error", err)
		}
		// Another request of the session may have written its own list
		// over this one since it was read: check.
		if rec, err := k.store.Get(ctx, sessionID); err != nil || slices.Contains(rec.Upstreams[name].Subscribed, uri) == on {
			return
		}
	}
}
