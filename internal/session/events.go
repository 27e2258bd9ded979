package session

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Event logs.
//
// An [EventLog] keeps, for a while, the SSE events the gateway sent on a
// session's streams, so that a client whose connection dropped can resume
// a stream on any replica (2025-11-25 basic/transports, "Resumability and
// Redelivery"). Each stream has a log of its own, named by the session and
// a stream id the transport chooses, and each event a cursor the log
// assigns: the transport makes the SSE event id of the two. A log is
// bounded in events and in bytes (the oldest events make room for new
// ones), expires some time after its last event, and a session holds a
// bounded number of logs (opening one more drops the session's oldest).
// Logs live under their session's id, so a stream of another session is,
// to a caller, a stream that does not exist.

// ErrEventsGone is returned by [EventLog.Read] when events after the
// cursor were dropped to keep the log within its bounds: the stream cannot
// be resumed without losing them.
var ErrEventsGone = errors.New("events after the cursor are no longer kept")

// Event is one logged event.
type Event struct {
	// Cursor names the event within its stream's log.
	Cursor string
	// Data is the event's payload: one JSON-RPC message.
	Data []byte
	// Final marks the stream's last event: nothing follows it.
	Final bool
	// Lost marks the end [EventLog.Read] makes up for a stream whose
	// writer stopped renewing its lease (the replica serving the call
	// died): Final is set, and Data is the owner given to Open (the
	// request's id), so that the reader can answer in its place.
	Lost bool
}

// EventLimits bound an [EventLog]. Zero or negative fields take the
// Default* values.
type EventLimits struct {
	// EventsPerStream and BytesPerStream bound one stream's log: the
	// oldest events are dropped to make room beyond them. An event larger
	// than BytesPerStream empties the log.
	EventsPerStream int
	BytesPerStream  int64
	// TTL is how long a stream's log is kept after its last event.
	TTL time.Duration
	// StreamsPerSession bounds the logs of one session: opening one more
	// drops the session's oldest.
	StreamsPerSession int
	// MaxStreams and MaxBytes bound all the logs a [MemoryEvents] holds
	// (a Redis log is bounded by Redis's maxmemory instead).
	MaxStreams int
	MaxBytes   int64
	// MaxStreamsPerPrincipal and MaxBytesPerPrincipal are the shares of
	// MaxStreams and MaxBytes the logs of one principal's sessions hold
	// at most in a [MemoryEvents], and MaxStreamsPerTenant and
	// MaxBytesPerTenant those of one tenant's: beyond them, the holder's
	// own least recently written logs are dropped. Zero or negative: a
	// tenth of the pool for a principal, half of it for a tenant (at
	// least 1), as the config's defaults.
	MaxStreamsPerPrincipal int
	MaxStreamsPerTenant    int
	MaxBytesPerPrincipal   int64
	MaxBytesPerTenant      int64
	// Lease is how long the writer of a call's stream is taken to be
	// alive after its last Append or Touch (default EventLease).
	Lease time.Duration
}

// Defaults for [EventLimits]; they match the config package's.
const (
	DefaultEventsPerStream              = 1000
	DefaultEventBytesPerStream    int64 = 1 << 20
	DefaultEventTTL                     = 2 * time.Minute
	DefaultEventStreamsPerSession       = 16
	DefaultEventMaxStreams              = 100_000
	DefaultEventMaxBytes          int64 = 256 << 20
)

// EventLease is how long, by default, the writer of a call's stream is
// taken to be alive after its last Append or Touch: it should touch more
// often.
// Replicas' clocks must agree to well within it.
const EventLease = 6 * time.Second

// maxEventStreamID bounds a stream id's length, and maxEventsPerRead the
// events one Read returns.
const (
	maxEventStreamID = 64
	maxEventsPerRead = 256
)

func (l EventLimits) withDefaults() EventLimits {
	if l.EventsPerStream <= 0 {
		l.EventsPerStream = DefaultEventsPerStream
	}
	if l.BytesPerStream <= 0 {
		l.BytesPerStream = DefaultEventBytesPerStream
	}
	if l.TTL <= 0 {
		l.TTL = DefaultEventTTL
	}
	if l.StreamsPerSession <= 0 {
		l.StreamsPerSession = DefaultEventStreamsPerSession
	}
	if l.MaxStreams <= 0 {
		l.MaxStreams = DefaultEventMaxStreams
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultEventMaxBytes
	}
	if l.MaxStreamsPerPrincipal <= 0 {
		l.MaxStreamsPerPrincipal = PrincipalShare(l.MaxStreams)
	}
	if l.MaxStreamsPerTenant <= 0 {
		l.MaxStreamsPerTenant = TenantShare(l.MaxStreams)
	}
	if l.MaxBytesPerPrincipal <= 0 {
		l.MaxBytesPerPrincipal = PrincipalShare(l.MaxBytes)
	}
	if l.MaxBytesPerTenant <= 0 {
		l.MaxBytesPerTenant = TenantShare(l.MaxBytes)
	}
	if l.Lease <= 0 {
		l.Lease = EventLease
	}
	return l
}

// PrincipalShare and TenantShare are the default shares of a pool of n
// that one principal and one tenant may hold: a tenth and a half, at
// least 1. So at least ten principals, and two tenants, fill a pool
// before any of them loses an entry to another.
func PrincipalShare[N int | int64](n N) N { return max(n/10, 1) }

// TenantShare: see [PrincipalShare].
func TenantShare[N int | int64](n N) N { return max(n/2, 1) }

// EventLog keeps the recent events of a session's streams. All its
// methods must be safe for use by multiple goroutines.
//
// Session ids and stream ids are the caller's: a stream id is 1 to 64
// characters of [0-9a-z], unique within its session.
type EventLog interface {
	// Open starts the log of a new stream of session sid, whose
	// principal is who, with an empty first event (the one a client may
	// resume from before anything was sent) and returns that event's
	// cursor. If the session holds StreamsPerSession logs already, its
	// oldest is dropped; so are who's, or its tenant's, least recently
	// written logs when they hold their share of the store's streams, and
	// the heaviest holder's when the store holds as many as it may. It
	// fails with ErrFull when the store cannot hold the log.
	//
	// With a non-empty owner, the stream is a call's: its writer holds a
	// lease (EventLimits.Lease), renewed by each Append and by Touch, and a Read
	// that finds no final event and an expired lease reports the stream
	// lost (see Event.Lost), owner its Data.
	Open(ctx context.Context, who Principal, sid, stream string, owner []byte) (cursor string, err error)
	// Touch keeps a log as if an event was appended: it renews its
	// expiry, and a call's lease. A log that expired or was dropped is
	// left so.
	Touch(ctx context.Context, sid, stream string) error
	// Append logs data as the stream's next event, final if nothing may
	// follow it, refreshing the log's expiry, and returns the event's
	// cursor. Logs of its principal, its tenant or, in a full store, the
	// heaviest holder, are dropped to keep the bytes within their shares
	// (see Open). It returns ErrNotFound if the log expired or was
	// dropped, and ErrFull when the log itself cannot be kept (it is
	// dropped then: a resume cannot be served whole).
	Append(ctx context.Context, sid, stream string, data []byte, final bool) (cursor string, err error)
	// Read returns up to a few hundred events of the stream that follow
	// the event at cursor after, oldest first, waiting up to wait for one
	// when there is none yet (a zero wait does not wait; an empty result
	// is no error). It returns ErrNotFound for a stream or cursor it does
	// not know (another session's stream, an expired log, a malformed
	// cursor), and ErrEventsGone when events after the cursor were dropped.
	// The returned events are the caller's to keep.
	Read(ctx context.Context, sid, stream, after string, wait time.Duration) ([]Event, error)
	// End drops every log of the session: it was deleted.
	End(ctx context.Context, sid string) error
}

// checkEventStream reports why sid and stream cannot name a log.
func checkEventStream(sid, stream string) error {
	if sid == "" || len(stream) == 0 || len(stream) > maxEventStreamID {
		return fmt.Errorf("session: event stream %q of session %q: bad name", stream, sid)
	}
	for i := 0; i < len(stream); i++ {
		c := stream[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return fmt.Errorf("session: event stream %q: bad name", stream)
		}
	}
	for i := 0; i < len(sid); i++ {
		if sid[i] == '{' || sid[i] == '}' {
			return fmt.Errorf("session: event stream of session %q: bad session id", sid)
		}
	}
	return nil
}
