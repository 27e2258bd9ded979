package tasks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/session"
)

func TestCreatedTask(t *testing.T) {
	for _, tc := range []struct {
		res        string
		ok, modern bool
	}{
		{`{"task":{"taskId":"a","status":"working"}}`, true, false},
		{`{"resultType":"task","taskId":"a","status":"working"}`, true, true},
		{`{"resultType":"task"}`, false, true},
		{`{"content":[],"task":{"taskId":"a"}}`, false, false}, // a tool result naming a task
		{`{"task":"a"}`, false, false},
		{`{"task":{"taskId":""}}`, false, false},
		{`{"content":[{"type":"text","text":"taskId"}]}`, false, false},
	} {
		o, err := jsonx.ParseValidObject([]byte(tc.res))
		if err != nil {
			t.Fatal(err)
		}
		_, modern, ok := created(o)
		if ok != tc.ok || (ok && modern != tc.modern) {
			t.Errorf("%s: ok %v modern %v", tc.res, ok, modern)
		}
	}
}

func TestModernTask(t *testing.T) {
	o, _ := jsonx.ParseValidObject([]byte(`{"taskId":"t","status":"working","ttl":null,"pollInterval":5,"x":1}`))
	if got := string(modernTask(o).Bytes()); got != `{"taskId":"t","status":"working","ttlMs":null,"pollIntervalMs":5,"x":1}` {
		t.Errorf("got %s", got)
	}
}

// TestTaskCursor: a cursor round-trips, and one the client made up is
// refused rather than read.
func TestTaskCursor(t *testing.T) {
	c := session.TaskCursor{Expires: 1700000000123, ID: session.NewTaskID()}
	got, ok := decodeCursor(encodeCursor(c))
	if !ok || got != c {
		t.Errorf("round trip: %+v %v", got, ok)
	}
	for _, bad := range []string{"", "!!", "MTIz", "eC50YXNrLWE", encodeCursor(session.TaskCursor{ID: "other"}), strings.Repeat("QUFB", 100)} {
		if _, ok := decodeCursor(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestExposeCallResult(t *testing.T) {
	tk := &session.Task{ID: "task-1", UpstreamTaskID: "up"}
	o, _ := jsonx.ParseValidObject([]byte(`{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up"},"k":1}}`))
	if got := string(exposeCallResult(o, tk, "", true)); got != `{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"task-1"},"k":1}}` {
		t.Errorf("tasks/result: %s", got)
	}
	o, _ = jsonx.ParseValidObject([]byte(`{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up"}}}`))
	if got := string(exposeCallResult(o, tk, "", false)); got != `{"content":[]}` {
		t.Errorf("inlined: %s", got)
	}
}

// TestTaskError: an upstream's error names the gateway's task id, never
// the upstream's, without mangling the text around a short one.
func TestTaskError(t *testing.T) {
	ts := &Tasks{}
	long := &session.Task{ID: "task-g", UpstreamTaskID: "786512e2-9e0d"}
	err := ts.taskError(t.Context(), &jsonrpc.Error{Code: -32602, Message: "Cannot cancel task 786512e2-9e0d: already terminal", Data: json.RawMessage(`{"id":"786512e2-9e0d"}`)}, long, "tasks/cancel")
	if je := err.(*jsonrpc.Error); je.Message != "Cannot cancel task task-g: already terminal" || string(je.Data) != `{"id":"task-g"}` {
		t.Errorf("long id: %+v", je)
	}
	short := &session.Task{ID: "task-g", UpstreamTaskID: "1"}
	err = ts.taskError(t.Context(), &jsonrpc.Error{Code: -32602, Message: "Task 1 is terminal (1 of 1)", Data: json.RawMessage(`1`)}, short, "tasks/cancel")
	if je := err.(*jsonrpc.Error); strings.Contains(je.Message, "1") || je.Data != nil {
		t.Errorf("short id: %+v", je)
	}
}
