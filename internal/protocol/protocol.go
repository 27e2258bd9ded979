// Package protocol names MCP's vocabulary, once, for the transport the
// gateway serves and for internal/upstream, which speaks to upstreams: the
// protocol revisions and their order, the HTTP header names, the _meta keys,
// the MCP error codes and the members every 2026-07-28 result carries
// (DecorateResult).
//
// It holds names, values, their parsing and shaping only. It must not do
// I/O, log, or decide anything: which revision to answer with, where a
// request of an unknown revision goes, which headers a configuration may
// set, how long a result may be cached are the callers' decisions. It
// imports nothing of the gateway but internal/jsonrpc and internal/jsonx,
// which import nothing else, so every package may use it.
package protocol

// The HTTP headers of the Streamable HTTP transport (2025-11-25
// basic/transports, "Session Management", "Protocol Version Header",
// "Resumability and Redelivery"; 2026-07-28 basic/transports/streamable-http,
// "Standard Headers"). Each is in canonical form, so it may index an
// http.Header directly.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderLastEventID     = "Last-Event-Id"
	// HeaderMethod and HeaderName mirror a 2026-07-28 request's method and
	// the params member that names its target.
	HeaderMethod = "Mcp-Method"
	HeaderName   = "Mcp-Name"
	// HeaderParamPrefix starts the headers that mirror a tool's arguments
	// (Mcp-Param-{Name}, from the tool's x-mcp-header).
	HeaderParamPrefix = "Mcp-Param-"
)

// The _meta keys the protocol reserves (2026-07-28 basic/index, "_meta").
// They describe one hop, client to server, and travel in params._meta or
// result._meta.
const (
	// MetaPrefix starts every key the protocol reserves.
	MetaPrefix = "io.modelcontextprotocol/"

	MetaProtocolVersion    = MetaPrefix + "protocolVersion"
	MetaClientInfo         = MetaPrefix + "clientInfo"
	MetaClientCapabilities = MetaPrefix + "clientCapabilities"
	MetaServerInfo         = MetaPrefix + "serverInfo"
	MetaLogLevel           = MetaPrefix + "logLevel"
	MetaSubscriptionID     = MetaPrefix + "subscriptionId"
)

// LogLevels are the MCP log levels, least severe first (2025-11-25
// server/utilities/logging, "Log Levels": RFC 5424's severities).
var LogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// LogSeverity returns the rank of level in LogLevels, or -1 for a level
// that is not one.
func LogSeverity(level string) int {
	for i, l := range LogLevels {
		if l == level {
			return i
		}
	}
	return -1
}

// MCP's JSON-RPC error codes; the JSON-RPC 2.0 ones are in internal/jsonrpc.
const (
	// CodeSessionNotFound is the code in the body of a 404 for an unknown
	// Mcp-Session-Id; the TypeScript SDK uses the same value.
	CodeSessionNotFound = -32001
	// CodeResourceNotFound answers resources/read of an unknown URI
	// (2025-11-25 server/resources, "Error Handling").
	CodeResourceNotFound = -32002

	// Codes of the 2026-07-28 revision (basic/index, "Error Codes"). Only
	// a server of that revision or a later one answers with them.
	CodeHeaderMismatch             = -32020
	CodeMissingClientCapability    = -32021
	CodeUnsupportedProtocolVersion = -32022

	// CodeBudgetExceeded is the gateway's own: a request refused by a
	// budget (rate limit, quota, concurrency, circuit breaker), with data
	// naming the budget and when to retry. Outside the JSON-RPC reserved
	// range, as 2026-07-28 basic/index "Error Codes" asks of codes that
	// the specification does not define.
	CodeBudgetExceeded = -31429
)
