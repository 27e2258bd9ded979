package gateway

import (
	"github.com/mcpgw/gateway/internal/dispatch"
	"github.com/mcpgw/gateway/internal/session"
)

// StoreOf returns g's session store, for tests that look inside it.
func StoreOf(g *Gateway) session.Store { return g.store }

// ServerOf returns g's dispatch server, for tests that call it directly
// (NotifySession, as another part of the gateway would).
func ServerOf(g *Gateway) *dispatch.Server { return g.server }
