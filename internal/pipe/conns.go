package pipe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
)

// The Handler's Conns: dialed and initialized once for the sessions that
// share them (per tenant, per principal or per session, see Isolation),
// bounded by the process limit and its shares, evicted when the limit
// needs room, reaped when idle, stopped when they fail.

// conn returns the live Conn of key, starting one if there is none.
func (h *Handler) conn(ctx context.Context, r *http.Request, key, tenant, principal string) (*uconn, int, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, http.StatusServiceUnavailable, errors.New("shutting down")
		}
		if c := h.conns[key]; c != nil {
			h.mu.Unlock()
			select {
			case <-c.ready:
			case <-ctx.Done():
				return nil, http.StatusServiceUnavailable, context.Cause(ctx)
			}
			if c.dialErr != nil {
				return nil, http.StatusBadGateway, c.dialErr
			}
			select {
			case <-c.dead:
				// Its reader is removing it; try again.
				time.Sleep(10 * time.Millisecond)
				continue
			default:
				return c, 0, nil
			}
		}
		c := &uconn{h: h, key: key, tenant: tenant, principal: principal, ready: make(chan struct{}), initDone: make(chan struct{}),
			dead: make(chan struct{}), released: make(chan struct{}),
			pending: make(map[int64]*call), progress: make(map[string]*call), streams: make(map[*hsession]chan []byte),
			sessions: make(map[string]*hsession), principals: make(map[string]int), subs: make(map[string]int),
			asked: make(map[string]*hsession), lastUsed: time.Now()}
		limit, victim := h.pool.admit(c, h.opts.MaxConns, h.opts.PrincipalConns, h.opts.TenantConns)
		if limit == "" {
			if limit, victim = h.opts.Limit.admit(c); limit != "" {
				h.pool.remove(c)
				limit = map[string]string{limitPool: LimitTotal, limitPrincipal: LimitTotalPrincipal, limitTenant: LimitTotalTenant}[limit]
			}
		} else {
			limit = map[string]string{limitPool: LimitMaxConns, limitPrincipal: LimitPrincipalConns, limitTenant: LimitTenantConns}[limit]
		}
		if limit != "" {
			h.mu.Unlock()
			if victim != nil {
				// Make room, then try again: another newcomer may
				// take the room first, and then this one makes more.
				if err := h.evict(ctx, victim, limit); err != nil {
					return nil, http.StatusServiceUnavailable, err
				}
				continue
			}
			h.limited(limit, tenant)
			return nil, http.StatusServiceUnavailable, h.limitErr(limit)
		}
		h.conns[key] = c
		var wait time.Duration
		if b := h.backoff[tenant]; b != nil {
			wait = time.Until(b.notBefore)
		}
		h.mu.Unlock()
		err := c.dial(ctx, r, wait)
		if err != nil {
			h.mu.Lock()
			delete(h.conns, key)
			h.mu.Unlock()
			h.release(c)
			c.dialErr = err
			close(c.dead)
			close(c.ready)
			return nil, http.StatusBadGateway, err
		}
		close(c.ready)
		return c, 0, nil
	}
}

// evict stops victim, an idle Conn of this Handler or of another sharing
// the Limit, to make room for a newcomer refused by limit, and waits
// until it no longer counts in the bounds.
func (h *Handler) evict(ctx context.Context, victim *uconn, limit string) error {
	h.log.Info("stopping an idle upstream server to make room", "tenant", victim.tenant, "limit", limit)
	victim.h.stopConn(victim)
	select {
	case <-victim.released:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// release uncounts c from the bounds.
func (h *Handler) release(c *uconn) {
	h.mu.Lock()
	counted := h.pool.remove(c)
	h.mu.Unlock()
	if counted {
		h.opts.Limit.release(c)
		close(c.released)
	}
}

// limitErr is the error of a session refused by limit.
func (h *Handler) limitErr(limit string) error {
	switch limit {
	case LimitMaxConns:
		return fmt.Errorf("upstream %s runs its maximum of %d processes", h.opts.Name, h.opts.MaxConns)
	case LimitPrincipalConns:
		return fmt.Errorf("upstream %s runs its maximum of %d processes for one user, none of them idle", h.opts.Name, h.opts.PrincipalConns)
	case LimitTenantConns:
		return fmt.Errorf("upstream %s runs its maximum of %d processes for one tenant, none of them idle", h.opts.Name, h.opts.TenantConns)
	case LimitTotalPrincipal:
		return errors.New("the gateway runs its maximum of stdio processes for one user, none of them idle")
	case LimitTotalTenant:
		return errors.New("the gateway runs its maximum of stdio processes for one tenant, none of them idle")
	}
	return errors.New("the gateway runs its maximum of stdio processes, none of them idle")
}

// limited tells OnLimit.
func (h *Handler) limited(limit, tenant string) {
	if h.opts.OnLimit != nil {
		h.opts.OnLimit(limit, tenant)
	}
}

// dial waits out the backoff, opens the Conn and starts its reader.
func (c *uconn) dial(ctx context.Context, r *http.Request, wait time.Duration) error {
	h := c.h
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-h.stop:
			return errors.New("shutting down")
		}
	}
	conn, err := h.opts.Dial(ctx, r, c.tenant)
	if err != nil {
		return err
	}
	c.conn, c.start = conn, time.Now()
	h.mu.Lock()
	h.stats.noteStart(c.tenant)
	h.mu.Unlock()
	if h.opts.OnConn != nil {
		h.opts.OnConn(1, false)
	}
	h.wg.Add(1)
	go c.read()
	return nil
}

// init initializes the Conn with params, the first initialize's, and sends
// notifications/initialized.
func (c *uconn) init(ctx context.Context, params json.RawMessage) {
	defer close(c.initDone)
	// Detached: other sessions may be waiting for this initialize.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	cl := &call{final: make(chan []byte, 1), msgs: make(chan []byte, queueLen)}
	id := c.register(cl, nil)
	if err := c.conn.Send(ctx, jsonrpc.AppendRequest(nil, jsonrpc.IntID(id), protocol.MethodInitialize, params)); err != nil {
		c.unregister(id, cl)
		c.initErr = c.gone(err)
		c.h.stopConn(c)
		return
	}
	var raw []byte
	select {
	case raw = <-cl.final:
	case <-ctx.Done():
		c.unregister(id, cl)
		c.initErr = errors.New("no answer to initialize")
		c.h.stopConn(c)
		return
	}
	m, err := jsonrpc.Decode(raw)
	switch {
	case err != nil:
		c.initErr = err
	case m.Kind == jsonrpc.KindErrorResponse:
		c.initErr = m.Error
	default:
		c.initRes = m.Result
	}
	if c.initErr != nil {
		c.h.stopConn(c)
		return
	}
	if err := c.conn.Send(ctx, jsonrpc.AppendRequest(nil, jsonrpc.ID{}, protocol.NotifyInitialized, nil)); err != nil {
		c.initErr = c.gone(err)
		c.h.stopConn(c)
	}
}

// gone returns why the Conn ended if a write failed with err because it
// did (the process exited: its exit status says more than the write), else
// err.
func (c *uconn) gone(err error) error {
	t := time.NewTimer(exitWait + 100*time.Millisecond)
	defer t.Stop()
	select {
	case <-c.dead:
		if c.why != nil {
			return fmt.Errorf("the server is gone: %w", c.why)
		}
	case <-t.C:
	}
	return err
}

// stopConn stops c; its reader then removes it.
func (h *Handler) stopConn(c *uconn) {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	h.mu.Lock()
	if h.conns[c.key] == c {
		// No new session joins it.
		delete(h.conns, c.key)
	}
	h.mu.Unlock()
	_ = c.conn.Close()
}

// reapIdle stops the Conns idle for longer than IdleTimeout.
func (h *Handler) reapIdle() {
	defer h.wg.Done()
	every := min(max(h.opts.IdleTimeout/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		h.mu.Lock()
		var idle []*uconn
		for _, c := range h.conns {
			c.mu.Lock()
			if isClosed(c.ready) && c.dialErr == nil && len(c.pending) == 0 && len(c.streams) == 0 && time.Since(c.lastUsed) > h.opts.IdleTimeout {
				idle = append(idle, c)
			}
			c.mu.Unlock()
		}
		h.mu.Unlock()
		for _, c := range idle {
			h.log.Info("stopping idle upstream server", "tenant", c.tenant)
			h.stopConn(c)
		}
	}
}

// Conns returns how many Conns run.
func (h *Handler) Conns() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pool.n
}
