package testkit

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"cel.dev/cel-go/cel"
)

// AuthZEN is an OpenID AuthZEN 1.0 policy decision point: the Access
// Evaluation API (POST /access/v1/evaluation) and its batch form (POST
// /access/v1/evaluations), whose decisions a CEL expression computes. The
// expression reads the variables subject, action, resource and context
// (maps, as the request has them), and must be a bool: for example
// `"sre" in subject.properties.groups && action.name == "tools/call"`.
//
// It checks each request against the shapes the spec defines (a JSON
// object with subject {type, id}, action {name} and resource {type, id},
// strings; in a batch, each evaluation completed by the request's
// defaults) and answers 400 to one that is not, recording why (see
// [AuthZEN.Violations]). It records every request it accepts.
type AuthZEN struct {
	// URL is the base URL, when it was started by [NewAuthZEN].
	URL string

	prog cel.Program
	// header and value, if set, are a header every request must carry
	// (401 otherwise).
	header, value string

	mu         sync.Mutex
	requests   []AuthZENRequest
	violations []string
	status     int           // answer with this status instead, when set
	hold       chan struct{} // when set, requests wait for it to close
}

// An AuthZENRequest is one request the PDP answered: its path, and each
// evaluation completed with the batch's defaults.
type AuthZENRequest struct {
	Path        string
	Header      http.Header
	Evaluations []map[string]any
	Decisions   []bool
}

// NewAuthZEN starts an AuthZEN PDP deciding by expr on 127.0.0.1, stopped
// by the test's cleanup.
func NewAuthZEN(t testing.TB, expr string) *AuthZEN {
	t.Helper()
	a := NewAuthZENHandler(t, expr)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// NewAuthZENHandler returns an AuthZEN PDP deciding by expr that is not
// listening: serve it with [AuthZEN.Client] (in memory, so that it works
// inside a testing/synctest bubble) or an httptest.Server.
func NewAuthZENHandler(t testing.TB, expr string) *AuthZEN {
	t.Helper()
	env, err := cel.NewEnv(
		cel.Variable("subject", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("action", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("resource", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("context", cel.MapType(cel.StringType, cel.DynType)),
	)
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("AuthZEN policy %q: %v", expr, iss.Err())
	}
	if ast.OutputType() != cel.BoolType {
		t.Fatalf("AuthZEN policy %q is a %s, not a bool", expr, ast.OutputType())
	}
	prog, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	return &AuthZEN{prog: prog}
}

// RequireHeader makes the PDP answer 401 to a request without header name
// set to value.
func (a *AuthZEN) RequireHeader(name, value string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.header, a.value = name, value
}

// FailWith makes the PDP answer every request with status (0: answer
// normally again).
func (a *AuthZEN) FailWith(status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status = status
}

// Hold makes requests wait, until the returned function is called or
// their client gives up.
func (a *AuthZEN) Hold() (release func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{})
	a.hold = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			if a.hold == ch {
				a.hold = nil
			}
			a.mu.Unlock()
			close(ch)
		})
	}
}

// Requests returns the requests answered so far.
func (a *AuthZEN) Requests() []AuthZENRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]AuthZENRequest(nil), a.requests...)
}

// Violations returns why requests that break the spec's shapes were
// refused.
func (a *AuthZEN) Violations() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.violations...)
}

// Client returns an HTTP client that reaches this PDP in memory, whatever
// the URL's host.
func (a *AuthZEN) Client() *http.Client {
	return &http.Client{Transport: handlerTransport{a}}
}

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	type result struct{ resp *http.Response }
	done := make(chan result, 1)
	go func() {
		rec := httptest.NewRecorder()
		t.h.ServeHTTP(rec, r)
		done <- result{rec.Result()}
	}()
	select {
	case res := <-done:
		return res.resp, nil
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

func (a *AuthZEN) violate(w http.ResponseWriter, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	a.mu.Lock()
	a.violations = append(a.violations, msg)
	a.mu.Unlock()
	http.Error(w, msg, http.StatusBadRequest)
}

// ServeHTTP answers one AuthZEN request.
func (a *AuthZEN) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	header, value, status, hold := a.header, a.value, a.status, a.hold
	a.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if header != "" && r.Header.Get(header) != value {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if status != 0 {
		http.Error(w, "failing on purpose", status)
		return
	}
	batch := false
	switch r.URL.Path {
	case "/access/v1/evaluation":
	case "/access/v1/evaluations":
		batch = true
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		a.violate(w, "%s: method %s, want POST", r.URL.Path, r.Method)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		a.violate(w, "%s: Content-Type %q, want application/json", r.URL.Path, ct)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		a.violate(w, "%s: body is not a JSON object: %v", r.URL.Path, err)
		return
	}
	var evals []map[string]any
	if batch {
		items, ok := req["evaluations"].([]any)
		if !ok {
			a.violate(w, "evaluations: missing or not an array")
			return
		}
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				a.violate(w, "evaluations[%d]: not an object", i)
				return
			}
			e := map[string]any{}
			for _, k := range []string{"subject", "action", "resource", "context"} {
				if v, ok := m[k]; ok {
					e[k] = v
				} else if v, ok := req[k]; ok {
					e[k] = v
				}
			}
			evals = append(evals, e)
		}
	} else {
		evals = []map[string]any{req}
	}
	for i, e := range evals {
		if msg := checkEvaluation(e); msg != "" {
			a.violate(w, "%s: evaluation %d: %s", r.URL.Path, i, msg)
			return
		}
	}
	decisions := make([]bool, len(evals))
	for i, e := range evals {
		vars := map[string]any{"context": map[string]any{}}
		for k, v := range e {
			vars[k] = v
		}
		out, _, err := a.prog.Eval(vars)
		decisions[i] = err == nil && out.Value() == true
	}
	a.mu.Lock()
	a.requests = append(a.requests, AuthZENRequest{Path: r.URL.Path, Header: r.Header.Clone(), Evaluations: evals, Decisions: decisions})
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !batch {
		_ = json.NewEncoder(w).Encode(map[string]any{"decision": decisions[0]})
		return
	}
	items := make([]map[string]any, len(decisions))
	for i, d := range decisions {
		items[i] = map[string]any{"decision": d}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"evaluations": items})
}

// checkEvaluation checks one (completed) evaluation against the spec:
// subject and resource with string type and id, action with a string
// name, and context, if any, an object.
func checkEvaluation(e map[string]any) string {
	for _, k := range []string{"subject", "resource"} {
		m, ok := e[k].(map[string]any)
		if !ok {
			return k + ": missing or not an object"
		}
		for _, f := range []string{"type", "id"} {
			if s, ok := m[f].(string); !ok || s == "" {
				return k + "." + f + ": missing or not a non-empty string"
			}
		}
		if p, ok := m["properties"]; ok {
			if _, ok := p.(map[string]any); !ok {
				return k + ".properties: not an object"
			}
		}
	}
	act, ok := e["action"].(map[string]any)
	if !ok {
		return "action: missing or not an object"
	}
	if s, ok := act["name"].(string); !ok || s == "" {
		return "action.name: missing or not a non-empty string"
	}
	if c, ok := e["context"]; ok {
		if _, ok := c.(map[string]any); !ok {
			return "context: not an object"
		}
	}
	return ""
}
