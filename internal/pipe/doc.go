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
// restored in what comes back.
//
// The sessions of a Conn may be several principals' (isolation shared, or
// several users of a tenant), and the server cannot say for which session
// it sends what is not a response. So what it sends goes only where the
// protocol says it belongs (route.go), never to some session by guess:
// progress to the request whose token it carries; a request of the
// server's (elicitation, sampling, roots) to the request carrying its
// progress token, else to the one session with requests in flight, and
// when there are several such sessions, or none, the server gets -32601;
// only the session asked may answer it. notifications/resources/updated
// goes to the sessions that subscribed the URI: the Handler keeps each
// session's subscriptions (bounded), subscribes the server once per URI
// and unsubscribes it when the last subscriber unsubscribes or ends.
// list_changed notifications go to every session's GET stream; any other
// notification of no request (notifications/message, ...) goes to the
// sessions only while they are all one principal's (Options.Principal),
// and is dropped otherwise.
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
//     (Options.Limit), and so is the share of them one principal and one
//     tenant start (Options.PrincipalConns and TenantConns,
//     Limit.SetShares). A newcomer beyond its share, or finding a pool
//     full, stops an idle Conn to make room (its own at its share, else
//     the heaviest holder's least recently used; see share.go); only when
//     none is idle does its initialize fail with 503, the bound named to
//     OnLimit.
//   - Each Conn has one reader goroutine, owned by the Handler, which
//     [Handler.Close] stops and waits for.
//   - Messages queued for one request or one GET stream are bounded
//     (queueLen); beyond that notifications are dropped, never the
//     response.
//   - Sessions per Conn are bounded (maxSessions), the least recently used
//     one forgotten first; the URIs a session subscribes
//     (maxSubscriptions), and the requests of the server's waiting for an
//     answer, per Conn (maxAsked) and per session (maxAskedSession): beyond
//     them the session or the server gets an error.
//   - A Process bounds its stdout lines (Options.MaxMessageBytes), its
//     stderr lines (maxStderrLine) and the rate at which they are logged.
package pipe
