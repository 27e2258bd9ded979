// Package dispatch serves MCP methods for the transport: it aggregates a
// tenant's upstreams behind one MCP server.
//
// It owns the method table (table.go: each method's handler and its facts),
// the methods themselves, the session lifecycle behind the HTTP one
// (initialize's record and upstream sessions, their end), which upstream
// session a request goes on and what it sends there (budgets, credentials,
// params), the config snapshot a request is served with and its swap
// on reload (a snapshot is built by internal/generation), the watches that keep the catalog fresh,
// readiness, and what each request leaves in spans, metrics and the audit
// log.
//
// Capabilities of their own live in packages that own their state, each
// reached through a narrow interface of its own that a file here
// implements for a request: resource subscriptions are internal/subscribe's
// (subscribe.go), what reaches a session outside a request
// internal/listen's (listen.go), what an upstream is told of its client
// internal/announce's, the relay of an upstream's answer to the client
// internal/relay's (relay.go implements its Hop), one request to an
// upstream (its id, span, answer, the upstream session opened or ended
// for it) internal/upcall's, the upstreams' instructions
// internal/instructions', what is known of capabilities internal/capset's, the
// JSON-RPC code and HTTP status of a method's error internal/rpcerr's;
// the guards, the policy rules and a tenant's presentation are applied to
// a request by internal/guard, internal/policy and internal/catalog.
//
// A request path, top to bottom:
//
//	transport ── Request, Method ──► Server.Serve
//	                                   │ span, timeout, cancellation
//	                                   ▼
//	                                 the method (table.go)
//	                                   │ lists: catalog.Merge of the tenant's listings
//	                                   │ calls: catalog.Resolve → the owning upstream
//	                                   ▼
//	                                 relay.Relayer.Relay ──► upcall ──► upstream.Client
//	                                   │ notifications → Out.Event, as they arrive
//	                                   │ requests for input → bridge
//	                                   ▼
//	                                 observe: metrics, audit; the result → Out
//
// It must not speak HTTP: statuses, headers and bodies are the transport's
// (an error the transport answers at the HTTP level goes through
// [Out.Refuse]). It must not decide what a name means: listing, merging,
// resolving and namespacing are the catalog's. Requests for input between
// revisions are the bridge's.
//
// # Sessions
//
// initialize creates a [session.Record] and opens one upstream session per
// upstream the tenant may use; their Mcp-Session-Ids live in the record, so
// any replica holding the same store can serve the next request. An upstream
// that forgot its session (404) is re-initialized transparently and the new
// id is stored with compare-and-swap. A 2026-07-28 caller has no session:
// the gateway keeps a record per principal instead (stateless.go).
//
// # Tasks
//
// A task an upstream creates on a tools/call is recorded in the session
// store's [session.TaskStore] under an id of the gateway's, bound to the
// principal, and its tasks/* requests are routed to the upstream session
// that created it (tasks.go).
//
// # Pass-through
//
// Params and results stay raw JSON; dispatch rewrites only the member it
// routes on (a name, a URI) and leaves every other byte alone. The client's
// request id never reaches the upstream; the upstream sees "c.<id>" and the
// response gets the client's id back, byte for byte.
package dispatch
