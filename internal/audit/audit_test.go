package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/gateway/internal/config"
)

// lines decodes every JSON line of buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(buf)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestRecord(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf)
	at := time.Date(2026, 3, 1, 12, 30, 0, 123456789, time.UTC)
	l.Record(context.Background(), Record{
		Time:      at,
		Event:     EventToolCall,
		Tenant:    "acme",
		Subject:   "user-1",
		ClientID:  "vscode",
		SessionID: "s-1",
		Method:    "tools/call",
		Upstream:  "github",
		Tool:      "create_issue",
		Decision:  DecisionAllow,
		Outcome:   OutcomeIsError,
		Duration:  1500 * time.Microsecond,
		TraceID:   "0af7651916cd43dd8448eb211c80319c",
		Arguments: "sha256:abc",
	})
	l.Record(context.Background(), Record{
		Time:     at,
		Event:    EventAuthFailure,
		Decision: DecisionDeny,
		Outcome:  OutcomeDenied,
		Reason:   "invalid_token",
	})
	got := lines(t, &buf)
	want := []map[string]any{{
		"time": "2026-03-01T12:30:00.123456789Z", "level": "INFO", "msg": "audit",
		"event": "tools/call", "tenant": "acme", "subject": "user-1", "client_id": "vscode",
		"session_id": "s-1", "method": "tools/call", "upstream": "github", "tool": "create_issue",
		"decision": "allow", "outcome": "is_error", "duration_ms": 1.5,
		"trace_id": "0af7651916cd43dd8448eb211c80319c", "arguments": "sha256:abc",
	}, {
		// Empty fields are left out.
		"time": "2026-03-01T12:30:00.123456789Z", "level": "INFO", "msg": "audit",
		"event": "auth_failure", "decision": "deny", "outcome": "denied", "reason": "invalid_token",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestRecordFromContext(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	// A cancelled context (the client went away) still gets its record.
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	before := time.Now()
	l.Record(ctx, Record{Event: EventResourceRead, URI: "repo://acme/x"})
	got := lines(t, &buf)
	if len(got) != 1 {
		t.Fatalf("got %d lines", len(got))
	}
	if got[0]["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || got[0]["uri"] != "repo://acme/x" {
		t.Errorf("got %v", got[0])
	}
	ts, err := time.Parse(time.RFC3339Nano, got[0]["time"].(string))
	if err != nil || ts.Before(before.Add(-time.Second)) {
		t.Errorf("time = %v, want about now", got[0]["time"])
	}
}

func TestNilLogger(t *testing.T) {
	var l *Logger
	if l.Enabled() {
		t.Error("nil Logger is enabled")
	}
	l.Record(context.Background(), Record{Event: EventToolCall})
	if err := l.Write(context.Background(), Record{}); err != nil {
		t.Error(err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteError(t *testing.T) {
	l := New(failWriter{})
	if err := l.Write(context.Background(), Record{Event: EventToolCall}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Write error = %v", err)
	}
	l.Record(context.Background(), Record{Event: EventToolCall}) // does not panic
}

func TestConcurrentRecords(t *testing.T) {
	var buf safeBuffer
	l := New(&buf)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				l.Record(context.Background(), Record{Event: EventToolCall, Tool: strings.Repeat("x", 500)})
			}
		})
	}
	wg.Wait()
	if got := len(lines(t, &buf.b)); got != 800 {
		t.Errorf("%d lines, want 800", got)
	}
}

// safeBuffer is a bytes.Buffer that can be written concurrently. (The
// handler serializes its writes already; this only keeps the race
// detector honest about the test itself.)
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func TestOpen(t *testing.T) {
	var stderr, stdout bytes.Buffer
	for _, tt := range []struct {
		output string
		want   *bytes.Buffer
	}{{"", &stderr}, {"stderr", &stderr}, {"stdout", &stdout}} {
		stderr.Reset()
		stdout.Reset()
		l, c, err := Open(config.Audit{Output: tt.output}, &stderr, &stdout)
		if err != nil {
			t.Fatal(err)
		}
		l.Record(context.Background(), Record{Event: EventToolCall})
		if tt.want.Len() == 0 || stderr.Len()+stdout.Len() != tt.want.Len() {
			t.Errorf("output %q: stderr %q, stdout %q", tt.output, stderr.String(), stdout.String())
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}

	l, c, err := Open(config.Audit{Output: "off"}, &stderr, &stdout)
	if err != nil || l != nil || c == nil {
		t.Errorf("off: %v, %v, %v", l, c, err)
	}
}

func TestOpenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	for i := range 2 {
		l, c, err := Open(config.Audit{Output: path}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		l.Record(context.Background(), Record{Event: EventToolCall, Tool: []string{"first", "second"}[i]})
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := lines(t, bytes.NewBuffer(data))
	if len(got) != 2 || got[0]["tool"] != "first" || got[1]["tool"] != "second" {
		t.Errorf("file holds %v, want both records, appended", got)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("mode %v, want 0600", perm)
	}

	if _, _, err := Open(config.Audit{Output: filepath.Join(t.TempDir(), "missing", "audit.log")}, nil, nil); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
}
