// Package telemetry holds the gateway's Prometheus metrics and OpenTelemetry
// tracing: the collectors behind admin /metrics, the tracer provider, the
// W3C Trace Context and Baggage propagation over HTTP headers and MCP
// params._meta, and the span attributes of the OpenTelemetry semantic
// conventions for MCP.
//
// Nothing here is global: [NewMetrics] registers on the registry it is given
// (one per gateway, so tests can run several), and [SetupTracing] returns a
// TracerProvider for the caller to pass down instead of installing it with
// otel.SetTracerProvider. Every method of a nil *[Metrics] is a no-op.
//
// # Spans
//
// One request to /mcp produces
//
//	HTTP server span   "POST /mcp"            [HTTPMiddleware]; parent: the request's headers
//	└─ MCP server span "tools/call echo"      [StartServerSpan]; parent: params._meta, else the HTTP span
//	   └─ client span  "tools/call echo"      [StartClientSpan], one per upstream request;
//	                                           its context goes out in both the headers
//	                                           ([InjectHeaders]) and params._meta ([InjectMeta])
//
// # Which context wins when the headers and _meta both carry one
//
// params._meta wins for the MCP server span; the headers parent only the HTTP
// server span, which the MCP span then links to. The MCP specification
// (2026-07-28, basic/index.mdx, "OpenTelemetry trace context") reserves
// traceparent, tracestate and baggage in _meta for exactly this, and the
// OpenTelemetry semantic conventions for MCP it defers to say why: "HTTP
// trace context propagation only covers the HTTP request, but not the
// individual messages client and server exchange within the request/response
// streams", and "MCP server instrumentation SHOULD, by default, use context
// extracted from MCP params._meta as a parent for MCP server span and SHOULD
// link current ambient context". The _meta context is end to end: it is set
// by the MCP client that issued this very message and survives every
// intermediary that re-originates the HTTP request (a proxy, a load balancer
// with its own tracing, a retry), whereas the headers describe only the last
// HTTP hop. Baggage follows the same rule: baggage in _meta replaces the
// headers' baggage for the MCP span and what is sent upstream. A malformed
// _meta traceparent is ignored, and the HTTP span stays the parent.
//
// # Metrics and cardinality
//
// Every label value comes from a bounded set, and no label ever carries a
// session id, subject or token:
//   - method: the MCP method names of the supported protocol revisions,
//     anything else is "other";
//   - outcome: one of the Outcome constants, anything else is "other";
//   - tenant and upstream: callers pass only configured tenant ids and
//     upstream names; as a backstop each label keeps at most
//     [MaxTenantLabels] / [MaxUpstreamLabels] distinct values per process,
//     later ones are "other";
//   - tool: callers pass only tools of configured upstreams; each upstream
//     keeps at most [MaxToolLabelsPerUpstream] distinct tool values, later
//     ones are "other";
//   - reason and kind: free strings from the gateway's own code, capped at
//     [MaxReasonLabels] distinct values.
//
// Values are also made valid UTF-8 and cut to [MaxLabelLen] bytes.
package telemetry
