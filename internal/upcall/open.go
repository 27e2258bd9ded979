package upcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// An Opener opens the upstream sessions of gateway sessions. Opening is
// deduplicated per replica with singleflight and across replicas by the
// store's compare-and-swap: the loser of a race ends the session it
// opened and uses the winner's. Its methods may be called concurrently.
type Opener struct {
	store  session.Store
	opened func(name string, res *upstream.InitResult)
	log    *slog.Logger
	sf     singleflight.Group
}

// NewOpener returns an Opener that stores the sessions it opens in store.
// opened, if not nil, is told what each session opened says of its
// upstream (its capabilities, its instructions). log, if nil, means no
// logging.
func NewOpener(store session.Store, opened func(name string, res *upstream.InitResult), log *slog.Logger) *Opener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Opener{store: store, opened: opened, log: log}
}

// OpenAll opens a session with each of cs, announced caps, all at once,
// for a gateway session whose record is not stored yet (its creator
// stores them). done, if not nil, is told how each went; one that failed
// is left out of the returned map, by upstream name.
func (o *Opener) OpenAll(ctx context.Context, cs []*upstream.Client, caps json.RawMessage, done func(name string, err error)) map[string]session.Upstream {
	var mu sync.Mutex
	out := make(map[string]session.Upstream, len(cs))
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			res, err := c.OpenAs(ctx, caps)
			if done != nil {
				done(c.Name(), err)
			}
			if err != nil {
				return
			}
			if o.opened != nil {
				o.opened(c.Name(), res)
			}
			mu.Lock()
			out[c.Name()] = res.Session
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// Complete completes the record of a new gateway session, rec, created in
// the store already: it opens sessions with cs as OpenAll does, stores
// them, and sets rec.Upstreams to what the store holds. The sessions are
// stored concurrently, as they were opened: the latency of one store
// round trip, not of one per upstream; each compare-and-swaps from
// nothing, as only the caller knows rec's id. When one cannot be stored,
// Complete deletes rec from the store (an id whose record could not be
// completed is never handed out), sets rec.Upstreams to every session it
// opened, for the caller to end, and returns the error.
func (o *Opener) Complete(ctx context.Context, rec *session.Record, cs []*upstream.Client, caps json.RawMessage, done func(name string, err error)) error {
	opened := o.OpenAll(ctx, cs, caps, done)
	rec.Upstreams = make(map[string]session.Upstream, len(opened))
	var mu sync.Mutex
	var failed error
	var wg sync.WaitGroup
	for name, us := range opened {
		wg.Go(func() {
			cur, err := o.store.SetUpstream(ctx, rec.ID, name, "", us)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = fmt.Errorf("storing upstream session %s: %w", name, err)
				return
			}
			rec.Upstreams[name] = cur
		})
	}
	wg.Wait()
	if failed != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TerminateTimeout)
		_ = o.store.Delete(dctx, rec.ID)
		cancel()
		rec.Upstreams = opened
	}
	return failed
}

// Open opens a session with upstream c for gateway session id, announced
// caps, to replace the one with id prev ("" when there is none), and
// stores it. It returns the session the store holds then: the one it
// opened, or another replica's.
func (o *Opener) Open(ctx context.Context, id string, c *upstream.Client, caps json.RawMessage, prev string) (session.Upstream, error) {
	name := c.Name()
	v, err, _ := o.sf.Do(id+"\x00"+name+"\x00"+prev, func() (any, error) {
		// Detached: the session outlives the request that happened to open
		// it, and other requests may be waiting on this one.
		ctx := context.WithoutCancel(ctx)
		res, err := c.OpenAs(ctx, caps)
		if err != nil {
			return nil, err
		}
		if o.opened != nil {
			o.opened(name, res)
		}
		cur, err := o.store.SetUpstream(ctx, id, name, prev, res.Session)
		switch {
		case err == nil:
			return res.Session, nil
		case errors.Is(err, session.ErrConflict):
			// Another replica got there first: use its session, end ours.
			if tErr := c.Terminate(ctx, res.Session); tErr != nil {
				o.log.Warn("terminating duplicate upstream session", "upstream", name, "error", tErr)
			}
			return cur, nil
		default:
			_ = c.Terminate(ctx, res.Session)
			return nil, err
		}
	})
	if err != nil {
		return session.Upstream{}, err
	}
	return v.(session.Upstream), nil
}
