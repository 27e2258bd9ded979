package dispatch

import (
	"context"
	"encoding/json"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/observe"
	"github.com/mcpgw/gateway/internal/protocol"
)

// The method table: every MCP method the endpoint serves, with what the
// rest of the request path needs to know of it. Adding a method is one
// entry here. initialize is not in it: it opens a session, which the
// transport does before any method is dispatched (see serveInitialize).
var methods map[string]*Method

// A Method is one entry of the table.
type Method struct {
	// serve answers the method; nil for a method served as a stream by
	// the transport itself (subscriptions/listen).
	serve methodFunc
	// handle is serve inside the pipeline's wrappers (see pipeline.go),
	// built once with the table.
	handle methodFunc
	// session and stateless say in which revisions the method exists: in
	// sessions (2025-11-25 and older) and in the stateless 2026-07-28
	// revision. A method missing from a revision is "method not found"
	// there.
	session, stateless bool
	// target is what the method routes on, named in its span and in the
	// audit log.
	target observe.Target
	// audited methods reach an upstream's tools, prompts and resources:
	// each call is an audit record of its own.
	audited bool
	// cache is what a 2026-07-28 result says of its freshness (ttlMs,
	// cacheScope).
	cache cachePolicy
	// input says the method may be answered with input_required (2026-07-28
	// basic/patterns/mrtr, "Supported Requests").
	input bool
}

// cachePolicy is what a 2026-07-28 result of a method says of caching
// (server/utilities/caching).
type cachePolicy int

const (
	cacheNone cachePolicy = iota
	// cacheList: private, for server.list_cache_ttl. Lists are filtered
	// per tenant, so they are never shared.
	cacheList
	// cacheNoTTL: private, ttlMs 0. A read's contents are the upstream's;
	// it says nothing of their freshness.
	cacheNoTTL
)

func init() {
	methods = map[string]*Method{
		protocol.MethodPing:                  {serve: ping, session: true},
		protocol.MethodToolsList:             {serve: listMethod(catalog.Tools), session: true, stateless: true, cache: cacheList},
		protocol.MethodPromptsList:           {serve: listMethod(catalog.Prompts), session: true, stateless: true, cache: cacheList},
		protocol.MethodResourcesList:         {serve: listMethod(catalog.Resources), session: true, stateless: true, cache: cacheList},
		protocol.MethodResourceTemplatesList: {serve: listMethod(catalog.Templates), session: true, stateless: true, cache: cacheList},
		protocol.MethodToolsCall:             {serve: callTool, session: true, stateless: true, target: observe.TargetTool, audited: true, input: true},
		protocol.MethodPromptsGet:            {serve: getPrompt, session: true, stateless: true, target: observe.TargetPrompt, audited: true, input: true},
		protocol.MethodResourcesRead:         {serve: readResource, session: true, stateless: true, target: observe.TargetResource, audited: true, cache: cacheNoTTL, input: true},
		protocol.MethodComplete:              {serve: complete, session: true, stateless: true},
		// Removed in 2026-07-28 (changelog): subscriptions are
		// subscriptions/listen's, log levels are per request (_meta).
		protocol.MethodResourcesSubscribe:   {serve: uriCall, session: true},
		protocol.MethodResourcesUnsubscribe: {serve: uriCall, session: true},
		protocol.MethodSetLevel:             {serve: setLevel, session: true},
		// Tasks (tasks.go): 2025-11-25 basic/utilities/tasks in
		// sessions; the 2026-07-28 Tasks extension has no tasks/result
		// nor tasks/list, and adds tasks/update.
		protocol.MethodTasksGet:    {serve: taskMethod, session: true, stateless: true},
		protocol.MethodTasksResult: {serve: taskMethod, session: true},
		protocol.MethodTasksCancel: {serve: taskMethod, session: true, stateless: true},
		protocol.MethodTasksList:   {serve: listTasks, session: true},
		protocol.MethodTasksUpdate: {serve: taskMethod, stateless: true},
		// New in 2026-07-28.
		protocol.MethodDiscover:            {serve: discover, stateless: true, cache: cacheList},
		protocol.MethodSubscriptionsListen: {stateless: true},
	}
	for _, m := range methods {
		if m.serve != nil {
			m.handle = pipeline(m.serve)
		}
	}
}

// LookupMethod returns the entry of name in the given revision, or nil.
func LookupMethod(name string, stateless bool) *Method {
	m := methods[name]
	if m == nil || (stateless && !m.stateless) || (!stateless && !m.session) {
		return nil
	}
	return m
}

// Stream reports whether the method is answered by the transport as a
// stream of its own (subscriptions/listen) rather than dispatched.
func (m *Method) Stream() bool { return m.serve == nil }

func ping(context.Context, *Request, *call) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}
