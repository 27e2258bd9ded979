// Command stdioserver is a Go SDK MCP server over stdio, for tests of stdio
// upstreams (see testkit.StdioServer). Its tools:
//
//   - echo {text}: returns text.
//   - env {name}: returns the value of an environment variable.
//   - pid: returns its process id.
//   - progress {steps}: one progress notification per step; then writes
//     "progress: <steps> sent" to stderr, before it answers.
//   - block: blocks until cancelled; writes "cancelled" to stderr then.
//   - crash: exits with status 3 in the middle of the call.
//   - stderr {text}: writes text to stderr.
//   - garbage: writes a line that is not JSON-RPC to stdout, then answers.
//   - sleep {ms}: answers after ms milliseconds.
//   - elicit {text}: asks its client (elicitation/create, message text)
//     and returns "accept: <answer>", "decline", ..., "error <code>:
//     <message>" for a JSON-RPC error or "error: <err>".
//   - updated {uri}: sends notifications/resources/updated for uri to the
//     sessions that subscribed it.
//   - subscribed: returns the URIs its client subscribed, sorted and
//     comma-separated, and how many subscribe requests it got: "a,b 3".
//   - create {name}: adds the resource mem://<name> to the process's
//     resources (listed to every session of the process), answers its URI.
//
// Every test://… URI can be subscribed (resources/subscribe).
// It lists one resource from the start, mem://static.
//
// With STDIOSERVER_GARBAGE set it writes such a line before serving, and it
// writes "stdioserver starting" to stderr when it starts. With
// STDIOSERVER_CHILD set it starts a child (sleep) that outlives nothing:
// stopping the server's process group must stop it too. With
// STDIOSERVER_HTTP=ADDR it serves the same server over Streamable HTTP at
// http://ADDR/mcp instead of stdio, to compare the two.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdoutMu keeps the garbage line from cutting a message of the SDK's.
var stdoutMu sync.Mutex

func main() {
	fmt.Fprintln(os.Stderr, "stdioserver starting")
	if os.Getenv("STDIOSERVER_GARBAGE") != "" {
		fmt.Fprintln(os.Stdout, "this is not JSON-RPC")
		fmt.Fprintln(os.Stdout, `{"json": "but not JSON-RPC"}`)
	}
	if os.Getenv("STDIOSERVER_CHILD") != "" {
		child := exec.Command("sleep", "300")
		if err := child.Start(); err != nil {
			log.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "child pid %d\n", child.Process.Pid)
	}
	type textArgs struct {
		Text string `json:"text"`
	}
	type nameArgs struct {
		Name string `json:"name"`
	}
	type stepsArgs struct {
		Steps int `json:"steps"`
	}
	var (
		subMu    sync.Mutex
		subs     = map[string]bool{}
		subCalls int
	)
	s := mcp.NewServer(&mcp.Implementation{Name: "stdioserver", Version: "0.0.1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			subMu.Lock()
			defer subMu.Unlock()
			subs[r.Params.URI] = true
			subCalls++
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, r *mcp.UnsubscribeRequest) error {
			subMu.Lock()
			defer subMu.Unlock()
			delete(subs, r.Params.URI)
			return nil
		},
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "test", URITemplate: "test://{name}"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "content of " + r.Params.URI}}}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit", Description: "Asks the client."},
		func(ctx context.Context, req *mcp.CallToolRequest, in textArgs) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: in.Text, RequestedSchema: &jsonschema.Schema{
				Type: "object", Properties: map[string]*jsonschema.Schema{"answer": {Type: "string"}}}})
			var werr *jsonrpc.Error
			if errors.As(err, &werr) {
				return text(fmt.Sprintf("error %d: %s", werr.Code, werr.Message)), nil, nil
			}
			if err != nil {
				return text("error: " + err.Error()), nil, nil
			}
			if res.Action != "accept" {
				return text(res.Action), nil, nil
			}
			return text(fmt.Sprintf("accept: %v", res.Content["answer"])), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "updated", Description: "Sends notifications/resources/updated for uri."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			URI string `json:"uri"`
		}) (*mcp.CallToolResult, any, error) {
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: in.URI}); err != nil {
				return nil, nil, err
			}
			return text("sent"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "subscribed", Description: "Returns the subscribed URIs and the subscribe count."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			subMu.Lock()
			defer subMu.Unlock()
			var uris []string
			for u := range subs {
				uris = append(uris, u)
			}
			sort.Strings(uris)
			return text(fmt.Sprintf("%s %d", strings.Join(uris, ","), subCalls)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in textArgs) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Returns an environment variable."},
		func(_ context.Context, _ *mcp.CallToolRequest, in nameArgs) (*mcp.CallToolResult, any, error) {
			return text(os.Getenv(in.Name)), nil, nil
		})
	// envhash tells which secret the process got without returning it
	// (the gateway redacts its own secrets from results).
	mcp.AddTool(s, &mcp.Tool{Name: "envhash", Description: "Returns the SHA-256, in hex, of an environment variable."},
		func(_ context.Context, _ *mcp.CallToolRequest, in nameArgs) (*mcp.CallToolResult, any, error) {
			sum := sha256.Sum256([]byte(os.Getenv(in.Name)))
			return text(hex.EncodeToString(sum[:])), nil, nil
		})
	resource := func(uri string) {
		s.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "content of " + uri}}}, nil
		})
	}
	resource("mem://static")
	mcp.AddTool(s, &mcp.Tool{Name: "create", Description: "Creates a resource."},
		func(_ context.Context, _ *mcp.CallToolRequest, in nameArgs) (*mcp.CallToolResult, any, error) {
			resource("mem://" + in.Name)
			return text("mem://" + in.Name), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "Returns the process id."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "One progress notification per step."},
		func(ctx context.Context, req *mcp.CallToolRequest, in stepsArgs) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= in.Steps; i++ {
					err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(in.Steps)})
					if err != nil {
						return nil, nil, err
					}
				}
				fmt.Fprintf(os.Stderr, "progress: %d sent\n", in.Steps)
			}
			return text("done"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "Blocks until cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 0, Total: 1, Message: "blocked"})
			}
			<-ctx.Done()
			fmt.Fprintln(os.Stderr, "cancelled")
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits in the middle of the call."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "crashing")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "stderr", Description: "Writes text to stderr."},
		func(_ context.Context, _ *mcp.CallToolRequest, in textArgs) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, in.Text)
			return text("written"), nil, nil
		})
	type msArgs struct {
		MS int `json:"ms"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Answers after ms milliseconds."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in msArgs) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
				return text("slept"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "garbage", Description: "Writes a line that is not JSON-RPC to stdout."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			stdoutMu.Lock()
			fmt.Fprintln(os.Stdout, "garbage in the middle")
			stdoutMu.Unlock()
			return text("after garbage"), nil, nil
		})
	if addr := os.Getenv("STDIOSERVER_HTTP"); addr != "" {
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		mux := http.NewServeMux()
		mux.Handle("/mcp", h)
		fmt.Fprintln(os.Stderr, "listening on http://"+addr+"/mcp")
		log.Fatal((&http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe())
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "stdioserver:", err)
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
