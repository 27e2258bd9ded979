// Package capset is what the gateway knows of capabilities objects: the
// names each one holds, parsed once (Cache), each upstream's, as this
// replica last saw them (Seen), and what the gateway announces of its own,
// given its upstreams' (Cache.Union).
package capset

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// A Cache parses capabilities objects into the names of the capabilities
// they hold. An object of at most MaxBytes is parsed once and kept, in a
// table of at most MaxEntries that is emptied when full. Upstreams'
// capabilities (as many values as upstream versions) are its point;
// clients' (a 2026-07-28 request's _meta) come through it too, and as a
// client may send a new value with every request, neither their size nor
// their number may decide what it holds: at most 2 MiB, and a client
// cycling values only costs the upstreams' entries a parse each time the
// table is emptied.
//
// The zero Cache is empty and ready to use; its methods may be called
// concurrently.
type Cache struct {
	m sync.Map // capabilities JSON → map[string]bool
	n atomic.Int64
}

// The Cache's bounds.
const (
	MaxBytes   = 4 << 10
	MaxEntries = 512
)

// Names returns the names of the capabilities in caps (those whose value
// is not null). The map is shared: it must not be modified.
func (c *Cache) Names(caps json.RawMessage) map[string]bool {
	cacheable := len(caps) <= MaxBytes
	if cacheable {
		if v, ok := c.m.Load(string(caps)); ok {
			return v.(map[string]bool)
		}
	}
	set := map[string]bool{}
	if o, err := jsonx.ParseObject(caps); err == nil {
		for _, m := range o.Members {
			if string(m.Value) != "null" {
				set[m.Name] = true
			}
		}
	}
	if cacheable {
		// Emptied rather than evicted one by one: entries are cheap to
		// make again, and an order kept per hit would cost more than an
		// occasional refill.
		if c.n.Add(1) > MaxEntries {
			c.m.Clear()
			c.n.Store(1)
		}
		c.m.Store(string(caps), set)
	}
	return set
}

// Seen holds each upstream's capabilities as this replica last saw them
// (on any session). Its zero value knows none; its methods may be called
// concurrently.
type Seen struct {
	mu   sync.Mutex
	last map[string]json.RawMessage // upstream → its capabilities
}

// Remember keeps caps as upstream name's capabilities.
func (s *Seen) Remember(name string, caps json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = make(map[string]json.RawMessage)
	}
	s.last[name] = caps
}

// Last returns upstream name's capabilities as last seen, and whether they
// were seen.
func (s *Seen) Last(name string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	caps, ok := s.last[name]
	return caps, ok
}
