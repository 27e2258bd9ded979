// Package demo is a small, self-contained MCP server that `gateway demo`
// serves next to the gateway, so that a first run has an upstream to
// aggregate without any other setup.
//
// It shows one of each MCP feature the gateway passes through: plain and
// structured tool results, an output schema, progress and log notifications,
// tool annotations, a resource, a resource template and a prompt.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name is the server name the demo reports in its initialize result.
const Name = "demo"

const (
	readmeURI        = "demo://readme"
	greetingTemplate = "demo://greeting/{name}"
	greetingPrefix   = "demo://greeting/"
)

// readme is the text of the demo://readme resource.
const readme = `# The demo upstream

This MCP server ships inside the gateway binary so that ` + "`gateway demo`" + `
has something to aggregate. Through the gateway its tools are named
` + "`demo__<tool>`" + `.

## Tools
- **echo** ` + "`{text}`" + `: returns the text, as text and as structured content.
- **add** ` + "`{a, b}`" + `: returns the sum; declares an output schema.
- **countdown** ` + "`{from, delay_ms}`" + `: counts down, sending one progress
  notification per step (if the request has a progress token) and one log
  message per step (if the client set a log level), then says "liftoff".
- **time**: the current UTC time; read-only.

## Resources
- ` + "`demo://readme`" + `: this text.
- ` + "`demo://greeting/{name}`" + `: a greeting for any name.

## Prompts
- **review** ` + "`{code}`" + `: asks the model to review a piece of code.
`

// NewServer returns a new demo MCP server. Each call returns an independent
// server; a server may serve any number of sessions.
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Title: "Gateway demo", Version: "1.0.0"}, &mcp.ServerOptions{
		Instructions: "A demo server: try the countdown tool with a progress token, or read demo://readme.",
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "echo",
		Description: "Returns the given text.",
	}, echo)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "add",
		Description: "Adds two numbers.",
	}, add)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "countdown",
		Description: "Counts down from `from` to zero, one step every `delay_ms` milliseconds, reporting progress and log messages on the way.",
		InputSchema: countdownSchema,
	}, countdown)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "time",
		Description: "Returns the current UTC time.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, currentTime)

	s.AddResource(&mcp.Resource{
		URI:         readmeURI,
		Name:        "readme",
		Title:       "About the demo",
		Description: "What this demo server offers.",
		MIMEType:    "text/markdown",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
			{URI: readmeURI, MIMEType: "text/markdown", Text: readme},
		}}, nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: greetingTemplate,
		Name:        "greeting",
		Description: "A greeting for the given name.",
		MIMEType:    "text/plain",
	}, greeting)

	s.AddPrompt(&mcp.Prompt{
		Name:        "review",
		Description: "Asks for a review of a piece of code.",
		Arguments: []*mcp.PromptArgument{
			{Name: "code", Description: "The code to review.", Required: true},
		},
	}, review)
	return s
}

// Handler returns an MCP Streamable HTTP handler serving one demo server,
// with stateful sessions and SSE responses.
func Handler() http.Handler {
	s := NewServer()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to return"`
}

type echoResult struct {
	Text string `json:"text"`
}

func echo(_ context.Context, _ *mcp.CallToolRequest, args echoArgs) (*mcp.CallToolResult, echoResult, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: args.Text}}}, echoResult(args), nil
}

type addArgs struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

type addResult struct {
	Sum float64 `json:"sum" jsonschema:"a + b"`
}

func add(_ context.Context, _ *mcp.CallToolRequest, args addArgs) (*mcp.CallToolResult, addResult, error) {
	sum := args.A + args.B
	text := strconv.FormatFloat(sum, 'g', -1, 64)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, addResult{Sum: sum}, nil
}

// countdownSchema is written out rather than inferred, for its bounds and
// defaults: the SDK validates arguments against it and fills in defaults
// before the handler runs.
var countdownSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"from": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5, "description": "the number to count down from"},
		"delay_ms": {"type": "integer", "minimum": 0, "maximum": 2000, "default": 300, "description": "milliseconds between steps"}
	},
	"additionalProperties": false
}`)

type countdownArgs struct {
	From    int `json:"from"`
	DelayMS int `json:"delay_ms"`
}

func countdown(ctx context.Context, req *mcp.CallToolRequest, args countdownArgs) (*mcp.CallToolResult, any, error) {
	token := req.Params.GetProgressToken()
	delay := time.Duration(args.DelayMS) * time.Millisecond
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for n := args.From; n > 0; n-- {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-timer.C:
			timer.Reset(delay)
		}
		step := args.From - n + 1
		msg := fmt.Sprintf("T-minus %d", n)
		if token != nil {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      float64(step),
				Total:         float64(args.From),
				Message:       msg,
			}); err != nil {
				return nil, nil, err
			}
		}
		// Log sends nothing unless the client has set a log level.
		//lint:ignore SA1019 logging is deprecated only from 2026-07-28; the 2025-11-25 sessions the gateway serves still use it
		if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{
			Level:  "info",
			Logger: "countdown",
			Data:   msg,
		}); err != nil {
			return nil, nil, err
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "liftoff"}}}, nil, nil
}

type timeResult struct {
	Time string `json:"time" jsonschema:"the current UTC time, RFC 3339"`
}

func currentTime(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, timeResult, error) {
	now := time.Now().UTC().Format(time.RFC3339)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: now}}}, timeResult{Time: now}, nil
}

func greeting(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	name, err := url.PathUnescape(strings.TrimPrefix(uri, greetingPrefix))
	if err != nil || name == "" || !strings.HasPrefix(uri, greetingPrefix) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
		{URI: uri, MIMEType: "text/plain", Text: "Hello, " + name + "!"},
	}}, nil
}

func review(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	code, ok := req.Params.Arguments["code"]
	if !ok || code == "" {
		return nil, fmt.Errorf("review: missing required argument %q", "code")
	}
	return &mcp.GetPromptResult{
		Description: "Code review",
		Messages: []*mcp.PromptMessage{{
			Role:    "user",
			Content: &mcp.TextContent{Text: "Please review the following code. Point out bugs first, then style.\n\n```\n" + code + "\n```"},
		}},
	}, nil
}
