package listen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Resource subscriptions of 2026-07-28 callers.
//
// A 2026-07-28 client subscribes to resources in its subscriptions/listen
// request (resourceSubscriptions, basic/patterns/subscriptions): the
// stream it opens is the subscription, and closing it ends it. Upstreams
// of the session-based revisions keep subscriptions per upstream session
// (resources/subscribe) and send the updates on that session's GET stream,
// so each listen stream gets upstream sessions of its own, one per
// upstream its URIs belong to, opened with the caller's identity and
// capabilities, subscribed to those URIs, and listened to until the
// client's stream closes; then they are ended. Another stream's, or
// another principal's, subscriptions never share them.
//
// A 2026-07-28 upstream is subscribed to its own way: a
// subscriptions/listen of its own per listen stream, opened as the caller,
// with the stream's URIs of that upstream in its resourceSubscriptions,
// and its acknowledgment says which it agreed to.
//
// A URI is agreed (named in the acknowledgment) when the tenant may see it
// and its upstream, offering resources.subscribe, accepted the
// subscription; the rest are left out, as the revision says of what a
// server does not support. Updates reach the stream with the URI in the
// gateway's namespace, and only for URIs agreed.

// A Subscriber is a 2026-07-28 listen stream's request, as Subscribe
// needs it.
type Subscriber interface {
	// Open opens an upstream session of the caller's own with up (its
	// identity and announced capabilities), for the stream's life.
	Open(ctx context.Context, up Upstream) (session.Upstream, error)
	// Session returns the caller's upstream session with up (a
	// 2026-07-28 upstream's: it has no session to speak of, but the
	// revision and the capabilities).
	Session(ctx context.Context, up Upstream) (session.Upstream, error)
}

// A Target is what one listen stream subscribes to at one upstream: the
// upstream's own URIs, each to its exposed one.
type Target struct {
	Up Upstream
	// Modern is set for a 2026-07-28 upstream: subscribed to with a
	// subscriptions/listen of its own, not resources/subscribe.
	Modern bool
	URIs   map[string]string
}

// subscription is one listen stream's subscriptions.
type subscription struct {
	hb  *Hub
	s   Subscriber
	c   Client
	out chan []byte
}

// Subscribe subscribes, for a 2026-07-28 listen stream (ctx, which
// carries the caller), to targets, and returns the exposed URIs agreed,
// the channel their updates come on, as notifications/resources/updated
// with the exposed URI, and stop, which ends the upstream subscriptions
// and waits. Each target holds one of the replica's upstream streams, in
// the caller's share, while it runs.
func (hb *Hub) Subscribe(ctx context.Context, s Subscriber, c Client, targets []Target) (agreed []string, msgs <-chan []byte, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sub := &subscription{hb: hb, s: s, c: c, out: make(chan []byte, Queue)}
	var mu sync.Mutex
	var wg, running sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			var run func()
			var set map[string]string
			if t.Modern {
				st, agreed, ok := sub.listenOn(ctx, t.Up, t.URIs)
				if !ok {
					return
				}
				set = agreed
				run = func() { sub.relayModernUpdates(ctx, t.Up, st, agreed) }
				defer func() {
					if run != nil { // not started
						st.Close()
					}
				}()
			} else {
				us, ok := sub.subscribeOn(ctx, t.Up, t.URIs)
				if !ok {
					return
				}
				set = t.URIs
				run = func() { sub.relayUpdates(ctx, t.Up, us, t.URIs) }
				defer func() {
					if run != nil {
						sub.end(ctx, t.Up, us)
					}
				}()
			}
			mu.Lock()
			for _, uri := range set {
				agreed = append(agreed, uri)
			}
			mu.Unlock()
			running.Add(1)
			f := run
			if hb.goOwned(func(owned context.Context) {
				defer running.Done()
				defer context.AfterFunc(owned, cancel)()
				f()
			}) {
				run = nil
				return
			}
			running.Done()
			hb.Give(c.Who.Principal, c.Who.Tenant)
		})
	}
	wg.Wait()
	return agreed, sub.out, func() {
		cancel()
		running.Wait()
	}
}

// subscribeOn opens an upstream session of the caller's with up and
// subscribes it to the URIs of set (the upstream's own). It reports false,
// having ended the session, if the upstream refused any, or could not be
// reached, or the replica holds as many upstream streams as it may.
func (sub *subscription) subscribeOn(ctx context.Context, up Upstream, set map[string]string) (session.Upstream, bool) {
	if !sub.hb.Take(sub.c.Who.Principal, sub.c.Who.Tenant, sub.c.Limits) {
		return session.Upstream{}, false
	}
	us, err := sub.s.Open(ctx, up)
	if err != nil || upstream.IsModern(us) {
		sub.hb.Give(sub.c.Who.Principal, sub.c.Who.Tenant)
		if err == nil {
			sub.end(ctx, up, us)
		}
		return session.Upstream{}, false
	}
	n := 0
	for orig := range set {
		n++
		params, _ := json.Marshal(map[string]string{"uri": orig})
		resp, err := up.Client.Call(ctx, us, jsonrpc.StringID("sub."+strconv.Itoa(n)), protocol.MethodResourcesSubscribe, params)
		if err == nil {
			_, err = resp.Result()
			resp.Close()
		}
		if err != nil {
			sub.hb.log.Debug("subscribing for a 2026-07-28 listen", "upstream", up.Name, "error", err)
			sub.hb.Give(sub.c.Who.Principal, sub.c.Who.Tenant)
			sub.end(ctx, up, us)
			return session.Upstream{}, false
		}
	}
	return us, true
}

// relayUpdates relays the resources/updated notifications of upstream
// session us for the URIs of set to the stream, until ctx ends, then ends us.
// The stream is opened again, with backoff, if it breaks (updatesOnce).
func (sub *subscription) relayUpdates(ctx context.Context, up Upstream, us session.Upstream, set map[string]string) {
	defer sub.hb.Give(sub.c.Who.Principal, sub.c.Who.Tenant)
	defer sub.end(ctx, up, us)
	sub.hb.metrics.UpstreamStream(1)
	defer sub.hb.metrics.UpstreamStream(-1)
	var b upstream.Backoff
	for ctx.Err() == nil {
		start := time.Now()
		sub.updatesOnce(ctx, up, us, set)
		if !b.Wait(ctx, start) {
			return
		}
	}
}

// updatesOnce opens the stream of upstream session us and relays the
// resources/updated notifications of the URIs of set (the upstream's own
// URI to the exposed one) to out, until the stream ends.
func (sub *subscription) updatesOnce(ctx context.Context, up Upstream, us session.Upstream, set map[string]string) {
	st, err := up.Client.Watch(ctx, us)
	if err != nil {
		return
	}
	defer st.Close()
	defer context.AfterFunc(ctx, func() { st.Close() })()
	for {
		msg, _, err := st.Next()
		if err != nil {
			return
		}
		if msg.Kind != jsonrpc.KindNotification || msg.Method != protocol.NotifyResourceUpdated {
			continue // log messages, requests: this session asked for none
		}
		sub.forwardUpdate(msg, set)
	}
}

// listenOn opens, for the caller, a subscriptions/listen of
// 2026-07-28 upstream up with the URIs of set (the upstream's own to the
// exposed ones) and waits for its acknowledgment, at most OpenWait. It
// returns the stream and the URIs the upstream agreed to, or false, having
// closed the stream, if it agreed to none, could not be reached, or the
// replica holds as many upstream streams as it may. The stream holds one
// of them until relayModernUpdates ends.
func (sub *subscription) listenOn(ctx context.Context, up Upstream, set map[string]string) (*upstream.Stream, map[string]string, bool) {
	if !sub.hb.Take(sub.c.Who.Principal, sub.c.Who.Tenant, sub.c.Limits) {
		return nil, nil, false
	}
	st, agreed, err := sub.listenOnce(ctx, up, set)
	if err != nil {
		sub.hb.log.Debug("subscribing a 2026-07-28 upstream for a listen", "upstream", up.Name, "error", err)
		sub.hb.Give(sub.c.Who.Principal, sub.c.Who.Tenant)
		return nil, nil, false
	}
	return st, agreed, true
}

// listenOnce opens up's subscriptions/listen for the URIs of set and
// reads its acknowledgment: the subset of set it agreed to.
func (sub *subscription) listenOnce(ctx context.Context, up Upstream, set map[string]string) (*upstream.Stream, map[string]string, error) {
	us, err := sub.s.Session(ctx, up)
	if err != nil {
		return nil, nil, err
	}
	origs := slices.Sorted(maps.Keys(set))
	filter, _ := json.Marshal(map[string][]string{"resourceSubscriptions": origs})
	st, err := up.Client.Listen(ctx, us, filter)
	if err != nil {
		return nil, nil, err
	}
	// The acknowledgment is the stream's first message: a stream that
	// sends none within OpenWait is given up.
	wait, cancel := context.WithTimeout(ctx, OpenWait)
	defer cancel()
	stop := context.AfterFunc(wait, func() { st.Close() })
	msg, _, err := st.Next()
	if !stop() {
		err = errors.Join(err, errors.New("no acknowledgment in time"))
	}
	if err == nil && (msg.Kind != jsonrpc.KindNotification || msg.Method != protocol.NotifySubscriptionsAcknowledged) {
		err = fmt.Errorf("the stream began with %s, not its acknowledgment", msg.Method)
	}
	var agreed map[string]string
	if err == nil {
		var p struct {
			Notifications struct {
				ResourceSubscriptions []string `json:"resourceSubscriptions"`
			} `json:"notifications"`
		}
		if json.Unmarshal(msg.Params, &p) != nil {
			err = errors.New("a malformed acknowledgment")
		}
		for _, orig := range p.Notifications.ResourceSubscriptions {
			if exposed, ok := set[orig]; ok {
				if agreed == nil {
					agreed = map[string]string{}
				}
				agreed[orig] = exposed
			}
		}
		if err == nil && len(agreed) == 0 {
			err = errors.New("no resource agreed")
		}
	}
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, agreed, nil
}

// relayModernUpdates relays the resources/updated notifications of
// 2026-07-28 upstream up's listen stream st for the URIs of set to out,
// until ctx ends; the stream is opened again, with backoff, if it breaks,
// for the same URIs, of which the upstream may then agree to fewer.
func (sub *subscription) relayModernUpdates(ctx context.Context, up Upstream, st *upstream.Stream, set map[string]string) {
	defer sub.hb.Give(sub.c.Who.Principal, sub.c.Who.Tenant)
	sub.hb.metrics.UpstreamStream(1)
	defer sub.hb.metrics.UpstreamStream(-1)
	agreed := set
	var b upstream.Backoff
	for {
		start := time.Now()
		if st != nil {
			sub.modernUpdatesOnce(ctx, st, agreed)
			st.Close()
			st = nil
		}
		if !b.Wait(ctx, start) {
			return
		}
		var err error
		if st, agreed, err = sub.listenOnce(ctx, up, set); err != nil {
			sub.hb.log.Debug("re-subscribing a 2026-07-28 upstream for a listen", "upstream", up.Name, "error", err)
		}
	}
}

// modernUpdatesOnce relays the updates of st for the URIs of set (the
// upstream's own URI to the exposed one) to out, until the stream or ctx
// ends.
func (sub *subscription) modernUpdatesOnce(ctx context.Context, st *upstream.Stream, set map[string]string) {
	defer context.AfterFunc(ctx, func() { st.Close() })()
	for {
		msg, _, err := st.Next()
		if err != nil {
			return
		}
		if msg.Kind != jsonrpc.KindNotification || msg.Method != protocol.NotifyResourceUpdated {
			continue // nothing else was asked for
		}
		sub.forwardUpdate(msg, set)
	}
}

// forwardUpdate queues an update of a subscribed resource for a listen
// stream: its URI (the upstream's own) exposed by set, dropped if set has
// none for it, or if the client is not reading.
func (sub *subscription) forwardUpdate(msg *jsonrpc.Message, set map[string]string) {
	p, err := jsonx.ParseValidObject(msg.Params)
	if err != nil {
		return
	}
	orig, _ := p.GetString("uri")
	exposed, ok := set[orig]
	if !ok {
		return
	}
	params, _ := json.Marshal(map[string]string{"uri": exposed})
	select {
	case sub.out <- jsonrpc.AppendRequest(nil, jsonrpc.ID{}, msg.Method, params):
	default: // the client is not reading: an update queued already says as much
		sub.hb.metrics.LimitRejection(telemetry.LimitStreamQueue, sub.c.Who.Tenant)
	}
}

// endSubscription ends upstream session us, bounded in time whatever
// happened to ctx.
func (sub *subscription) end(ctx context.Context, up Upstream, us session.Upstream) {
	if us.SessionID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replyTimeout)
	defer cancel()
	_ = up.Client.Terminate(ctx, us)
}
