// Package backend builds, once, where the gateway keeps what outlives a
// request: session records, resumable event logs, tasks, mailboxes, the
// session bus, budget counters and the users' token vault. Every part is
// of one kind, chosen by sessions.store: in this process (memory, one
// replica) or in Redis (shared by every replica). The gateway builds one
// Backend, hands each part to what needs it, and closes it last.
package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/vault"
)

// A Backend is the gateway's stores, of one kind.
type Backend struct {
	Sessions session.Store
	Events   session.EventLog
	Tasks    session.TaskStore
	// Mailbox passes messages between requests, on any replica; nil if
	// the store has none.
	Mailbox session.Mailbox
	Bus     session.Bus
	Budgets budget.Store
	Vault   vault.Store

	// Ping reports whether the shared store answers; nil for memory.
	Ping func(context.Context) error
	// closers close what New opened, last opened first.
	closers []func() error
}

// Options are what the stores tell the rest of the gateway.
type Options struct {
	Logger  *slog.Logger
	Metrics *telemetry.Metrics
	// OnExpire, if set, is told of each session record the memory store
	// expires or evicts (Redis expires records on its own): it ends their
	// upstream sessions. It must not block.
	OnExpire func(*session.Record)
}

// New builds the backend of cfg, which must be valid with defaults
// applied. It does not connect to Redis: connections are made on first
// use, and Ping reports when Redis is up.
func New(cfg *config.Config, opts Options) (*Backend, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := opts.Metrics
	b := &Backend{}
	ev := cfg.Sessions.Events
	evLimits := session.EventLimits{
		EventsPerStream: ev.PerStream, BytesPerStream: ev.BytesPerStream, TTL: ev.TTL.D(),
		StreamsPerSession: ev.StreamsPerSession, MaxStreams: ev.MaxStreams, MaxBytes: ev.MaxBytes,
		MaxStreamsPerPrincipal: ev.MaxStreamsPerPrincipal, MaxStreamsPerTenant: ev.MaxStreamsPerTenant,
		MaxBytesPerPrincipal: ev.MaxBytesPerPrincipal, MaxBytesPerTenant: ev.MaxBytesPerTenant,
	}
	busOpts := session.BusOptions{OnDrop: func() { m.LimitRejection(telemetry.LimitBusQueue, "") }}
	switch cfg.Sessions.Store {
	case config.StoreRedis:
		// Records expire inside Redis; their upstream sessions expire on
		// the upstreams' own schedule.
		rs, err := session.NewRedis(cfg.Sessions.Redis, session.RedisOptions{
			IdleTTL: cfg.Sessions.IdleTTL.D(), Logger: log,
			MaxPerPrincipal: cfg.Sessions.MaxPerPrincipal, MaxPerTenant: cfg.Sessions.MaxPerTenant,
			MailboxMessages: cfg.Sessions.MailboxMessages, MailboxBytes: cfg.Sessions.MailboxBytes,
		})
		if err != nil {
			return nil, err
		}
		b.Sessions, b.Mailbox, b.Ping = rs, rs, rs.Ping
		b.closers = append(b.closers, rs.Close)
		events := session.NewRedisEvents(rs, evLimits)
		b.Events = events
		b.closers = append(b.closers, events.Close)
		b.Tasks = rs.TaskStore()
		bus := session.NewRedisBus(rs, busOpts)
		b.Bus = bus
		b.closers = append(b.closers, bus.Close)
		b.Budgets = budget.NewRedis(rs.Client(), rs.KeyPrefix(), rs.CallTimeout())
		b.Vault = vault.NewRedis(rs.Client(), rs.KeyPrefix(), rs.CallTimeout(), credentials.VaultLimits(cfg))
	default:
		// Sessions that expire in the store end their upstream sessions
		// too. The hook runs in the store's sweeper: OnExpire only
		// queues the work.
		ms := session.NewMemory(session.MemoryOptions{
			IdleTTL:         cfg.Sessions.IdleTTL.D(),
			MaxSessions:     cfg.Sessions.MaxSessions,
			MaxPerPrincipal: cfg.Sessions.MaxPerPrincipal,
			MaxPerTenant:    cfg.Sessions.MaxPerTenant,
			MailboxMessages: cfg.Sessions.MailboxMessages,
			MailboxBytes:    cfg.Sessions.MailboxBytes,
			OnExpire:        opts.OnExpire,
			// A session evicted from the full store (its upstream
			// sessions were ended by OnExpire) counts at max_sessions,
			// for the tenant that lost it.
			OnEvict: func(p session.Principal) { m.LimitRejection(telemetry.LimitSessions, p.Tenant) },
		})
		m.SetSessionsActiveFunc(ms.Len)
		b.Sessions, b.Mailbox = ms, ms
		b.closers = append(b.closers, ms.Close)
		b.Events = session.NewMemoryEvents(evLimits, nil)
		b.Tasks = session.NewMemoryTasks(nil)
		bus := session.NewMemoryBus(busOpts)
		b.Bus = bus
		b.closers = append(b.closers, bus.Close)
		b.Budgets = budget.NewMemory(0)
		b.Vault = vault.NewMemory(credentials.VaultLimits(cfg))
	}
	// Budgets may have a Redis of their own, with either session store.
	if r := cfg.Budgets.Redis; r != nil {
		rc, err := session.NewRedisClient(*r)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("budgets.redis: %w", err)
		}
		b.Budgets = budget.NewRedis(rc.Client, rc.Prefix, rc.CallTimeout)
		b.closers = append(b.closers, rc.Client.Close)
	}
	return b, nil
}

// Close closes every store New opened, last opened first. The gateway
// calls it once nothing uses them any more.
func (b *Backend) Close() error {
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		errs = append(errs, b.closers[i]())
	}
	b.closers = nil
	return errors.Join(errs...)
}
