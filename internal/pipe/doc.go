// Package pipe serves an MCP server that speaks over a message pipe (a
// local program over stdio, or a 2024-11-05 HTTP+SSE server) as a
// Streamable HTTP endpoint (protocol 2025-11-25), so that the gateway's
// one Streamable HTTP client, internal/upstream, reaches every kind of
// upstream and nothing above it changes: policy, namespacing, credentials,
// audit, metrics and the relay see an upstream like any other.
//
//	upstream.Client --HTTP--> [Transport] --in process--> [Handler]
//	                                                         |
//	              one Conn per isolation key (tenant, session, or shared)
//	                                                         |
//	                                    [Process] (stdio)  or an SSE Conn
//
// The same [Handler] is what `gateway bridge` serves on the network: one
// stdio server, run as a pod of its own, reached as a Streamable HTTP
// upstream.
//
// # Sessions over one connection
//
// A stdio server is one MCP session: it is initialized once. The Handler
// initializes each Conn itself with the first initialize it gets for it,
// answers every later one with the same result, and gives each its own
// Mcp-Session-Id. Requests of all the sessions of a Conn share it: their
// ids (and progress tokens) are replaced by ones unique on the Conn and
// restored in what comes back. Progress goes to the request whose token it
// carries. A notification or a request of the server that belongs to no
// request it can tell goes to the only request in flight on the Conn, if
// there is one, else to the sessions' GET streams.
//
// When a Conn ends (the process exited, the SSE stream broke), its requests
// in flight fail with a JSON-RPC error naming the upstream, and its
// sessions are forgotten: the client's next request gets 404 and it
// initializes again, which starts a new Conn (after a backoff if the last
// one ended soon after it started).
//
// # Bounds
//
// Every Conn, goroutine and buffer has an owner that waits for it:
//   - Conns are bounded per Handler (Options.MaxConns) and across Handlers
//     (Options.Limit); an initialize beyond either fails with 503.
//   - Each Conn has one reader goroutine, owned by the Handler, which
//     [Handler.Close] stops and waits for.
//   - Messages queued for one request or one GET stream are bounded
//     (queueLen); beyond that notifications are dropped, never the
//     response.
//   - Sessions per Conn are bounded (maxSessions), the least recently used
//     one forgotten first.
//   - A Process bounds its stdout lines (Options.MaxMessageBytes), its
//     stderr lines (maxStderrLine) and the rate at which they are logged.
package pipe
