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
)

// GuardHook is a content-guard webhook (docs/guards.md, "Webhook"): it
// takes the gateway's JSON envelope on POST and answers what its decide
// function says. It checks each request against the contract (POST,
// application/json, a JSON object with version 1, a known phase, tenant,
// guard and upstream strings, and a JSON object as content) and answers
// 400 to one that breaks it, recording why (see [GuardHook.Violations]).
// It records every request it accepts.
type GuardHook struct {
	// URL is the hook's endpoint, when it was started by [NewGuardHook].
	URL string

	decide func(GuardHookRequest) GuardHookAnswer

	mu         sync.Mutex
	requests   []GuardHookRequest
	violations []string
	status     int           // answer with this status instead, when set
	raw        []byte        // answer with these bytes instead, when set
	hold       chan struct{} // when set, requests wait for it to close
	inFlight   int
	maxSeen    int
}

// A GuardHookRequest is one envelope the hook accepted.
type GuardHookRequest struct {
	Header   http.Header
	Version  int             `json:"version"`
	Phase    string          `json:"phase"`
	Method   string          `json:"method"`
	Tenant   string          `json:"tenant"`
	Subject  string          `json:"subject"`
	Guard    string          `json:"guard"`
	Upstream string          `json:"upstream"`
	Tool     string          `json:"tool"`
	Item     string          `json:"item"`
	Content  json.RawMessage `json:"content"`
}

// A GuardHookAnswer is what the hook answers: Action "allow", "block"
// (with Message) or "replace" (with Content).
type GuardHookAnswer struct {
	Action  string          `json:"action"`
	Message string          `json:"message,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`
}

// NewGuardHook starts a hook answering by decide (nil: always allow) on
// 127.0.0.1, stopped by the test's cleanup.
func NewGuardHook(t testing.TB, decide func(GuardHookRequest) GuardHookAnswer) *GuardHook {
	t.Helper()
	h := NewGuardHookHandler(decide)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	h.URL = srv.URL + "/guard"
	return h
}

// NewGuardHookHandler returns a hook answering by decide (nil: always
// allow) that is not listening: serve it with [GuardHook.Client] (in
// memory, so that it works inside a testing/synctest bubble) or an
// httptest.Server.
func NewGuardHookHandler(decide func(GuardHookRequest) GuardHookAnswer) *GuardHook {
	if decide == nil {
		decide = func(GuardHookRequest) GuardHookAnswer { return GuardHookAnswer{Action: "allow"} }
	}
	return &GuardHook{decide: decide}
}

// Client returns an HTTP client that reaches this hook in memory,
// whatever the URL's host.
func (h *GuardHook) Client() *http.Client {
	return &http.Client{Transport: handlerTransport{h}}
}

// FailWith makes the hook answer every request with status (0: answer
// normally again).
func (h *GuardHook) FailWith(status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status = status
}

// AnswerRaw makes the hook answer every request with body, status 200
// (nil: answer normally again): for answers outside the contract.
func (h *GuardHook) AnswerRaw(body []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.raw = body
}

// Hold makes requests wait, until the returned function is called or
// their client gives up.
func (h *GuardHook) Hold() (release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan struct{})
	h.hold = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			if h.hold == ch {
				h.hold = nil
			}
			h.mu.Unlock()
			close(ch)
		})
	}
}

// Requests returns the requests accepted so far.
func (h *GuardHook) Requests() []GuardHookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]GuardHookRequest(nil), h.requests...)
}

// InFlight returns the requests being answered now, and the most there
// ever were at once.
func (h *GuardHook) InFlight() (now, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inFlight, h.maxSeen
}

// Violations returns why requests that break the contract were refused.
func (h *GuardHook) Violations() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.violations...)
}

func (h *GuardHook) violate(w http.ResponseWriter, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.mu.Lock()
	h.violations = append(h.violations, msg)
	h.mu.Unlock()
	http.Error(w, msg, http.StatusBadRequest)
}

// ServeHTTP answers one envelope.
func (h *GuardHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.inFlight++
	h.maxSeen = max(h.maxSeen, h.inFlight)
	status, raw, hold := h.status, h.raw, h.hold
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inFlight--
		h.mu.Unlock()
	}()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if r.Method != http.MethodPost {
		h.violate(w, "method %s, want POST", r.Method)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		h.violate(w, "Content-Type %q, want application/json", ct)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return
	}
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(body, &shape); err != nil {
		h.violate(w, "body is not a JSON object: %v", err)
		return
	}
	var req GuardHookRequest
	if err := json.Unmarshal(body, &req); err != nil {
		h.violate(w, "envelope: %v", err)
		return
	}
	switch {
	case req.Version != 1:
		h.violate(w, "version %d, want 1", req.Version)
		return
	case req.Phase != "arguments" && req.Phase != "results" && req.Phase != "definitions":
		h.violate(w, "phase %q, want arguments, results or definitions", req.Phase)
		return
	case req.Guard == "" || req.Upstream == "":
		h.violate(w, "guard and upstream are required")
		return
	case len(req.Content) == 0 || req.Content[0] != '{':
		h.violate(w, "content is not a JSON object")
		return
	}
	for _, k := range []string{"tenant", "phase", "guard", "upstream", "content", "version"} {
		if _, ok := shape[k]; !ok {
			h.violate(w, "member %q is missing", k)
			return
		}
	}
	req.Header = r.Header.Clone()
	h.mu.Lock()
	h.requests = append(h.requests, req)
	h.mu.Unlock()
	if status != 0 {
		http.Error(w, "failing on purpose", status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if raw != nil {
		_, _ = w.Write(raw)
		return
	}
	_ = json.NewEncoder(w).Encode(h.decide(req))
}
