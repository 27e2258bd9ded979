package audit

import (
	"sync"
	"time"
)

// A Ring keeps the last records written to it, at most its capacity, for
// the operator console: memory stays bounded whatever the traffic, and a
// restart forgets them (the audit log proper is the lasting record). It
// never keeps arguments: a Record's Arguments is dropped when it is added,
// whatever audit_arguments says, since the console is read by people the
// audit log's readers may not be. Its methods are safe for concurrent use.
type Ring struct {
	mu   sync.Mutex
	buf  []Record
	next int  // where the next record goes
	full bool // buf has wrapped at least once
}

// NewRing returns a Ring that keeps the last n records (at least 1).
func NewRing(n int) *Ring {
	return &Ring{buf: make([]Record, max(n, 1))}
}

// Cap returns how many records r keeps.
func (r *Ring) Cap() int { return len(r.buf) }

// Add keeps rec, without its arguments, dropping the oldest record when r
// is full.
func (r *Ring) Add(rec Record) {
	if r == nil {
		return
	}
	rec.Arguments = ""
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	r.mu.Lock()
	r.buf[r.next] = rec
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
	r.mu.Unlock()
}

// Last returns up to n of the records r holds that keep says to (nil keep:
// all), newest first.
func (r *Ring) Last(n int, keep func(*Record) bool) []Record {
	if r == nil || n <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	held := r.next
	if r.full {
		held = len(r.buf)
	}
	var out []Record
	for i := 0; i < held && len(out) < n; i++ {
		j := (r.next - 1 - i + len(r.buf)) % len(r.buf)
		if keep == nil || keep(&r.buf[j]) {
			out = append(out, r.buf[j])
		}
	}
	return out
}
