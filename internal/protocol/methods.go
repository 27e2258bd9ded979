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
	{Name: MethodInitialize},
	{Name: MethodPing},
	{Name: MethodDiscover},
	{Name: MethodToolsList},
	{Name: MethodToolsCall, NameKey: "name"},
	{Name: MethodPromptsList},
	{Name: MethodPromptsGet, NameKey: "name"},
	{Name: MethodResourcesList},
	{Name: MethodResourceTemplatesList},
	{Name: MethodResourcesRead, NameKey: "uri"},
	{Name: MethodResourcesSubscribe},
	{Name: MethodResourcesUnsubscribe},
	{Name: MethodSubscriptionsListen},
	{Name: MethodComplete},
	{Name: MethodSetLevel},
	{Name: MethodTasksGet, NameKey: "taskId"},
	{Name: MethodTasksList},
	{Name: MethodTasksResult},
	{Name: MethodTasksCancel, NameKey: "taskId"},
	{Name: MethodTasksUpdate, NameKey: "taskId"},
	{Name: MethodRootsList, FromServer: true},
	{Name: MethodCreateMessage, FromServer: true},
	{Name: MethodElicit, FromServer: true},

	{Name: NotifyInitialized, Notification: true},
	{Name: NotifyCancelled, Notification: true},
	{Name: NotifyProgress, Notification: true, FromServer: true},
	{Name: NotifyMessage, Notification: true, FromServer: true},
	{Name: NotifyRootsListChanged, Notification: true},
	{Name: NotifyToolsListChanged, Notification: true, FromServer: true},
	{Name: NotifyPromptsListChanged, Notification: true, FromServer: true},
	{Name: NotifyResourcesListChanged, Notification: true, FromServer: true},
	{Name: NotifyResourceUpdated, Notification: true, FromServer: true},
	{Name: NotifyElicitationComplete, Notification: true, FromServer: true},
	{Name: NotifyTaskStatus, Notification: true, FromServer: true},
	{Name: NotifyTasks, Notification: true, FromServer: true},
	{Name: NotifySubscriptionsAcknowledged, Notification: true, FromServer: true},
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
