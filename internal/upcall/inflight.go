package upcall

import (
	"context"
	"sync"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// InFlight is the session clients' requests this replica is serving, each
// named by its session and its id, so that the client's
// notifications/cancelled (2025-11-25 basic/utilities/cancellation) can
// stop it. Its zero value holds none; its methods may be called
// concurrently.
//
// A 2026-07-28 request has no place here: it is cancelled by closing its
// stream (basic/patterns/cancellation, "Transport-Specific Cancellation"),
// and its id is unique only to its own client.
type InFlight struct {
	mu sync.Mutex
	m  map[inflightKey]*inflightEntry
}

// inflightKey names a request: its id is unique within its session only.
type inflightKey struct {
	session string
	id      string // jsonrpc.ID.String: 1 and "1" are two ids
}

// An inflightEntry is one Add, so that its remove leaves alone the entry
// of a later request that reused the id.
type inflightEntry struct {
	cancel context.CancelCauseFunc
}

// Add records request id of session sessionID, which cancel stops, and
// returns the function that forgets it once served. A request of the same
// session and id that is still recorded is replaced.
func (f *InFlight) Add(sessionID string, id jsonrpc.ID, cancel context.CancelCauseFunc) (remove func()) {
	key := inflightKey{sessionID, id.String()}
	e := &inflightEntry{cancel: cancel}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[inflightKey]*inflightEntry)
	}
	f.m[key] = e
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.m[key] == e {
			delete(f.m, key)
		}
	}
}

// Cancel cancels request id of session sessionID with cause, and reports
// whether it is being served here.
func (f *InFlight) Cancel(sessionID string, id jsonrpc.ID, cause error) bool {
	f.mu.Lock()
	e, ok := f.m[inflightKey{sessionID, id.String()}]
	f.mu.Unlock()
	if ok {
		e.cancel(cause)
	}
	return ok
}
