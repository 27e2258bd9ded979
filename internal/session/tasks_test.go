package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/testkit"
)

// taskStores runs f against each TaskStore: in memory, and in Redis twice
// over (two replicas of one prefix).
func taskStores(t *testing.T, f func(t *testing.T, a, b session.TaskStore)) {
	t.Run("memory", func(t *testing.T) {
		m := session.NewMemoryTasks(nil)
		f(t, m, m)
	})
	t.Run("redis", func(t *testing.T) {
		e := newRedisEnv(t)
		f(t, e.store(session.RedisOptions{}).TaskStore(), e.store(session.RedisOptions{}).TaskStore())
	})
}

var (
	alice = session.Principal{Issuer: "https://idp", Subject: "alice", Tenant: "acme"}
	bob   = session.Principal{Issuer: "https://idp", Subject: "bob", Tenant: "acme"}
	eve   = session.Principal{Issuer: "https://idp", Subject: "alice", Tenant: "evil"}
)

func newTask(p session.Principal, up string, ttl time.Duration) *session.Task {
	now := time.Now()
	return &session.Task{ID: session.NewTaskID(), Principal: p, Upstream: "a",
		Session: session.Upstream{SessionID: "s-1", ProtocolVersion: "2025-11-25"}, UpstreamTaskID: up,
		Created: now, Expires: now.Add(ttl)}
}

func TestTaskStoreRoundTrip(t *testing.T) {
	taskStores(t, func(t *testing.T, a, b session.TaskStore) {
		ctx := context.Background()
		tk := newTask(alice, "up-1", time.Minute)
		if err := a.CreateTask(ctx, tk, session.TaskLimits{}); err != nil {
			t.Fatal(err)
		}
		if err := a.CreateTask(ctx, tk, session.TaskLimits{}); !errors.Is(err, session.ErrExists) {
			t.Errorf("second create: %v, want ErrExists", err)
		}
		got, err := b.GetTask(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Principal != alice || got.Upstream != "a" || got.Session.SessionID != "s-1" || got.UpstreamTaskID != "up-1" ||
			!got.Expires.Equal(tk.Expires.Truncate(time.Millisecond)) {
			t.Errorf("got %+v", got)
		}
		found, err := b.FindTask(ctx, "a", "s-1", "up-1")
		if err != nil || found.ID != tk.ID {
			t.Errorf("FindTask = %v, %v", found, err)
		}
		if _, err := b.FindTask(ctx, "a", "s-2", "up-1"); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("FindTask in another session: %v", err)
		}
		if _, err := b.GetTask(ctx, "task-unknown"); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("unknown: %v", err)
		}
		tk.Input = json.RawMessage(`{"k":{"id":1}}`)
		tk.Upstream = "changed"
		if err := b.UpdateTask(ctx, tk); err != nil {
			t.Fatal(err)
		}
		if got, err := a.GetTask(ctx, tk.ID); err != nil || string(got.Input) != `{"k":{"id":1}}` || got.Upstream != "a" {
			t.Errorf("updated: %+v %v", got, err)
		}
		if err := b.DeleteTask(ctx, tk.ID); err != nil {
			t.Fatal(err)
		}
		if err := a.UpdateTask(ctx, tk); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("updating a deleted task: %v", err)
		}
		if _, err := a.GetTask(ctx, tk.ID); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("deleted: %v", err)
		}
		if _, err := a.FindTask(ctx, "a", "s-1", "up-1"); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("deleted, by upstream id: %v", err)
		}
		if err := a.DeleteTask(ctx, tk.ID); err != nil {
			t.Errorf("deleting again: %v", err)
		}
	})
}

func TestTaskStoreExpiry(t *testing.T) {
	taskStores(t, func(t *testing.T, a, b session.TaskStore) {
		ctx := context.Background()
		lim := session.TaskLimits{MaxPerPrincipal: 1}
		tk := newTask(alice, "up-1", 150*time.Millisecond)
		if err := a.CreateTask(ctx, tk, lim); err != nil {
			t.Fatal(err)
		}
		if err := a.CreateTask(ctx, newTask(alice, "up-2", time.Minute), lim); !errors.Is(err, session.ErrLimit) {
			t.Fatalf("over the bound: %v", err)
		}
		testkit.Eventually(t, 5*time.Second, func() bool {
			_, err := b.GetTask(ctx, tk.ID)
			return errors.Is(err, session.ErrNotFound)
		}, "task %s has not expired", tk.ID)
		// An expired task no longer counts.
		if err := b.CreateTask(ctx, newTask(alice, "up-2", time.Minute), lim); err != nil {
			t.Errorf("after expiry: %v", err)
		}
		if err := a.CreateTask(ctx, newTask(alice, "up-3", -time.Second), lim); err == nil {
			t.Error("a task expired already was stored")
		}
	})
}

// TestTaskStoreBounds fills a principal's and a tenant's bounds as a
// hostile client would, and checks the refusal names the bound and leaves
// the others alone.
func TestTaskStoreBounds(t *testing.T) {
	taskStores(t, func(t *testing.T, a, b session.TaskStore) {
		ctx := context.Background()
		lim := session.TaskLimits{MaxPerPrincipal: 5, MaxPerTenant: 8, MaxTasks: 12}
		n := 0
		var err error
		for ; n < 100; n++ {
			if err = a.CreateTask(ctx, newTask(alice, fmt.Sprint("a", n), time.Minute), lim); err != nil {
				break
			}
		}
		var le *session.LimitError
		if n != 5 || !errors.As(err, &le) || le.Limit != session.LimitTasksPerPrincipal || le.Max != 5 {
			t.Fatalf("alice made %d tasks, then %v", n, err)
		}
		for n = 0; n < 100; n++ {
			if err = b.CreateTask(ctx, newTask(bob, fmt.Sprint("b", n), time.Minute), lim); err != nil {
				break
			}
		}
		if n != 3 || !errors.As(err, &le) || le.Limit != session.LimitTasksPerTenant {
			t.Fatalf("bob made %d tasks, then %v", n, err)
		}
		// Another tenant is untouched.
		if err := a.CreateTask(ctx, newTask(eve, "e", time.Minute), lim); err != nil {
			t.Errorf("another tenant: %v", err)
		}
	})
	t.Run("memory/max_tasks", func(t *testing.T) {
		m := session.NewMemoryTasks(nil)
		lim := session.TaskLimits{MaxTasks: 3}
		for i := range 10 {
			p := session.Principal{Subject: fmt.Sprint(i), Tenant: fmt.Sprint(i)}
			err := m.CreateTask(context.Background(), newTask(p, "x", time.Minute), lim)
			if (i < 3) != (err == nil) {
				t.Errorf("task %d: %v", i, err)
			}
		}
		if m.Len() != 3 {
			t.Errorf("holds %d", m.Len())
		}
	})
}

func TestTaskStoreList(t *testing.T) {
	taskStores(t, func(t *testing.T, a, b session.TaskStore) {
		ctx := context.Background()
		var want []string
		for i := range 7 {
			tk := newTask(alice, fmt.Sprint("a", i), time.Minute+time.Duration(i)*time.Second)
			if err := a.CreateTask(ctx, tk, session.TaskLimits{}); err != nil {
				t.Fatal(err)
			}
			want = append(want, tk.ID)
		}
		if err := a.CreateTask(ctx, newTask(bob, "b", time.Minute), session.TaskLimits{}); err != nil {
			t.Fatal(err)
		}
		var got []string
		var c session.TaskCursor
		for pages := 0; ; pages++ {
			page, more, err := b.ListTasks(ctx, alice, c, 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range page {
				got = append(got, tk.ID)
				c = session.After(tk)
			}
			if !more {
				break
			}
			if pages > 5 {
				t.Fatal("pages without end")
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("listed %v, want %v", got, want)
		}
		if page, _, _ := b.ListTasks(ctx, eve, session.TaskCursor{}, 10); len(page) != 0 {
			t.Errorf("another tenant's principal sees %d tasks", len(page))
		}
	})
}
