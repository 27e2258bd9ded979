// Package dispatch is the method table and the one request pipeline: it
// serves MCP methods for the transport, for a tenant whose upstreams it
// presents as one server.
//
// It holds the table (table.go: each method's handler and facts), the
// handlers, the pipeline around them (pipeline.go: consent, observation,
// tool failures as results), the swap of the configuration in force
// (reload.go; a generation is built by internal/generation), and the
// adapters through which each capability that lives in a package of its
// own sees a request: internal/subscribe (subscribe.go), internal/listen
// (listen.go), internal/tasks (tasks.go), internal/watch (watch.go),
// internal/relay (relay.go implements its Hop), internal/toolsearch
// (search.go), internal/policy, internal/guard, internal/budget and
// internal/credentials. One request to an upstream (its session, span and
// answer) is internal/upcall's; what a served request leaves (span,
// metrics, audit) internal/observe's; names, listings and namespaces
// internal/catalog's; requests for input between revisions
// internal/bridge's. It never speaks HTTP: statuses, headers and bodies
// are the transport's, reached through [Out].
//
// A tools/call, top to bottom:
//
//	transport.Handler ── Request, Method ──► Server.Serve (timeout, cancellation)
//	  └► Method.handle: answered ∘ observed ∘ consented ∘ callTool
//	       callTool: catalog.Resolve, policy, scopes, fixed arguments,
//	                 guards, schema (catalog.Item.ValidateArguments)
//	       relay: budget.Engine.Call → relay.Relayer.Relay
//	                 → upcall.Hop.Call (budget.Pass) → upstream.Client
//	                 ← notifications to Out.Event; requests for input to bridge
//	       the result: tasks, output schema, guards, catalog.ExposeToolResult
//	  └► observe.Served.Record: span, metrics, audit; the result to Out
//
// Sessions: initialize stores a [session.Record] (where the caps on
// sessions are enforced), then opens one upstream session per upstream
// the tenant may use (upcall.Opener.Complete); any replica holding the
// same store serves the next request. A 2026-07-28 caller has no session:
// the gateway keeps a record per principal instead (stateless.go).
//
// Goroutines: a request's end with it. Those that outlive one (a parked
// call's pump, a replaced generation's release, listeners, expiries) are
// started through the Server's own.Group, which Close ends and waits for;
// list walks are the catalog's and watches internal/watch's, with the same
// contract.
//
// Params and results stay raw JSON: dispatch rewrites only the member it
// routes on (a name, a URI). The client's request id never reaches the
// upstream.
package dispatch
