package protocol

// The MCP methods of the revisions the gateway speaks (2025-03-26 to
// 2026-07-28, and the Tasks extension), each described once: what a
// request or notification it is, who sends it, and the params member its
// Mcp-Name header mirrors. The dispatch table, the metrics' method label
// and the Mcp-Name rules are derived from it.

// A MethodInfo describes one MCP method.
type MethodInfo struct {
	Name string
	// Notification is set for a notification, clear for a request.
	Notification bool
	// FromServer is set for what a server sends its client (requests for
	// input, most notifications), clear for what a client sends.
	FromServer bool
	// NameKey is the params member the Mcp-Name header mirrors
	// (2026-07-28 basic/transports/streamable-http, "Request Metadata";
	// the Tasks extension, "Streamable HTTP: Routing Headers"), or "".
	NameKey string
}

// Methods lists every MCP method, requests first.
var Methods = []MethodInfo{
	{Name: "initialize"},
	{Name: "ping"},
	{Name: "server/discover"},
	{Name: "tools/list"},
	{Name: "tools/call", NameKey: "name"},
	{Name: "prompts/list"},
	{Name: "prompts/get", NameKey: "name"},
	{Name: "resources/list"},
	{Name: "resources/templates/list"},
	{Name: "resources/read", NameKey: "uri"},
	{Name: "resources/subscribe"},
	{Name: "resources/unsubscribe"},
	{Name: "subscriptions/listen"},
	{Name: "completion/complete"},
	{Name: "logging/setLevel"},
	{Name: "tasks/get", NameKey: "taskId"},
	{Name: "tasks/list"},
	{Name: "tasks/result"},
	{Name: "tasks/cancel", NameKey: "taskId"},
	{Name: "tasks/update", NameKey: "taskId"},
	{Name: "roots/list", FromServer: true},
	{Name: "sampling/createMessage", FromServer: true},
	{Name: "elicitation/create", FromServer: true},

	{Name: "notifications/initialized", Notification: true},
	{Name: "notifications/cancelled", Notification: true},
	{Name: "notifications/progress", Notification: true, FromServer: true},
	{Name: "notifications/message", Notification: true, FromServer: true},
	{Name: "notifications/roots/list_changed", Notification: true},
	{Name: "notifications/tools/list_changed", Notification: true, FromServer: true},
	{Name: "notifications/prompts/list_changed", Notification: true, FromServer: true},
	{Name: "notifications/resources/list_changed", Notification: true, FromServer: true},
	{Name: "notifications/resources/updated", Notification: true, FromServer: true},
	{Name: "notifications/elicitation/complete", Notification: true, FromServer: true},
	{Name: "notifications/tasks/status", Notification: true, FromServer: true},
	{Name: "notifications/tasks", Notification: true, FromServer: true},
	{Name: "notifications/subscriptions/acknowledged", Notification: true, FromServer: true},
}

var methodIndex = func() map[string]*MethodInfo {
	m := make(map[string]*MethodInfo, len(Methods))
	for i := range Methods {
		m[Methods[i].Name] = &Methods[i]
	}
	return m
}()

// Method returns the description of MCP method name, and false for a name
// that is no MCP method.
func Method(name string) (MethodInfo, bool) {
	if m := methodIndex[name]; m != nil {
		return *m, true
	}
	return MethodInfo{}, false
}
