package rpcerr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// TestToolError: a tool failure's text becomes a result with isError,
// which IsToolError tells from a result without it.
func TestToolError(t *testing.T) {
	err := fmt.Errorf("call: %w", FailTool(`Invalid arguments for tool "a"`))
	var f *ToolFailure
	if !errors.As(err, &f) || f.Text != `Invalid arguments for tool "a"` {
		t.Fatalf("errors.As(%v) = %v", err, f)
	}
	res := ToolError(f.Text)
	var got struct {
		Content []struct{ Type, Text string }
		IsError bool
	}
	if err := json.Unmarshal(res, &got); err != nil || !got.IsError || len(got.Content) != 1 || got.Content[0].Type != "text" || got.Content[0].Text != f.Text {
		t.Errorf("ToolError = %s (%v)", res, err)
	}
	for res, want := range map[string]bool{
		string(res):                      true,
		`{"content":[],"isError":false}`: false,
		`{"content":[{"type":"text","text":"\"isError\":true"}]}`: false,
		`{"content":[]}`:  false,
		`{"isError":true`: false, // not JSON
	} {
		if got := IsToolError(json.RawMessage(res)); got != want {
			t.Errorf("IsToolError(%s) = %v, want %v", res, got, want)
		}
	}
}

// TestCancelled: a request ends cancelled when its client cancelled it or
// went away, not when it timed out.
func TestCancelled(t *testing.T) {
	byClient, cancel := context.WithCancelCause(context.Background())
	cancel(ErrCancelledByClient)
	gone, cancel2 := context.WithCancel(context.Background())
	cancel2()
	timedOut, cancel3 := context.WithTimeout(context.Background(), 0)
	defer cancel3()
	<-timedOut.Done()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"by the client", byClient, context.Canceled, true},
		{"connection closed", gone, context.Canceled, true},
		{"write failed", context.Background(), fmt.Errorf("write: %w", ErrClientGone), true},
		{"timeout", timedOut, context.DeadlineExceeded, false},
		{"other", context.Background(), errors.New("boom"), false},
	} {
		if got := Cancelled(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: Cancelled = %v, want %v", tc.name, got, tc.want)
		}
	}
}
