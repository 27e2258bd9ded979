// Package announce decides what an upstream is told of its client.
//
// An upstream decides what to offer from the client capabilities it is
// announced at initialize: a server registers a tool that asks for roots,
// sampling or elicitation only for a client that can answer (the
// reference server-everything does). So the gateway announces to each
// upstream session exactly what its client declared, as far as the
// gateway relays it, and nothing else ([Parse]): a client that declared no
// sampling is never shown a tool that would ask it for a completion.
// Stateless (2026-07-28) callers declare theirs in each request's _meta;
// the upstream sessions the gateway holds for them are kept per principal
// and per announced set (see dispatch.PrincipalRecord), so two sets never
// share one.
//
// Shared listings follow: a list fetched on a session announced one set
// may differ from another's, so the catalog keeps listings apart per set
// ([Set.Key]). The gateway's own sessions (the watch, explain) announce
// none, the set of a client that declared none, whose listings they keep
// fresh.
//
// A piped upstream (stdio, HTTP+SSE) is one server session that all the
// gateway's sessions share: it is announced the gateway's fixed set
// ([Piped]) once, and its listings are not kept apart.
package announce

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// Piped are the capabilities a piped upstream is announced: every request
// for input is relayed to the clients that can answer it and refused at
// once for the others (see bridge.Lacks).
var Piped = json.RawMessage(`{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{}}`)

// noCaps is the ClientCapabilities of a client that declared none.
var noCaps = json.RawMessage(`{}`)

// A Set is what the gateway announces to upstreams for one client. The
// zero Set announces nothing. A Set is never changed once made.
type Set struct {
	key  string
	caps json.RawMessage // nil for none
}

// None is the set of a client that declared nothing the gateway relays.
var None = &Set{}

// Key names the set: "" for none, else the capabilities' dotted names in a
// fixed order ("elicitation.form,roots,sampling"). It partitions shared
// listings and keys stateless callers' records.
func (s *Set) Key() string { return s.key }

// Caps is the ClientCapabilities object to announce.
func (s *Set) Caps() json.RawMessage {
	if s.caps == nil {
		return noCaps
	}
	return s.caps
}

// relayed are the client capabilities, and their sub-capabilities, that
// the gateway relays between client and upstream, in the order of a key.
// Requests for input pass through as they are, so their sub-capabilities
// do too; roots.listChanged is relayed by Notification. Anything else a
// client declares (tasks, experimental, extensions) the gateway would not
// relay, and so does not announce.
var relayed = []struct{ name, sub string }{
	{"elicitation", ""}, {"elicitation", "form"}, {"elicitation", "url"},
	{"roots", ""}, {"roots", "listChanged"},
	{"sampling", ""}, {"sampling", "context"}, {"sampling", "tools"},
}

// Parse returns the set announced for a client whose declared capabilities
// are raw.
func Parse(raw json.RawMessage) *Set {
	o, err := jsonx.ParseValidObject(raw)
	if err != nil {
		return None
	}
	var names []string
	out := &jsonx.Object{}
	for _, rc := range relayed {
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
		for _, s := range relayed {
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
		return None
	}
	return &Set{key: strings.Join(names, ","), caps: out.Bytes()}
}

// The Cache's bounds: a capabilities object of at most MaxCachedBytes is
// parsed once and kept, in a table of at most MaxEntries that is emptied
// when full. A client may send a new value with every request (a
// 2026-07-28 request's _meta), so neither their size nor their number may
// decide what it holds, and a client cycling values only costs the others
// a parse each time the table is emptied.
const (
	MaxCachedBytes = 4 << 10
	MaxEntries     = 512
)

// A Cache parses each distinct small capabilities object once. The zero
// Cache is ready for use; its methods are safe for use by multiple
// goroutines.
type Cache struct {
	m sync.Map // client capabilities JSON → *Set
	n atomic.Int64
}

// Of returns the set announced for a client whose declared capabilities
// are raw (as [Parse]).
func (c *Cache) Of(raw json.RawMessage) *Set {
	if len(raw) > MaxCachedBytes {
		return Parse(raw)
	}
	if v, ok := c.m.Load(string(raw)); ok {
		return v.(*Set)
	}
	s := Parse(raw)
	if c.n.Add(1) > MaxEntries {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(string(raw), s)
	return s
}
