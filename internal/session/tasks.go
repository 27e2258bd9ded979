package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// # Tasks
//
// A [TaskStore] keeps the gateway's record of each task an upstream created
// for a client (2025-11-25 basic/utilities/tasks, and the 2026-07-28 Tasks
// extension): which principal it belongs to and where it lives upstream,
// under an id of the gateway's own. Any replica sharing the store can route
// the task's next request. A record holds no secret and none of the task's
// state: its status and result stay with the upstream.

// Task is the gateway's record of one task.
type Task struct {
	// ID is the gateway's task id, the only one its client sees.
	ID string `json:"id"`
	// Principal created the task; no one else may use it.
	Principal Principal `json:"principal"`
	// Upstream is the name of the upstream that runs the task, and
	// Session the upstream session it was created in (an upstream's tasks
	// may be bound to its session). Session.Capabilities is not kept.
	Upstream string   `json:"upstream"`
	Session  Upstream `json:"session"`
	// UpstreamTaskID is the upstream's own id of the task.
	UpstreamTaskID string    `json:"upstream_task_id"`
	Created        time.Time `json:"created"`
	// Expires is when the record is forgotten: the task's ttl from its
	// creation, bounded by the gateway's maximum. The store keeps it to
	// the millisecond.
	Expires time.Time `json:"expires"`
	// Input is what the gateway keeps of the task's outstanding requests
	// for input, for a client of the 2026-07-28 Tasks extension of a
	// 2025-11-25 upstream's task (dispatch/tasks.go); opaque here.
	Input json.RawMessage `json:"input,omitempty"`
}

// TaskLimits bound what [TaskStore.CreateTask] admits. Zero or negative
// means no bound.
type TaskLimits struct {
	MaxPerPrincipal int
	MaxPerTenant    int
	// MaxTasks bounds the records of a store in process memory; a Redis
	// store is bounded by Redis's maxmemory instead.
	MaxTasks int
}

// The limits a *LimitError from CreateTask names: the config keys.
const (
	LimitTasksPerPrincipal = "tasks.max_per_principal"
	LimitTasksPerTenant    = "tasks.max_per_tenant"
	LimitTasks             = "tasks.max_tasks"
)

// TaskCursor is a position in a principal's tasks, which are listed in the
// order of their expiry, then id. The zero TaskCursor is the start.
type TaskCursor struct {
	Expires int64 // Unix ms
	ID      string
}

// After is the position just after t.
func After(t *Task) TaskCursor { return TaskCursor{Expires: t.Expires.UnixMilli(), ID: t.ID} }

// before reports whether t comes at or before c, so a page after c leaves
// it out.
func (c TaskCursor) before(expires int64, id string) bool {
	return expires < c.Expires || (expires == c.Expires && id <= c.ID)
}

// TaskStore keeps task records. All of its methods must be safe for use by
// multiple goroutines.
type TaskStore interface {
	// CreateTask stores a copy of t, which must have an ID, a Principal
	// and an Expires in the future. It fails with ErrExists when a live
	// task has the same id, with a *LimitError (ErrLimit) when t's
	// principal or tenant holds lim's bound of live tasks already (or
	// the store MaxTasks), and with ErrFull when Redis is out of memory.
	CreateTask(ctx context.Context, t *Task, lim TaskLimits) error
	// GetTask returns the task under id, or ErrNotFound when there is
	// none or it expired.
	GetTask(ctx context.Context, id string) (*Task, error)
	// FindTask returns the task that upstream knows as upstreamTaskID in
	// its session sessionID, or ErrNotFound.
	FindTask(ctx context.Context, upstream, sessionID, upstreamTaskID string) (*Task, error)
	// ListTasks returns up to n of p's live tasks after c, in order, and
	// whether more follow.
	ListTasks(ctx context.Context, p Principal, c TaskCursor, n int) ([]*Task, bool, error)
	// UpdateTask replaces the stored copy of t.ID's task with t, keeping
	// its expiry; it returns ErrNotFound when there is none. Two updates
	// at once leave one of them.
	UpdateTask(ctx context.Context, t *Task) error
	// DeleteTask forgets the task under id; an unknown id is no error.
	DeleteTask(ctx context.Context, id string) error
}

// NewTaskID returns a new gateway task id: "task-" and 128 random bits in
// hex. It says nothing of the upstream, its id, or the principal.
func NewTaskID() string { return "task-" + NewID() }

// checkTask reports why CreateTask cannot take t, if it cannot.
func checkTask(t *Task, now time.Time) error {
	switch {
	case t == nil || t.ID == "":
		return fmt.Errorf("session: task has no id")
	case !t.Expires.After(now):
		return fmt.Errorf("session: task %s expires before it is stored", t.ID)
	}
	return nil
}

// upstreamTaskKey names a task by where it lives: fixed length, and no
// brace or separator any of the parts could bring in.
func upstreamTaskKey(upstream, sessionID, upstreamTaskID string) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%d:%s%d:%s%s", len(upstream), upstream, len(sessionID), sessionID, upstreamTaskID))
	return hex.EncodeToString(h[:16])
}
