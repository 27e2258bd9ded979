package gateway

import (
	"github.com/mcpgw/gateway/internal/dispatch"
	"github.com/mcpgw/gateway/internal/session"
)

// StoreOf returns g's session store, for tests that look inside it.
func StoreOf(g *Gateway) session.Store { return g.stores.Sessions }

// ServerOf returns g's dispatch server, for tests that call it directly
// (NotifySession, as another part of the gateway would).
func ServerOf(g *Gateway) *dispatch.Server { return g.server }

// EventLogOf returns g's event log, for tests that look inside it.
func EventLogOf(g *Gateway) session.EventLog { return g.stores.Events }

// DrainStreams does what a drain does to g's server-to-client streams once
// its drain delay is over (see Run).
func DrainStreams(g *Gateway) { g.edge.Drain() }
