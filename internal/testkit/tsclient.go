package testkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// tsClientTimeout bounds one run of the TypeScript client.
const tsClientTimeout = 60 * time.Second

// A TSStep is one request [RunTSClient] makes. Op is one of listTools,
// callTool (Name, Arguments, Progress), listResources,
// listResourceTemplates, readResource (URI), listPrompts, getPrompt (Name,
// Arguments), ping, serverInfo (the initialize result the SDK kept:
// serverInfo, capabilities, instructions, protocolVersion, sessionId).
type TSStep struct {
	Op        string         `json:"op"`
	Name      string         `json:"name,omitempty"`
	URI       string         `json:"uri,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	// Progress asks for progress notifications on a callTool and collects
	// them in [TSResult.Progress].
	Progress bool `json:"progress,omitempty"`
}

// A TSResult is the outcome of one [TSStep], or of connecting.
type TSResult struct {
	Op     string          // the step's Op, or "connect"
	OK     bool            // the request succeeded
	Result json.RawMessage // the SDK's result, if OK
	// Progress holds the progress notification params a callTool with
	// Progress received, in order.
	Progress []json.RawMessage
	// ErrorCode is the JSON-RPC error code, or for an HTTP error its status;
	// 0 if unknown.
	ErrorCode    int
	ErrorMessage string
	ErrorData    json.RawMessage // the JSON-RPC error's data, if any
	// HTTPStatus is the status of the HTTP error response behind the error,
	// or 0; WWWAuthenticate is that response's WWW-Authenticate header.
	HTTPStatus      int
	WWWAuthenticate string
}

// tsLine is one line the client prints.
type tsLine struct {
	Op       string            `json:"op"`
	OK       bool              `json:"ok"`
	Result   json.RawMessage   `json:"result"`
	Progress []json.RawMessage `json:"progress"`
	Error    *struct {
		Code            int             `json:"code"`
		Message         string          `json:"message"`
		Data            json.RawMessage `json:"data"`
		HTTPStatus      int             `json:"httpStatus"`
		WWWAuthenticate string          `json:"wwwAuthenticate"`
	} `json:"error"`
}

// RunTSClient connects the official TypeScript MCP SDK client (Client over
// StreamableHTTPClientTransport) to the MCP endpoint url, sending
// "Authorization: Bearer <token>" on every request (none if token is
// empty), runs the steps in order in one session, ends the session, and
// returns one result per step. A failed step does not stop the next ones.
//
// If connecting (initialize) fails, it returns a single result, with Op
// "connect" and OK false. It fails the test if the client cannot be run,
// or takes more than 60s.
func RunTSClient(t testing.TB, url, token string, steps ...TSStep) []TSResult {
	t.Helper()
	dir := NodeDir(t)
	if steps == nil {
		steps = []TSStep{}
	}
	stepsJSON, err := json.Marshal(steps)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), tsClientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBinary(t), filepath.Join(dir, "mcp-client.mjs"), url, string(stepsJSON))
	// The token goes in the environment, not the command line, out of ps.
	cmd.Env = append(os.Environ(), "MCP_TOKEN="+token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = stopTimeout
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("testkit: TypeScript client did not finish within %v\nstdout:\n%s\nstderr:\n%s", tsClientTimeout, &stdout, &stderr)
	}
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatalf("testkit: TypeScript client: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}

	var results []TSResult
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l tsLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("testkit: TypeScript client printed a line that is not JSON: %v\n%s\nstderr:\n%s", err, sc.Bytes(), &stderr)
		}
		r := TSResult{Op: l.Op, OK: l.OK, Result: l.Result, Progress: l.Progress}
		if l.Error != nil {
			r.ErrorCode = l.Error.Code
			r.ErrorMessage = l.Error.Message
			r.ErrorData = l.Error.Data
			r.HTTPStatus = l.Error.HTTPStatus
			r.WWWAuthenticate = l.Error.WWWAuthenticate
		}
		results = append(results, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("testkit: reading the TypeScript client's output: %v", err)
	}

	connectFailed := len(results) == 1 && results[0].Op == "connect" && !results[0].OK
	switch {
	case exit != nil && !connectFailed:
		t.Fatalf("testkit: TypeScript client exited 1 without a connect error\nstdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	case exit == nil && len(results) != len(steps):
		t.Fatalf("testkit: TypeScript client printed %d results for %d steps\nstdout:\n%s\nstderr:\n%s", len(results), len(steps), &stdout, &stderr)
	}
	if stderr.Len() > 0 {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("TypeScript client stderr:\n%s", &stderr)
			}
		})
	}
	return results
}
