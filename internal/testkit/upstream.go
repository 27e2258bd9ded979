package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// UpstreamTools lists the names of the tools an [Upstream] registers by
// default, in alphabetical order.
var UpstreamTools = []string{"ask", "block", "echo", "fail", "gate", "headers", "meta", "progress"}

// OptionalTools are tools an [Upstream] registers only when
// [UpstreamOptions.Tools] names them.
var OptionalTools = []string{"log", "region"}

// UpstreamOptions configures an [Upstream]. The zero value registers every
// tool in [UpstreamTools] and answers with SSE.
type UpstreamOptions struct {
	// JSONResponse makes the upstream answer POSTs with a single
	// application/json body instead of an SSE stream. Progress notifications
	// then have no request stream to travel on.
	JSONResponse bool
	// Tools, if non-nil, lists the only tools of [UpstreamTools] to register;
	// an empty non-nil slice registers none. An unknown name fails the test.
	Tools []string
	// ExtraTools registers that many more trivial tools, named t000, t001, …,
	// each of which returns its own name as text.
	ExtraTools int
	// Stateless serves the 2026-07-28 revision (the SDK's stateless mode):
	// no sessions, server/discover, per-request _meta.
	Stateless bool
	// Instructions are the server's instructions, in its initialize (or
	// server/discover) result.
	Instructions string
	// AssumeCapable makes the server act as if every client declared
	// elicitation (form and url), sampling and roots, whatever it
	// declared: an upstream that asks without looking (see
	// [AssumeCapable]).
	AssumeCapable bool
}

// RecordedRequest is one HTTP request an [Upstream] received.
type RecordedRequest struct {
	Method string      // HTTP method
	Header http.Header // HTTP headers, as received
	// RPCMethod is the JSON-RPC method of the body: empty for a body without
	// one (GET, DELETE, a client's response); for a batch, the methods of its
	// messages joined by commas.
	RPCMethod string
	Body      []byte
}

// An Upstream is a go-sdk MCP server served over Streamable HTTP on
// 127.0.0.1 (stateful sessions). Its name is the server name it reports and
// appears in every tool result, so a test can tell upstreams apart.
//
// Tools (see [UpstreamOptions.Tools]):
//   - echo {text}: text "<name>:<text>", structuredContent
//     {"text": text, "upstream": name}, result _meta {"testkit/upstream": name}.
//   - progress {steps}: one progress notification per step (progress i,
//     total steps, message "step i") and one log message per step (if the
//     client set a level), then "done".
//   - gate: one progress notification "waiting", then blocks until
//     [Upstream.Release] or cancellation, then "released".
//   - block: one progress notification "blocked", then blocks until its
//     request is cancelled; reports "block" on [Upstream.Cancelled].
//   - headers: the JSON of the HTTP headers of this call's request, as text.
//   - meta: structuredContent {"meta": <params._meta as received>}.
//   - fail: a tool error result (isError true).
//   - log {text} (optional): one log message (level "info", logger
//     <name>, data text) however the client set its level, then "logged".
//     The SDK sends log messages only once logging/setLevel has set a level,
//     so the upstream sets its session's level to "debug" first: from then
//     on every tool of that session logs.
//   - region {region, text} (optional): "<upstream>:<region>:<text>"; region
//     is marked x-mcp-header "Region", so a 2026-07-28 caller must mirror it
//     in Mcp-Param-Region (the SDK's server checks).
//   - ask: asks the client for a name with elicitation/create (a form with
//     one string property "name"; with Stateless, in an input_required
//     result with requestState "asked"), then "<upstream>:hello <name>", or
//     "<upstream>:<action>" when the user did not accept, or a tool error
//     "<upstream>:cannot ask: <error>" when the request failed.
//
// Progress notifications are sent only when the request has a progress token.
// Resources: test://<name>/readme (text/plain "readme of <name>") and the
// template test://<name>/items/{id} ("item <id> of <name>"). Prompt: greet
// {who} → one user message "hello <who> from <name>". Completion always offers
// ["alpha", "beta"]. The logging capability is on.
//
// All methods are safe for concurrent use.
type Upstream struct {
	Name string
	URL  string // the MCP endpoint: http://127.0.0.1:PORT/mcp

	tb    testing.TB
	opts  UpstreamOptions
	srv   *httptest.Server
	close sync.Once

	cancelled chan string
	gated     chan struct{}

	mu       sync.Mutex
	gen      *generation
	gate     chan struct{} // closed by Release
	requests []RecordedRequest
}

// A generation is one life of the upstream, between restarts: as if a
// process were started and, on Restart, killed.
type generation struct {
	server  *mcp.Server
	handler http.Handler
	stop    chan struct{} // closed when this generation ends; unblocks gate and block
	ended   sync.Once
}

// NewUpstream starts an upstream with default options, stopped at the end
// of the test.
func NewUpstream(t testing.TB, name string) *Upstream {
	t.Helper()
	return NewUpstreamWith(t, name, UpstreamOptions{})
}

// NewUpstreamWith starts an upstream configured by opts, stopped at the end
// of the test.
func NewUpstreamWith(t testing.TB, name string, opts UpstreamOptions) *Upstream {
	t.Helper()
	for _, tool := range opts.Tools {
		if !slices.Contains(UpstreamTools, tool) && !slices.Contains(OptionalTools, tool) {
			t.Fatalf("testkit: unknown upstream tool %q (have %v)", tool, UpstreamTools)
		}
	}
	u := &Upstream{
		Name:      name,
		tb:        t,
		opts:      opts,
		cancelled: make(chan string, 100),
		gated:     make(chan struct{}, 100),
		gate:      make(chan struct{}),
	}
	u.gen = u.newGeneration()
	u.srv = httptest.NewServer(http.HandlerFunc(u.serveHTTP))
	u.URL = u.srv.URL + "/mcp"
	t.Cleanup(u.Close)
	return u
}

// Restart forgets every session, as a restarted process would: it drops
// every connection (so in-flight calls and streams break without an answer)
// and swaps in a fresh server, to which every old session id is unknown (the
// SDK answers 404). The URL stays the same.
func (u *Upstream) Restart() {
	u.mu.Lock()
	old := u.gen
	u.gen = u.newGeneration()
	u.mu.Unlock()
	// Drop every connection, as a dying process would, so that no answer
	// to an in-flight call gets out.
	u.srv.CloseClientConnections()
	old.end()
}

// SetJSONResponse switches between application/json (true) and SSE (false)
// responses. The SDK fixes the mode of a session when it is created, so, like
// [Upstream.Restart], it forgets every session.
func (u *Upstream) SetJSONResponse(json bool) {
	u.mu.Lock()
	u.opts.JSONResponse = json
	u.mu.Unlock()
	u.Restart()
}

// Close stops the upstream: it drops every connection (so in-flight calls
// and streams break without an answer), and connections afterwards are
// refused. It is called at the end of the test, and may be called more than
// once.
func (u *Upstream) Close() {
	u.close.Do(func() {
		u.mu.Lock()
		gen := u.gen
		u.mu.Unlock()
		// Drop every connection first: no answer to an in-flight call gets
		// out, and httptest's Close would wait for outstanding requests,
		// such as a standalone SSE stream a client left open.
		u.srv.CloseClientConnections()
		gen.end()
		u.srv.Close()
	})
}

// Requests returns a copy of every HTTP request received so far, oldest
// first.
func (u *Upstream) Requests() []RecordedRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.requests)
}

// Cancelled reports the names of tools (block, gate) whose request context
// was cancelled while they waited. It buffers up to 100 names and drops
// the rest.
func (u *Upstream) Cancelled() <-chan string { return u.cancelled }

// Gated receives a value for each gate call once it waits for
// [Upstream.Release] (a Release then opens it). It buffers up to 100 and
// drops the rest.
func (u *Upstream) Gated() <-chan struct{} { return u.gated }

// Count returns how many of the requests the upstream received so far had
// the JSON-RPC method rpcMethod.
func (u *Upstream) Count(rpcMethod string) int {
	n := 0
	for _, r := range u.Requests() {
		if r.RPCMethod == rpcMethod {
			n++
		}
	}
	return n
}

// AddTool registers one more trivial tool, returning its own name as text,
// on the running server, which tells its sessions' streams (and listen
// subscriptions) that the tool list changed.
func (u *Upstream) AddTool(toolName string) {
	u.mu.Lock()
	s := u.gen.server
	u.mu.Unlock()
	s.AddTool(&mcp.Tool{Name: toolName, Description: "Added at run time.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(toolName)}, nil
		})
}

// Release unblocks every gate call waiting now; later gate calls wait for
// the next Release. To avoid releasing too early, wait for a call's
// "waiting" progress notification first.
func (u *Upstream) Release() {
	u.mu.Lock()
	defer u.mu.Unlock()
	close(u.gate)
	u.gate = make(chan struct{})
}

func (u *Upstream) serveHTTP(w http.ResponseWriter, r *http.Request) {
	// Buffer the small JSON-RPC body to record it, then hand the handler an
	// identical one.
	body, err := io.ReadAll(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body.Close()
	if u.opts.AssumeCapable {
		body = assumeCapable(body)
		r.ContentLength = int64(len(body))
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := RecordedRequest{
		Method:    r.Method,
		Header:    r.Header.Clone(),
		RPCMethod: rpcMethods(body),
		Body:      body,
	}
	u.mu.Lock()
	u.requests = append(u.requests, rec)
	h := u.gen.handler
	u.mu.Unlock()
	h.ServeHTTP(w, r)
}

// rpcMethods returns the JSON-RPC method of a message, or the methods of a
// batch joined by commas.
func rpcMethods(body []byte) string {
	type message struct {
		Method string `json:"method"`
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var batch []message
		if json.Unmarshal(body, &batch) != nil {
			return ""
		}
		var methods []string
		for _, m := range batch {
			methods = append(methods, m.Method)
		}
		return strings.Join(methods, ",")
	}
	var m message
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	return m.Method
}

// end closes every session of g. It may be called more than once.
func (g *generation) end() {
	g.ended.Do(func() {
		close(g.stop) // first, or Close would wait for blocked calls
		for ss := range g.server.Sessions() {
			ss.Close()
		}
	})
}

func (u *Upstream) newGeneration() *generation {
	g := &generation{stop: make(chan struct{})}
	g.server = mcp.NewServer(&mcp.Implementation{Name: u.Name, Version: "0.0.1"}, &mcp.ServerOptions{
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"alpha", "beta"}, Total: 2}}, nil
		},
		Instructions: u.opts.Instructions,
	})
	u.addTools(g)
	u.addResourcesAndPrompts(g.server)
	g.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server },
		&mcp.StreamableHTTPOptions{JSONResponse: u.opts.JSONResponse, Stateless: u.opts.Stateless})
	return g
}

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

// notifyProgress sends a progress notification if the request asked for them.
func notifyProgress(ctx context.Context, req *mcp.CallToolRequest, progress, total float64, msg string) error {
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	return req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: token,
		Progress:      progress,
		Total:         total,
		Message:       msg,
	})
}

// reportCancelled tells Cancelled that tool's request was cancelled.
func (u *Upstream) reportCancelled(tool string) {
	select {
	case u.cancelled <- tool:
	default:
	}
}

func (u *Upstream) addTools(g *generation) {
	name := u.Name
	s := g.server
	add := map[string]func(){
		"echo": func() {
			type args struct {
				Text string `json:"text"`
			}
			mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes text, prefixed by the upstream name."},
				func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{
						Meta:    mcp.Meta{"testkit/upstream": name},
						Content: text(name + ":" + in.Text),
					}, map[string]any{"text": in.Text, "upstream": name}, nil
				})
		},
		"progress": func() {
			type args struct {
				Steps int `json:"steps"`
			}
			mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "Sends one progress notification and one log message per step."},
				func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
					for i := 1; i <= in.Steps; i++ {
						msg := fmt.Sprintf("step %d", i)
						if err := notifyProgress(ctx, req, float64(i), float64(in.Steps), msg); err != nil {
							return nil, nil, err
						}
						// Log sends nothing unless the client has set a level.
						//lint:ignore SA1019 logging is deprecated only from 2026-07-28; the 2025-11-25 sessions the gateway serves still use it
						if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: name, Data: msg}); err != nil {
							return nil, nil, err
						}
					}
					return &mcp.CallToolResult{Content: text("done")}, nil, nil
				})
		},
		"gate": func() {
			mcp.AddTool(s, &mcp.Tool{Name: "gate", Description: "Waits for Release."},
				func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
					// Take the gate before announcing the wait, so that a
					// Release after "waiting" is never missed.
					u.mu.Lock()
					gate := u.gate
					u.mu.Unlock()
					select {
					case u.gated <- struct{}{}:
					default:
					}
					if err := notifyProgress(ctx, req, 0, 1, "waiting"); err != nil {
						return nil, nil, err
					}
					select {
					case <-gate:
						return &mcp.CallToolResult{Content: text("released")}, nil, nil
					case <-ctx.Done():
						u.reportCancelled("gate")
						return nil, nil, ctx.Err()
					case <-g.stop:
						return nil, nil, errors.New("upstream stopped")
					}
				})
		},
		"block": func() {
			mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "Blocks until cancelled."},
				func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
					if err := notifyProgress(ctx, req, 0, 1, "blocked"); err != nil {
						return nil, nil, err
					}
					select {
					case <-ctx.Done():
						u.reportCancelled("block")
						return nil, nil, ctx.Err()
					case <-g.stop:
						return nil, nil, errors.New("upstream stopped")
					}
				})
		},
		"headers": func() {
			mcp.AddTool(s, &mcp.Tool{Name: "headers", Description: "Returns the HTTP headers of this call's request, as JSON text."},
				func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
					var h http.Header
					if req.Extra != nil {
						h = req.Extra.Header
					}
					data, err := json.Marshal(h)
					if err != nil {
						return nil, nil, err
					}
					return &mcp.CallToolResult{Content: text(string(data))}, nil, nil
				})
		},
		"meta": func() {
			mcp.AddTool(s, &mcp.Tool{Name: "meta", Description: "Returns the request's _meta as structured content."},
				func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
					return nil, map[string]any{"meta": req.Params.Meta}, nil
				})
		},
		"ask": func() {
			mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Asks the user for a name."},
				func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
					ask := &mcp.ElicitParams{
						Message: "What is your name?",
						RequestedSchema: &jsonschema.Schema{
							Type:       "object",
							Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}},
							Required:   []string{"name"},
						},
					}
					var res *mcp.ElicitResult
					var err error
					switch got, ok := req.Params.InputResponses["name"].(*mcp.ElicitResult); {
					case ok && req.Params.RequestState == "asked":
						res = got
					case u.opts.Stateless:
						// 2026-07-28: ask with input_required, and be
						// called again with the answer.
						return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"name": ask}, RequestState: "asked"}, nil, nil
					default:
						res, err = req.Session.Elicit(ctx, ask)
					}
					if err != nil {
						return &mcp.CallToolResult{IsError: true, Content: text(name + ":cannot ask: " + err.Error())}, nil, nil
					}
					if res.Action != "accept" {
						return &mcp.CallToolResult{Content: text(name + ":" + res.Action)}, nil, nil
					}
					who, _ := res.Content["name"].(string)
					return &mcp.CallToolResult{Content: text(name + ":hello " + who)}, nil, nil
				})
		},
		"region": func() {
			s.AddTool(&mcp.Tool{
				Name:        "region",
				Description: "Echoes its region, which travels in a header too.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"text":{"type":"string"}}}`),
			}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var in struct{ Region, Text string }
				if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
					return nil, err
				}
				return &mcp.CallToolResult{Content: text(name + ":" + in.Region + ":" + in.Text)}, nil
			})
		},
		"log": func() {
			type args struct {
				Text string `json:"text"`
			}
			mcp.AddTool(s, &mcp.Tool{Name: "log", Description: "Sends one log message."},
				func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
					//lint:ignore SA1019 logging is deprecated only from 2026-07-28; the 2025-11-25 sessions the gateway serves still use it
					if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: name, Data: in.Text}); err != nil {
						return nil, nil, err
					}
					return &mcp.CallToolResult{Content: text("logged")}, nil, nil
				})
			// A session's level is set only by logging/setLevel, which a
			// gateway relaying 2026-07-28 requests never sends: set it
			// through the SDK's own handler of that method before a log call.
			s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					if call, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && call.Params.Name == "log" {
						//lint:ignore SA1019 logging/setLevel is 2025-11-25's, the revision of this session
						setLevel := &mcp.ServerRequest[*mcp.SetLoggingLevelParams]{Session: call.Session, Params: &mcp.SetLoggingLevelParams{Level: "debug"}}
						if _, err := next(ctx, "logging/setLevel", setLevel); err != nil {
							return nil, err
						}
					}
					return next(ctx, method, req)
				}
			})
		},
		"fail": func() {
			mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{IsError: true, Content: text("fail from " + name)}, nil, nil
				})
		},
	}
	tools := u.opts.Tools
	if tools == nil {
		tools = UpstreamTools
	}
	for _, tool := range tools {
		add[tool]()
	}
	for i := range u.opts.ExtraTools {
		toolName := fmt.Sprintf("t%03d", i)
		s.AddTool(&mcp.Tool{
			Name:        toolName,
			Description: "A trivial tool.",
			InputSchema: json.RawMessage(`{"type":"object"}`),
		}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(toolName)}, nil
		})
	}
}

func (u *Upstream) addResourcesAndPrompts(s *mcp.Server) {
	name := u.Name
	readme := "test://" + name + "/readme"
	s.AddResource(&mcp.Resource{URI: readme, Name: "readme", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: readme, MIMEType: "text/plain", Text: "readme of " + name},
			}}, nil
		})
	itemPrefix := "test://" + name + "/items/"
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: itemPrefix + "{id}", Name: "item", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			uri := req.Params.URI
			id, ok := strings.CutPrefix(uri, itemPrefix)
			if !ok || id == "" {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: uri, MIMEType: "text/plain", Text: "item " + id + " of " + name},
			}}, nil
		})
	s.AddPrompt(&mcp.Prompt{
		Name:      "greet",
		Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["who"] + " from " + name}},
		}}, nil
	})
}

// AssumeCapable wraps an MCP server's handler so that it acts as if every
// client declared elicitation (form and url), sampling and roots: the
// capabilities of each initialize (and of each 2026-07-28 request's _meta)
// are replaced before the server sees them. The SDK's servers refuse to
// ask a client that did not declare what they ask for; some servers ask
// anyway, and this is one.
func AssumeCapable(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body.Close()
			body = assumeCapable(body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		h.ServeHTTP(w, r)
	})
}

// capableCaps are the client capabilities assumeCapable puts in.
const capableCaps = `{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{}}`

// assumeCapable replaces the client capabilities in an initialize request
// or a 2026-07-28 request's _meta.
func assumeCapable(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m["params"] == nil {
		return body
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(m["params"], &p) != nil {
		return body
	}
	if string(m["method"]) == `"initialize"` {
		p["capabilities"] = json.RawMessage(capableCaps)
	}
	if meta := p["_meta"]; meta != nil {
		var mm map[string]json.RawMessage
		if json.Unmarshal(meta, &mm) == nil && mm["io.modelcontextprotocol/clientCapabilities"] != nil {
			mm["io.modelcontextprotocol/clientCapabilities"] = json.RawMessage(capableCaps)
			p["_meta"], _ = json.Marshal(mm)
		}
	}
	m["params"], _ = json.Marshal(p)
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}
