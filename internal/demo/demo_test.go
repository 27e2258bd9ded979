package demo

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect serves Handler over HTTP and returns a client session to it.
func connect(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(Handler())
	t.Cleanup(srv.Close)
	client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "0"}, opts)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %+v", res.Content)
	}
	if len(res.Content) != 1 {
		t.Fatalf("got %d content blocks, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want *mcp.TextContent", res.Content[0])
	}
	return tc.Text
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("structuredContent %s: %v", data, err)
	}
	return m
}

func TestTools(t *testing.T) {
	ctx := t.Context()
	cs := connect(t, nil)

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	var names []string
	for _, tool := range list.Tools {
		tools[tool.Name] = tool
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"add", "countdown", "echo", "time"}, names); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}
	if tools["add"].OutputSchema == nil {
		t.Error("add has no output schema")
	}
	if a := tools["time"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("time annotations = %+v, want readOnlyHint", a)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "hi" {
		t.Errorf("echo text = %q, want %q", got, "hi")
	}
	if diff := cmp.Diff(map[string]any{"text": "hi"}, structured(t, res)); diff != "" {
		t.Errorf("echo structuredContent mismatch (-want +got):\n%s", diff)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "2.5" {
		t.Errorf("add text = %q, want 2.5", got)
	}
	if diff := cmp.Diff(map[string]any{"sum": 2.5}, structured(t, res)); diff != "" {
		t.Errorf("add structuredContent mismatch (-want +got):\n%s", diff)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "time"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339, textOf(t, res)); err != nil {
		t.Errorf("time: %v", err)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "countdown", Arguments: map[string]any{"from": 21}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		t.Errorf("countdown from 21: got success, want a validation error")
	}
}

func TestCountdownProgressAndLogs(t *testing.T) {
	ctx := t.Context()
	var (
		mu       sync.Mutex
		progress []string
		logs     []string
	)
	cs := connect(t, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Message)
		},
		//lint:ignore SA1019 logging is deprecated only from 2026-07-28; the 2025-11-25 sessions the gateway serves still use it
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, req.Params.Data.(string))
		},
	})
	//lint:ignore SA1019 logging is deprecated only from 2026-07-28; the 2025-11-25 sessions the gateway serves still use it
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "countdown", Arguments: map[string]any{"from": 3, "delay_ms": 1}}
	params.SetProgressToken("cd")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "liftoff" {
		t.Errorf("countdown = %q, want liftoff", got)
	}
	// Notifications are handled asynchronously; wait for them.
	want := []string{"T-minus 3", "T-minus 2", "T-minus 1"}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		gotProgress, gotLogs := slices.Clone(progress), slices.Clone(logs)
		mu.Unlock()
		if len(gotProgress) >= len(want) && len(gotLogs) >= len(want) || time.Now().After(deadline) {
			if diff := cmp.Diff(want, gotProgress); diff != "" {
				t.Errorf("progress mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, gotLogs); diff != "" {
				t.Errorf("logs mismatch (-want +got):\n%s", diff)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestResourcesAndPrompts(t *testing.T) {
	ctx := t.Context()
	cs := connect(t, nil)

	resources, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resources.Resources) != 1 || resources.Resources[0].URI != "demo://readme" || resources.Resources[0].MIMEType != "text/markdown" {
		t.Errorf("resources = %+v, want demo://readme (text/markdown)", resources.Resources)
	}
	readme, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://readme"})
	if err != nil {
		t.Fatal(err)
	}
	if c := readme.Contents; len(c) != 1 || !strings.Contains(c[0].Text, "countdown") {
		t.Errorf("readme contents = %+v", c)
	}

	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "demo://greeting/{name}" {
		t.Errorf("templates = %+v", templates.ResourceTemplates)
	}
	greeting, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://greeting/Ada"})
	if err != nil {
		t.Fatal(err)
	}
	if c := greeting.Contents; len(c) != 1 || c[0].Text != "Hello, Ada!" {
		t.Errorf("greeting contents = %+v", c)
	}

	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := prompts.Prompts; len(p) != 1 || p[0].Name != "review" || len(p[0].Arguments) != 1 || !p[0].Arguments[0].Required {
		t.Errorf("prompts = %+v", p)
	}
	prompt, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "review", Arguments: map[string]string{"code": "x := 1"}})
	if err != nil {
		t.Fatal(err)
	}
	if m := prompt.Messages; len(m) != 1 || m[0].Role != "user" || !strings.Contains(m[0].Content.(*mcp.TextContent).Text, "x := 1") {
		t.Errorf("review messages = %+v", m)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "review"}); err == nil {
		t.Error("review without code: got nil error")
	}
}
