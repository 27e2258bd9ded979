// Package echoserver is the upstream MCP server of the benchmarks: a go-sdk
// server with an `echo` tool and, for tools/list tests, any number of extra
// tools, served over Streamable HTTP.
//
// It is built to cost as little as a go-sdk server can, so that what the
// benchmarks measure is the hop in front of it: the echo tool is registered
// with the low-level [mcp.Server.AddTool] (no schema validation, one small
// unmarshal of the arguments), nothing is logged, and the optional request
// counting of [Options.Count] only peeks at the method of small bodies.
//
// bench/upstream serves it as a command; cmd/mcpload's tests serve it with
// httptest.
package echoserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where [NewHandler] serves the MCP endpoint.
const Path = "/mcp"

// StatsPath is where [NewHandler] serves the request counts of
// [Options.Count], as a JSON [Stats] object.
const StatsPath = "/stats"

// Options configure [NewHandler]. The zero value serves the echo tool alone,
// answering with SSE streams.
type Options struct {
	// ExtraTools is the number of tools served besides echo, named t0000,
	// t0001 and so on, each with a description and a small input schema so
	// that tools/list results have a realistic size.
	ExtraTools int
	// JSONResponse answers POSTs with application/json instead of a
	// text/event-stream holding one event.
	JSONResponse bool
	// Count counts requests by JSON-RPC method, served at [StatsPath]. It
	// buffers each request body to read the method, so it costs a little.
	Count bool
	// SessionTimeout closes sessions idle for this long, so that long
	// benchmark runs do not accumulate them. Zero means 10 minutes.
	SessionTimeout time.Duration
}

// Stats are the request counts served at [StatsPath].
type Stats struct {
	// Requests counts every HTTP request to [Path].
	Requests int64 `json:"requests"`
	// Methods counts POSTed JSON-RPC messages by method ("" for responses
	// and bodies that are not one JSON object).
	Methods map[string]int64 `json:"methods"`
}

// echoSchema is the echo tool's input schema.
var echoSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"The text to return."}},"required":["text"]}`)

// extraSchema is the input schema of the extra tools.
var extraSchema = json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"limit":{"type":"integer","description":"At most this many results."}}}`)

// NewServer returns the benchmark MCP server with the echo tool and
// extraTools more tools. One server serves any number of sessions.
func NewServer(extraTools int) *mcp.Server {
	// One page holds every tool, so that a tools/list is one request.
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "1.0.0"},
		&mcp.ServerOptions{PageSize: max(mcp.DefaultPageSize, extraTools+1)})
	s.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: "Returns the given text, unchanged.",
		InputSchema: echoSchema,
	}, echo)
	for i := range extraTools {
		s.AddTool(&mcp.Tool{
			Name:        fmt.Sprintf("t%04d", i),
			Description: fmt.Sprintf("Benchmark tool number %d: does nothing and answers ok.", i),
			InputSchema: extraSchema,
		}, ok)
	}
	return s
}

// echo returns its text argument as one text content block.
func echo(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "bad arguments: " + err.Error()}}}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: args.Text}}}, nil
}

func ok(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
}

// NewHandler returns an http.Handler serving the benchmark server at [Path]
// (and its counts at [StatsPath] when opts.Count is set), and the REST echo
// API under [RESTPath].
func NewHandler(opts Options) http.Handler {
	s := NewServer(opts.ExtraTools)
	timeout := opts.SessionTimeout
	if timeout == 0 {
		timeout = 10 * time.Minute
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{JSONResponse: opts.JSONResponse, SessionTimeout: timeout})
	mux := http.NewServeMux()
	if opts.Count {
		c := &counter{methods: make(map[string]int64)}
		h = c.wrap(h)
		mux.HandleFunc("GET "+StatsPath, c.serveStats)
	}
	mux.Handle(Path, h)
	mux.HandleFunc("GET "+RESTPath+"/openapi.json", serveRESTDocument)
	mux.HandleFunc("POST "+RESTPath+"/echo", restEcho)
	return mux
}

// counter counts requests by JSON-RPC method.
type counter struct {
	requests atomic.Int64

	mu      sync.Mutex
	methods map[string]int64
}

// countBodyLimit bounds the bodies whose method is read: larger ones are
// tool calls with big payloads, counted as "" rather than decoded.
const countBodyLimit = 64 << 10

func (c *counter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.requests.Add(1)
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(io.LimitReader(r.Body, countBodyLimit+1))
			if err != nil {
				http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
				return
			}
			var msg struct {
				Method string `json:"method"`
			}
			if len(body) <= countBodyLimit {
				_ = json.Unmarshal(body, &msg) // not an object: counted as ""
			}
			c.mu.Lock()
			c.methods[msg.Method]++
			c.mu.Unlock()
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		}
		next.ServeHTTP(w, r)
	})
}

func (c *counter) serveStats(w http.ResponseWriter, _ *http.Request) {
	st := Stats{Requests: c.requests.Load(), Methods: make(map[string]int64)}
	c.mu.Lock()
	for k, v := range c.methods {
		st.Methods[k] = v
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}
