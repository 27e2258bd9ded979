// Package session keeps the gateway's per-session state: one small record per
// client session, enough for any replica to serve the session's next request.
//
// # Records
//
// A [Record] holds what was negotiated at initialize (protocol version, client
// info and capabilities), the principal the session is bound to, and the
// upstream sessions opened on the client's behalf. It holds no secret: no
// token, no upstream credential. Everything else a replica needs (upstream
// connections, list caches) is rebuilt from the config.
//
// # Stores
//
// A [Store] is the storage contract; [Memory] is the default, a Redis store
// implements the same interface for deployments with several replicas. All
// of a Store's methods must be safe for use by multiple goroutines. Updates
// to a record's upstream sessions are compare-and-swap, so two requests that
// re-initialize the same upstream at once never leave two live upstream
// sessions recorded where one was meant.
//
// # Mailboxes
//
// A [Mailbox] hands messages from one replica to another: the goroutine that
// holds an upstream stream on one replica posts what the client must see
// next (say, a server-to-client request in the middle of a tool call), and
// whichever replica serves the client's next request takes it. Mailboxes are
// short-lived queues under caller-chosen keys, independent of session
// records: [Memory] and [Redis] implement both interfaces, and a mailbox key
// never names or touches a session.
//
// # Tasks
//
// A [TaskStore] maps the gateway's task ids to the principal that created
// each task and the upstream session that runs it (tasks.go): [MemoryTasks]
// in process, [RedisTasks] beside a [Redis] store's sessions.
package session

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNotFound is returned for an unknown, expired or deleted session.
var ErrNotFound = errors.New("session not found")

// ErrConflict is returned by [Store.SetUpstream] when the stored upstream
// session is not the one the caller expected.
var ErrConflict = errors.New("session record changed concurrently")

// ErrExists is returned by [Store.Create] when a live record with the same id
// exists.
var ErrExists = errors.New("session already exists")

// ErrFull is returned by [Store.Create] when the store cannot hold one more
// session (Redis out of memory; a full [Memory] evicts instead), and by
// [Mailbox.Post] when the store holds as many mailboxes as it may (or Redis
// is out of memory).
var ErrFull = errors.New("session store is full")

// ErrLimit is returned by [Store.Create] when the record's principal or
// tenant holds as many sessions as it may, and by [Mailbox.Post] when the
// mailbox holds as many messages or bytes as it may. The error is a
// *[LimitError] naming the limit; errors.Is(err, ErrLimit) holds.
var ErrLimit = errors.New("session limit reached")

// The limits a *LimitError names.
const (
	LimitMaxPerPrincipal = "max_per_principal"
	LimitMaxPerTenant    = "max_per_tenant"
	LimitMailboxMessages = "mailbox_messages"
	LimitMailboxBytes    = "mailbox_bytes"
)

// LimitError says which limit refused a Create or a Post.
type LimitError struct {
	// Limit is one of the Limit* constants, the config key's last element.
	Limit string
	// Max is the limit's value.
	Max int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("session limit reached: %s (%d)", e.Limit, e.Max)
}

// Is makes errors.Is(err, ErrLimit) hold for a *LimitError.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// ErrUnavailable is returned when the store cannot be reached or fails to
// answer in time (Redis down, timed out, refusing commands). The request may
// succeed later; the HTTP layer answers 503.
var ErrUnavailable = errors.New("session store unavailable")

// Record is one gateway session.
type Record struct {
	ID string `json:"id"`
	// ProtocolVersion is the version negotiated with the client.
	ProtocolVersion string `json:"protocol_version"`
	// ClientInfo and ClientCapabilities are the client's initialize params,
	// verbatim.
	ClientInfo         json.RawMessage `json:"client_info,omitempty"`
	ClientCapabilities json.RawMessage `json:"client_capabilities,omitempty"`
	// Principal is who created the session; later requests must come from
	// the same principal.
	Principal Principal `json:"principal"`
	// Upstreams maps an upstream name to its session, for the upstreams
	// initialized so far.
	Upstreams map[string]Upstream `json:"upstreams,omitempty"`
	Created   time.Time           `json:"created"`
	LastSeen  time.Time           `json:"last_seen"`
}

// Principal identifies who a session belongs to.
type Principal struct {
	Issuer  string `json:"iss,omitempty"`
	Subject string `json:"sub,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
}

// Upstream is the state of one upstream session.
type Upstream struct {
	// SessionID is the upstream's Mcp-Session-Id ("" if it issued none).
	SessionID string `json:"session_id,omitempty"`
	// ProtocolVersion is the version the upstream agreed to.
	ProtocolVersion string `json:"protocol_version,omitempty"`
	// Capabilities is the upstream's ServerCapabilities, verbatim.
	Capabilities json.RawMessage `json:"capabilities,omitempty"`
	// Listen is set once the client subscribed to a resource of this
	// upstream session or set its log level: the session then has
	// something to hear on the upstream's GET stream, which the replica
	// holding the client's GET stream opens (see internal/listen). It
	// stays set for the upstream session's life.
	Listen bool `json:"listen,omitempty"`
	// Subscribed lists the resources (the upstream's own URIs) the client
	// subscribed to on this upstream session and has not unsubscribed
	// from: an update the upstream sends of any other is not the
	// session's (see internal/subscribe, which bounds it). A
	// value in a Record is never changed in place: a new list replaces it.
	Subscribed []string `json:"subscribed,omitempty"`
}

// Store persists session records.
type Store interface {
	// Create stores a copy of a new record. It sets the stored LastSeen to the
	// current time, and Created too if it is zero. It fails with ErrExists
	// when a live record has the same id, with ErrFull when the store is
	// at capacity (a store may make room instead, by evicting the heaviest
	// holder's least recently used record: see [Memory]), and with a
	// *LimitError (ErrLimit) when r's principal or tenant holds as many
	// live records as the store allows it.
	Create(ctx context.Context, r *Record) error
	// Get returns the record and refreshes its idle expiry. It returns
	// ErrNotFound for an unknown or expired id. The returned record is the
	// caller's to keep; changing it does not change the store.
	Get(ctx context.Context, id string) (*Record, error)
	// SetUpstream records upstream session u for upstream name, provided the
	// current entry's SessionID equals prev ("" meaning "no entry or an entry
	// with no session id"), and returns the new entry. Otherwise it returns
	// the current entry (the zero Upstream if there is none) and ErrConflict.
	// It returns ErrNotFound for an unknown or expired id. It does not
	// refresh the idle expiry.
	SetUpstream(ctx context.Context, id, name, prev string, u Upstream) (Upstream, error)
	// Delete removes the record. Deleting an unknown id is not an error.
	Delete(ctx context.Context, id string) error
}

// Mailbox passes messages between replicas: a queue of opaque messages per
// key, each queue expiring some time after its last Post. All of a
// Mailbox's methods must be safe for use by multiple goroutines, and a
// message posted once is taken at most once, by a single Take on any
// replica.
//
// A key must be non-empty and must not contain '{' or '}' (Redis uses
// braces to place a mailbox's keys in one Cluster slot); the gateway's keys
// are ids made of hex digits and dots. Keys live apart from session ids: a
// mailbox and a session may share a name without touching each other.
type Mailbox interface {
	// Post appends a copy of msg to the queue under key and (re)sets the
	// queue's expiry to ttl, which must be positive: messages not taken
	// within ttl of the last Post are dropped. It never waits for a Take.
	// It fails with ErrFull when the store cannot hold the message, and
	// with a *LimitError (ErrLimit) when the mailbox holds as many
	// messages, or would hold more bytes, than the store allows one; a
	// refused Post changes nothing.
	Post(ctx context.Context, key string, msg []byte, ttl time.Duration) error
	// Take removes and returns the oldest message under key, waiting up to
	// wait for one to be posted if there is none; a zero or negative wait
	// does not wait. It returns ErrNotFound when none arrives in time. ctx
	// cancellation ends the wait with ctx's error; a message that arrives
	// as the wait ends is returned, not dropped. The returned slice is the
	// caller's to keep.
	Take(ctx context.Context, key string, wait time.Duration) ([]byte, error)
}

// checkMailboxKey reports why key cannot name a mailbox, if it cannot.
func checkMailboxKey(key string) error {
	if key == "" || strings.ContainsAny(key, "{}") {
		return fmt.Errorf("session: mailbox key %q: must be non-empty and must not contain '{' or '}'", key)
	}
	return nil
}

// checkPost reports why Post cannot take key and ttl, if it cannot.
func checkPost(key string, ttl time.Duration) error {
	if err := checkMailboxKey(key); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("session: mailbox %q: ttl %v must be positive", key, ttl)
	}
	return nil
}

// checkTake reports why Take cannot start for key, if it cannot: a key
// that cannot name a mailbox, or ctx done already.
func checkTake(ctx context.Context, key string) error {
	if err := checkMailboxKey(key); err != nil {
		return err
	}
	return ctx.Err()
}

// NewID returns a new session id: 128 random bits from crypto/rand, as 32
// lowercase hex characters (visible ASCII, as Streamable HTTP requires).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand docs)
	const hex = "0123456789abcdef"
	out := make([]byte, 32)
	for i, c := range b {
		out[2*i], out[2*i+1] = hex[c>>4], hex[c&0xf]
	}
	return string(out)
}
