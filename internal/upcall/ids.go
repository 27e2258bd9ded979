package upcall

import (
	"strconv"
	"sync/atomic"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// IDs makes the ids of the requests the gateway sends upstream on its own
// account. Client requests travel as "c.<id>" (see ForwardID), so the two
// never collide. Replicas share upstream sessions through the store, so
// the ids are unique across replicas too: a random per-process part, then
// a counter. Its methods may be called concurrently.
type IDs struct {
	prefix string
	n      atomic.Uint64
}

// NewIDs returns IDs whose per-process part is prefix (random, and the
// same for no two processes).
func NewIDs(prefix string) *IDs { return &IDs{prefix: prefix} }

// Internal returns a fresh id for a request the gateway itself sends
// upstream.
func (g *IDs) Internal() jsonrpc.ID { return g.next("g.") }

// Stateless returns the id a 2026-07-28 client's request travels upstream
// with: unique, as Internal's, and told apart from them.
func (g *IDs) Stateless() jsonrpc.ID { return g.next("s.") }

// next returns kind, the random per-process part, then a counter.
func (g *IDs) next(kind string) jsonrpc.ID {
	return jsonrpc.StringID(kind + g.prefix + "." + strconv.FormatUint(g.n.Add(1), 10))
}

// ForwardID is the id a session client's request travels upstream with.
// It is a pure function of the client's id, so any replica can name the
// upstream request (to cancel it, for one) without shared state.
func ForwardID(id jsonrpc.ID) jsonrpc.ID { return jsonrpc.StringID("c." + id.String()) }
