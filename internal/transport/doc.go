// Package transport is the gateway's MCP endpoint: the Streamable HTTP
// transport of both revisions on one /mcp.
//
// It owns what a request is at the HTTP level: the Origin check, Accept and
// Content-Type, the body's size and time, JSON-RPC envelopes and batches,
// the session and version headers of 2025-11-25 and older, the mirrored
// headers and _meta of 2026-07-28, the caps on sessions and streams
// answered with 429, the responder that writes one JSON body or an SSE
// stream, the server-to-client streams (a session's GET stream, a
// subscriptions/listen stream) and what reaches them on reload. Every HTTP
// status the endpoint answers with is chosen here.
//
//	client ──POST/GET/DELETE /mcp──► Snapshot.ServeHTTP (one config generation)
//	                                   │ Origin, principal, tenant
//	                                   │ POST: Accept, Content-Type, body
//	                                   │ a session's headers, or the 2026-07-28 checks
//	                                   ▼
//	                                 one dispatch.Request, one dispatch.Method
//	                                   ▼
//	                                 dispatch.Server.Serve ── events, result ──► responder
//
// It turns a request of either revision into one dispatch.Request and
// hands it to dispatch; it must not know what a method does, which
// upstream serves it, or what a name means there.
package transport
