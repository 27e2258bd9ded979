package dispatch

import (
	"encoding/json"
	"strings"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// What an upstream is told of its client.
//
// An upstream decides what to offer from the client capabilities it is
// announced at initialize: a server registers a tool that asks for roots,
// sampling or elicitation only for a client that can answer (the
// reference server-everything does). So the gateway announces to each
// upstream session exactly what its client declared, as far as the
// gateway relays it, and nothing else: a client that declared no sampling
// is never shown a tool that would ask it for a completion. Stateless
// (2026-07-28) callers declare theirs in each request's _meta; the
// upstream sessions the gateway holds for them are kept per principal and
// per announced set (see PrincipalRecord), so two sets never share one.
//
// Shared listings follow: a list fetched on a session announced one set
// may differ from another's, so the catalog keeps listings apart per set
// (see listScope). The gateway's own sessions (the watch, explain)
// announce none, the set of a client that declared none, whose listings
// they keep fresh.
//
// A piped upstream (stdio, HTTP+SSE) is one server session that all the
// gateway's sessions share: it is announced the gateway's fixed set
// (pipedCaps) once, and its listings are not kept apart.

// pipedCaps are the capabilities a piped upstream is announced: every
// request for input is relayed to the clients that can answer it and
// refused at once for the others (see bridge.Lacks).
var pipedCaps = json.RawMessage(`{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{}}`)

// noCaps is the ClientCapabilities of a client that declared none.
var noCaps = json.RawMessage(`{}`)

// upstreamCaps is the ClientCapabilities object to announce.
func (a *announced) upstreamCaps() json.RawMessage {
	if a.caps == nil {
		return noCaps
	}
	return a.caps
}

// announced is what the gateway announces to upstreams for one client.
type announced struct {
	// key names the set: "" for none, else the capabilities' dotted names
	// in a fixed order ("elicitation.form,roots,sampling"). It partitions
	// shared listings and keys stateless callers' records.
	key string
	// caps is the ClientCapabilities object announced (nil for none).
	caps json.RawMessage
}

// relayedCaps are the client capabilities, and their sub-capabilities, that
// the gateway relays between client and upstream, in the order of a key.
// Requests for input pass through as they are, so their sub-capabilities
// do too; roots.listChanged is relayed by Notification. Anything else a
// client declares (tasks, experimental, extensions) the gateway would not
// relay, and so does not announce.
var relayedCaps = []struct{ name, sub string }{
	{"elicitation", ""}, {"elicitation", "form"}, {"elicitation", "url"},
	{"roots", ""}, {"roots", "listChanged"},
	{"sampling", ""}, {"sampling", "context"}, {"sampling", "tools"},
}

// announcedMaxEntries bounds the table of parsed client capabilities; see
// capSet for why it is emptied when full.
const announcedMaxEntries = 512

// announce returns what the gateway announces for a client whose declared
// capabilities are raw. Small values are parsed once (as in capSet).
func (h *Server) announce(raw json.RawMessage) *announced {
	cacheable := len(raw) <= capSetMaxBytes
	if cacheable {
		if v, ok := h.announcedSets.Load(string(raw)); ok {
			return v.(*announced)
		}
	}
	a := parseAnnounced(raw)
	if cacheable {
		h.announcedSets.put(string(raw), a, announcedMaxEntries)
	}
	return a
}

// parseAnnounced builds the announced set of a client's raw capabilities.
func parseAnnounced(raw json.RawMessage) *announced {
	o, err := jsonx.ParseValidObject(raw)
	if err != nil {
		return &announced{}
	}
	var names []string
	out := &jsonx.Object{}
	for _, rc := range relayedCaps {
		if rc.sub != "" {
			continue
		}
		v := o.Get(rc.name)
		sub, err := jsonx.ParseValidObject(v)
		if v == nil || err != nil {
			continue // absent, null or not an object: not declared
		}
		names = append(names, rc.name)
		kept := &jsonx.Object{}
		for _, s := range relayedCaps {
			if s.name != rc.name || s.sub == "" {
				continue
			}
			if sv := sub.Get(s.sub); sv != nil && string(sv) != "null" && string(sv) != "false" {
				names = append(names, rc.name+"."+s.sub)
				kept.Set(s.sub, sv)
			}
		}
		out.Set(rc.name, kept.Bytes())
	}
	if len(names) == 0 {
		return &announced{}
	}
	return &announced{key: strings.Join(names, ","), caps: out.Bytes()}
}

// announced is what the gateway announces to upstreams for rq's client:
// its session's capabilities, or a stateless request's.
func (rq *Request) announced() *announced {
	switch {
	case rq.adm.Stateless:
		return rq.h.announce(rq.adm.MetaCaps)
	case rq.Session != nil:
		return rq.h.announce(rq.Session.ClientCapabilities)
	}
	return &announced{}
}
