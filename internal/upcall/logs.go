package upcall

import (
	"sync"
	"sync/atomic"
)

// MaxLogging bounds the upstream sessions a Logging remembers.
const MaxLogging = 4096

// Logging remembers the upstream sessions the gateway set to log (at
// debug, for the 2026-07-28 callers that share them), so that each is sent
// its level once per replica. At most MaxLogging are kept: the table is
// emptied when full, rather than evicted one by one, and a session is
// then sent its level again. The zero Logging is empty and ready to use;
// its methods may be called concurrently.
type Logging struct {
	m sync.Map // upstream and session id → struct{}
	n atomic.Int64
}

// On reports whether upstream's session sessionID was set to log.
func (l *Logging) On(upstream, sessionID string) bool {
	_, ok := l.m.Load(upstream + "\x00" + sessionID)
	return ok
}

// Set records that upstream's session sessionID was set to log.
func (l *Logging) Set(upstream, sessionID string) {
	if l.n.Add(1) > MaxLogging {
		l.m.Clear()
		l.n.Store(1)
	}
	l.m.Store(upstream+"\x00"+sessionID, struct{}{})
}
