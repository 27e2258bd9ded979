package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
)

const (
	// requestStatePrefix starts every requestState the gateway issues.
	requestStatePrefix = "mcpgw1."
	// Mailbox keys: a parked request's state, and a pump's messages.
	stateKeyPrefix = "mrtr-state:"
	pumpKeyPrefix  = "mrtr-pump:"
	// forwardedPrefix starts the id of an upstream's request forwarded to a
	// session client; askedPrefix, that of a 2026-07-28 upstream's input
	// request asked of a session client.
	forwardedPrefix = "mcpgw.up."
	askedPrefix     = "mcpgw.in."
	answerKeyPrefix = "mrtr-answer:"
	askedKeyPrefix  = "mrtr-asked:"
	// MaxInputRounds bounds the input_required results one session
	// client's call goes through.
	MaxInputRounds = 10
	// answerTTL bounds how long a session client's answer waits in the
	// mailbox for the call that asked, whatever the marker says.
	answerTTL = 5 * time.Minute
)

// errUnsolicited is a client's answer to no request the gateway asked of
// it that is still pending.
var errUnsolicited = errors.New("unsolicited answer")

// InputCapability is the client capability an upstream's request for
// input needs, "" for a method that is none.
func InputCapability(method string) string {
	switch method {
	case protocol.MethodElicit:
		return "elicitation"
	case protocol.MethodCreateMessage:
		return "sampling"
	case protocol.MethodRootsList:
		return "roots"
	}
	return ""
}

// can reports whether the client declared the capability an upstream's
// request for input needs.
func (b *Bridge) can(who *Caller, method string) bool {
	c := InputCapability(method)
	return c != "" && len(who.Caps) > 0 && b.caps(who.Caps)[c]
}

// lacks reports whether the caller lacks a capability msg needs.
func (b *Bridge) lacks(who *Caller, msg *jsonrpc.Message) bool {
	_, _, ok := b.Lacks(who, msg)
	return ok
}

// Lacks returns the client capability that msg, an upstream's request for
// input, needs and the caller did not declare: the capability, and the
// sub-capability ("" for none); ok is false when the caller declared all
// it needs, or msg is no request for input. An elicitation needs the
// sub-capability of its mode, form (the default; an empty elicitation
// object declares it) or url; a sampling request with tools needs
// sampling.tools (2025-11-25 client/elicitation, "Capabilities": servers
// MUST NOT send a mode the client does not support; client/sampling,
// "Capabilities", the same of tools). Only then may the request reach the
// client, or the call be parked for it (see Park).
func (b *Bridge) Lacks(who *Caller, msg *jsonrpc.Message) (capability, sub string, ok bool) {
	c := InputCapability(msg.Method)
	if c == "" {
		return "", "", false
	}
	if !b.can(who, msg.Method) {
		return c, "", true
	}
	p, _ := jsonx.ParseValidObject(msg.Params)
	switch {
	case p == nil:
	case msg.Method == protocol.MethodElicit:
		sub = "form"
		if mode, _ := p.GetString("mode"); mode == "url" {
			sub = "url"
		}
	case msg.Method == protocol.MethodCreateMessage:
		if t := p.Get("tools"); len(t) > 0 && string(t) != "null" {
			sub = "tools"
		}
	}
	if sub == "" {
		return "", "", false
	}
	// The caller's capabilities parsed as can's parse did; their size is
	// bounded by limits.client_capabilities_bytes.
	var declared *jsonx.Object
	if caps, err := jsonx.ParseValidObject(who.Caps); err == nil {
		if o, ok := caps.Object(c); ok {
			declared = o
		}
	}
	switch {
	case declared == nil:
	case declared.Get(sub) != nil:
		return "", "", false
	case sub == "form" && len(declared.Members) == 0:
		return "", "", false // {} is form mode (backwards compatibility)
	}
	return c, sub, true
}

// UpstreamRequest deals with a request an upstream sent during a call the
// gateway relays, other than by parking it: ping is answered, a session
// client that can answer gets it forwarded, anything else is refused.
func (b *Bridge) UpstreamRequest(ctx context.Context, who *Caller, out Out, up Upstream, us session.Upstream, msg *jsonrpc.Message) {
	switch {
	case msg.Method == protocol.MethodPing:
		b.reply(ctx, up, us, msg.ID, json.RawMessage(`{}`), nil)
	case !who.Stateless && !out.Collects() && !b.lacks(who, msg):
		// (A batch's collector has no stream to carry the request.)
		fwd := jsonrpc.AppendRequest(nil, jsonrpc.StringID(forwardedID(up.Name(), msg.ID)), msg.Method, b.shape(up.Name(), msg.Method, msg.Params))
		if err := out.Event(fwd); err != nil {
			b.reply(ctx, up, us, msg.ID, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the client is gone"))
		}
	default:
		b.reply(ctx, up, us, msg.ID, nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound,
			"Method not found: the client did not declare the capability for %s", msg.Method))
	}
}

// reply answers an upstream's request, logging a failure: the upstream's
// call then fails or times out on its own.
func (b *Bridge) reply(ctx context.Context, up Upstream, us session.Upstream, id jsonrpc.ID, result json.RawMessage, e *jsonrpc.Error) {
	if err := up.Reply(context.WithoutCancel(ctx), us, id, result, e); err != nil {
		b.log.Warn("answering an upstream's request", "upstream", up.Name(), "error", err)
	}
}

// forwardedID is the id an upstream's request travels to a session client
// with: it names the upstream, and carries the upstream's own id, so any
// replica can route the answer without shared state.
func forwardedID(upstream string, id jsonrpc.ID) string {
	return forwardedPrefix + upstream + "." + base64.RawURLEncoding.EncodeToString(id.Raw())
}

// ClientResponse routes a session client's answer to a forwarded request
// back to its upstream, or to the mailbox of the call that asked for it.
// Answers to anything else are dropped. route finds the upstream a
// forwarded request came from and the caller's session with it, if the
// caller's tenant may use it.
func (b *Bridge) ClientResponse(ctx context.Context, who *Caller, msg *jsonrpc.Message, route func(upstream string) (Upstream, session.Upstream, bool)) {
	var s string
	if json.Unmarshal(msg.ID.Raw(), &s) != nil {
		b.unsolicited(who)
		return
	}
	if rest, ok := strings.CutPrefix(s, askedPrefix); ok {
		if err := b.postAnswer(ctx, who, rest, msg); err != nil {
			b.unsolicited(who)
		}
		return
	}
	rest, ok := strings.CutPrefix(s, forwardedPrefix)
	if !ok {
		b.unsolicited(who)
		return
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		b.unsolicited(who)
		return
	}
	name := rest[:i]
	raw, err := base64.RawURLEncoding.DecodeString(rest[i+1:])
	if err != nil {
		b.unsolicited(who)
		return
	}
	id, err := jsonrpc.RawID(raw)
	if err != nil {
		b.unsolicited(who)
		return
	}
	up, us, ok := route(name)
	if !ok {
		b.unsolicited(who)
		return
	}
	// An answer for the client's own upstream session goes there: the
	// upstream, which holds the pending request, is the one to judge it,
	// and nothing is kept on the way.
	b.reply(ctx, up, us, id, msg.Result, msg.Error)
}

// inputState is what a requestState stands for, kept in the mailbox.
type inputState struct {
	Principal string                  `json:"p"` // principalKey of the caller
	Method    string                  `json:"m"`
	Target    string                  `json:"t"` // exposed name or URI
	Upstream  string                  `json:"u"`
	Session   string                  `json:"s"` // upstream session id
	Pump      string                  `json:"k"`
	Requests  map[string]pendingInput `json:"r"` // by inputRequests key
}

// pendingInput is one upstream request awaiting the client's input.
type pendingInput struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// parking counts, per principal, the calls parked on this replica: each
// holds an upstream call and a pump until the client's retry or the
// upstream's timeout, so a client that never retries could otherwise hold
// as many as it can send (limits.parked_calls_per_principal).
type parking struct {
	mu sync.Mutex
	n  map[string]int // principalKey → parked calls
}

// take counts one more parked call for key, unless key has max already.
func (p *parking) take(key string, max int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[key] >= max {
		return false
	}
	if p.n == nil {
		p.n = make(map[string]int)
	}
	p.n[key]++
	return true
}

// give counts one parked call of key less.
func (p *parking) give(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[key]--; p.n[key] <= 0 {
		delete(p.n, key)
	}
}

// Park answers a 2026-07-28 caller's call whose upstream asked for input
// (first) with input_required, and leaves the upstream's stream to a pump.
// cancel ends the upstream call. A principal parks at most max calls on
// one replica (limits.parked_calls_per_principal; 0 for no bound); beyond
// that the call fails at once with a *LimitError (and the caller ends the
// upstream call).
func (b *Bridge) Park(ctx context.Context, who *Caller, c *Call, up Upstream, resp Stream, first *jsonrpc.Message, cancel context.CancelCauseFunc, max int) (json.RawMessage, error) {
	key := who.Principal
	if max > 0 && !b.parked.take(key, max) {
		return nil, &LimitError{Err: jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"Too Many Requests: parked call limit %s (%d) reached: answer or abandon the calls waiting for input first", telemetry.LimitParkedCalls, max)}
	}
	// The place is given back when the pump is about to post the call's
	// end, before a retry can see it, so that the next call finds it free.
	release := sync.OnceFunc(func() {
		if max > 0 {
			b.parked.give(key)
		}
	})
	pump := session.NewID()
	res, err := b.inputRequired(ctx, who, c, up, resp.Session().SessionID, pump, map[string]pendingInput{
		"input-1": {ID: first.ID.Raw(), Method: first.Method, Params: first.Params},
	})
	if err != nil {
		release()
		return nil, err
	}
	caps := who.Caps
	if !b.own.Go(func(owned context.Context) {
		defer release()
		// The owner's life, with the call's values (whom the upstream
		// requests are made for, the trace): the pump's replies to the
		// upstream go with the call's credentials.
		life, stop := context.WithCancel(context.WithoutCancel(ctx))
		defer stop()
		defer context.AfterFunc(owned, stop)()
		b.pumpInput(life, up, resp, pump, caps, cancel, release)
	}) {
		release()
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the gateway is shutting down")
	}
	return res, nil
}

// inputRequired stores the state of a call waiting for the inputs reqs and
// returns the input_required result that asks for them.
func (b *Bridge) inputRequired(ctx context.Context, who *Caller, c *Call, up Upstream, sid, pump string, reqs map[string]pendingInput) (json.RawMessage, error) {
	st := inputState{Principal: who.Principal, Method: c.Method, Target: c.Target, Upstream: up.Name(), Session: sid, Pump: pump, Requests: reqs}
	buf, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	id := session.NewID()
	if err := b.mailbox.Post(ctx, stateKeyPrefix+id, buf, up.Timeout()); err != nil {
		return nil, err
	}
	asks := make(map[string]any, len(reqs))
	for k, r := range reqs {
		// params is optional in the schema (roots/list has none to
		// give), but the Go SDK's client fails to decode a request
		// without it: an empty object means the same to every client.
		params := b.shape(up.Name(), r.Method, r.Params)
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{}`)
		}
		ask := map[string]any{"method": r.Method, "params": params}
		asks[k] = ask
	}
	return json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": asks,
		"requestState":  requestStatePrefix + id,
	})
}

// errClosing ends a parked call when the Handler closes.
var errClosing = errors.New("the gateway is shutting down")

// pumpInput reads the rest of a parked call's upstream stream and posts to
// the mailbox each further request for input and, last, the response. It
// is owned by b.own: the upstream call's timeout bounds it, and life's end
// (Close) cancels the call. ending is called before the last post.
func (b *Bridge) pumpInput(life context.Context, up Upstream, resp Stream, pump string, caps json.RawMessage, cancel context.CancelCauseFunc, ending func()) {
	defer cancel(nil)
	defer resp.Close()
	stop := context.AfterFunc(life, func() { cancel(errClosing) })
	defer stop()
	// Posts outlive life, so that a retry on another replica learns the
	// call ended; replies to the upstream do not.
	ctx := context.Background()
	key, ttl := pumpKeyPrefix+pump, up.Timeout()
	post := func(msg []byte) error {
		err := b.mailbox.Post(ctx, key, msg, ttl)
		if err != nil {
			b.log.Warn("posting an upstream's message for a retry", "upstream", up.Name(), "error", err)
		}
		return err
	}
	for {
		msg, raw, err := resp.Next()
		if err != nil {
			if life.Err() != nil {
				err = errClosing
			}
			ending()
			post(jsonrpc.AppendError(nil, jsonrpc.NullID, jsonrpc.AsError(err)))
			return
		}
		switch msg.Kind {
		case jsonrpc.KindNotification:
			b.observe(up.Name(), msg) // nobody to relay it to
		case jsonrpc.KindRequest:
			c := InputCapability(msg.Method)
			switch {
			case msg.Method == protocol.MethodPing:
				_ = up.Reply(life, resp.Session(), msg.ID, json.RawMessage(`{}`), nil)
			case c == "" || b.lacks(&Caller{Caps: caps}, msg):
				_ = up.Reply(life, resp.Session(), msg.ID, nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound,
					"Method not found: the client did not declare the capability for %s", msg.Method))
			default:
				if post(raw) != nil {
					// The mailbox is full (or gone): the upstream hears at
					// once that its request cannot reach the client, and
					// the call goes on to its answer.
					_ = up.Reply(life, resp.Session(), msg.ID, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError,
						"the request for input could not be relayed to the client"))
				}
			}
		default:
			ending()
			if post(raw) != nil {
				// Too big for the mailbox, say: the retry gets an error
				// rather than waiting out the timeout.
				post(jsonrpc.AppendError(nil, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInternalError,
					"upstream %s: the answer could not be handed to the retry", up.Name())))
			}
			return
		}
	}
}

var errBadState = jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: requestState is unknown, expired, already used, or not this request's")

// Resume serves the retry of a parked call, whose params p carry state (its
// requestState): the inputResponses go upstream, on us, the caller's
// session with up, as the answers to its requests, and the pump's next
// message is the retry's answer, through rewrite if it is the result.
func (b *Bridge) Resume(ctx context.Context, who *Caller, c *Call, up Upstream, us session.Upstream, p *jsonx.Object, state string, rewrite func(json.RawMessage) (json.RawMessage, error)) (json.RawMessage, error) {
	id, ok := strings.CutPrefix(state, requestStatePrefix)
	if _, err := hex.DecodeString(id); !ok || err != nil || len(id) != 32 {
		return nil, errBadState
	}
	raw, err := b.mailbox.Take(ctx, stateKeyPrefix+id, 0)
	if errors.Is(err, session.ErrNotFound) {
		return nil, errBadState
	} else if err != nil {
		return nil, err
	}
	var st inputState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, errBadState
	}
	// The state binds the principal and the call (2026-07-28
	// basic/patterns/mrtr, "Server Requirements" 5).
	if st.Principal != who.Principal || st.Method != c.Method || st.Target != c.Target || st.Upstream != up.Name() {
		return nil, errBadState
	}
	if us.SessionID != st.Session {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream session of this call has ended; call again")
	}
	var answers *jsonx.Object
	if v := p.Get("inputResponses"); v != nil {
		if answers, err = jsonx.ParseValidObject(v); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses must be an object")
		}
	}
	missing := map[string]pendingInput{}
	keys := make([]string, 0, len(st.Requests))
	for k := range st.Requests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		req := st.Requests[k]
		var ans json.RawMessage
		if answers != nil {
			ans = answers.Get(k)
		}
		if ans == nil || ans[0] != '{' {
			// Asked again rather than failed (mrtr, "Error Handling").
			missing[k] = req
			continue
		}
		rid, err := jsonrpc.RawID(req.ID)
		if err != nil {
			return nil, errBadState
		}
		if err := up.Reply(ctx, us, rid, ans, nil); err != nil {
			return nil, err
		}
	}
	if len(missing) > 0 {
		return b.inputRequired(ctx, who, c, up, us.SessionID, st.Pump, missing)
	}
	return b.awaitInput(ctx, who, c, up, us, st.Pump, rewrite)
}

// awaitInput takes the pump's next message: another request for input, or
// the call's response.
func (b *Bridge) awaitInput(ctx context.Context, who *Caller, c *Call, up Upstream, us session.Upstream, pump string, rewrite func(json.RawMessage) (json.RawMessage, error)) (json.RawMessage, error) {
	raw, err := b.mailbox.Take(ctx, pumpKeyPrefix+pump, up.Timeout())
	if errors.Is(err, session.ErrNotFound) {
		return nil, fmt.Errorf("upstream %s: %s: %w", up.Name(), c.Method, context.DeadlineExceeded)
	} else if err != nil {
		return nil, err
	}
	msg, err := jsonrpc.Decode(raw)
	if err != nil {
		return nil, err
	}
	switch msg.Kind {
	case jsonrpc.KindRequest:
		return b.inputRequired(ctx, who, c, up, us.SessionID, pump, map[string]pendingInput{
			"input-1": {ID: msg.ID.Raw(), Method: msg.Method, Params: msg.Params},
		})
	case jsonrpc.KindErrorResponse:
		return nil, msg.Error
	}
	if rewrite != nil {
		return rewrite(msg.Result)
	}
	return msg.Result, nil
}

// InputRequired reports whether a result is a 2026-07-28 input_required.
func InputRequired(res json.RawMessage) bool {
	if !strings.Contains(string(res), `"input_required"`) {
		return false // the common case, without parsing
	}
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return false
	}
	t, _ := o.GetString("resultType")
	return t == "input_required"
}

// answer is a session client's answer to an input request, in a mailbox.
type answer struct {
	Session string          `json:"s"`
	Key     string          `json:"k"`
	Result  json.RawMessage `json:"r,omitempty"`
	Error   *jsonrpc.Error  `json:"e,omitempty"`
}

// AskClient asks a session client for the inputs a 2026-07-28 upstream's
// input_required result requests, and returns the params of the retry:
// the call's, with the answers as inputResponses and the upstream's
// requestState.
func (b *Bridge) AskClient(ctx context.Context, who *Caller, c *Call, up Upstream, params, res json.RawMessage, max int) (json.RawMessage, error) {
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return nil, err
	}
	answers := &jsonx.Object{}
	var asks *jsonx.Object
	if v := o.Get("inputRequests"); v != nil && string(v) != "null" {
		if asks, err = jsonx.ParseValidObject(v); err != nil {
			return nil, fmt.Errorf("upstream %s: malformed inputRequests: %w", up.Name(), err)
		}
	}
	if asks != nil && len(asks.Members) > 0 {
		if b.mailbox == nil || c.Out.Collects() {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %s asked for input, which cannot reach this client", up.Name())
		}
		// The answers wait in one mailbox, which holds at most
		// sessions.mailbox_messages: an upstream asks for no more at once.
		if limit := max; limit > 0 && len(asks.Members) > limit {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %s asked for %d inputs at once, more than the gateway relays (%d)", up.Name(), len(asks.Members), limit)
		}
		box := session.NewID()
		deadline := time.Now().Add(up.Timeout())
		pending := make(map[string]bool, len(asks.Members))
		for _, m := range asks.Members {
			ask, err := jsonx.ParseValidObject(m.Value)
			if err != nil {
				return nil, fmt.Errorf("upstream %s: malformed input request: %w", up.Name(), err)
			}
			method, _ := ask.GetString("method")
			if InputCapability(method) == "" || b.lacks(who, &jsonrpc.Message{Kind: jsonrpc.KindRequest, Method: method, Params: ask.Get("params")}) {
				// The upstream asked for what the client did not declare
				// (mrtr, "Server Requirements" 7).
				return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %s asked for %q, which the client did not declare", up.Name(), method)
			}
			k := base64.RawURLEncoding.EncodeToString([]byte(m.Name))
			// The marker first: the answer may come before event returns.
			if err := b.markAsked(ctx, who, box, k, deadline); err != nil {
				return nil, err
			}
			if err := c.Out.Event(jsonrpc.AppendRequest(nil, jsonrpc.StringID(askedPrefix+box+"."+k), method, b.shape(up.Name(), method, ask.Get("params")))); err != nil {
				return nil, err
			}
			pending[m.Name] = true
		}
		for len(pending) > 0 {
			raw, err := b.mailbox.Take(ctx, answerKeyPrefix+box, time.Until(deadline))
			if errors.Is(err, session.ErrNotFound) {
				return nil, fmt.Errorf("upstream %s: %s: waiting for the client's input: %w", up.Name(), c.Method, context.DeadlineExceeded)
			} else if err != nil {
				return nil, err
			}
			var a answer
			if json.Unmarshal(raw, &a) != nil || a.Session != who.Session || !pending[a.Key] {
				continue
			}
			if a.Error != nil {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the client could not give the input upstream %s asked for: %s", up.Name(), a.Error.Message)
			}
			answers.Set(a.Key, a.Result)
			delete(pending, a.Key)
		}
	}
	p, err := jsonx.ParseValidObject(params)
	if err != nil {
		return nil, err
	}
	if len(answers.Members) > 0 {
		p.Set("inputResponses", answers.Bytes())
	} else {
		p.Delete("inputResponses")
	}
	if state, ok := o.GetString("requestState"); ok {
		p.SetString("requestState", state)
	} else {
		p.Delete("requestState")
	}
	return p.Bytes(), nil
}

// askedMarker is what a marker holds: who was asked, and until when the
// call waits for the answer.
type askedMarker struct {
	Principal string `json:"p"` // principalKey
	Deadline  int64  `json:"d"` // Unix milliseconds
}

// askedKey is the mailbox key of the marker of the input request k of
// mailbox box, asked of session sid: the session (bound to one principal)
// is part of the key, so another session's answer finds no marker and
// leaves the real one in place. It is hashed, to keep session ids out of
// the store's keys.
func askedKey(box, k, sid string) string {
	sum := sha256.Sum256([]byte(sid))
	return askedKeyPrefix + box + "." + k + "." + hex.EncodeToString(sum[:16])
}

// markAsked records that the input request k of mailbox box is asked of
// who's client, until deadline.
func (b *Bridge) markAsked(ctx context.Context, who *Caller, box, k string, deadline time.Time) error {
	buf, err := json.Marshal(askedMarker{Principal: who.Principal, Deadline: deadline.UnixMilli()})
	if err != nil {
		return err
	}
	return b.mailbox.Post(ctx, askedKey(box, k, who.Session), buf, time.Until(deadline))
}

// postAnswer posts a session client's answer to an input request (its id
// without askedPrefix is rest) to the mailbox of the call that asked, if
// the gateway asked it of this session and the call still waits; it
// returns errUnsolicited otherwise.
func (b *Bridge) postAnswer(ctx context.Context, who *Caller, rest string, msg *jsonrpc.Message) error {
	box, k, ok := strings.Cut(rest, ".")
	if !ok || b.mailbox == nil || len(box) != 32 || strings.Contains(k, ".") {
		return errUnsolicited
	}
	if _, err := hex.DecodeString(box); err != nil {
		return errUnsolicited
	}
	key, err := base64.RawURLEncoding.DecodeString(k)
	if err != nil {
		return errUnsolicited
	}
	raw, err := b.mailbox.Take(ctx, askedKey(box, k, who.Session), 0)
	if errors.Is(err, session.ErrNotFound) {
		return errUnsolicited
	} else if err != nil {
		b.log.Warn("taking the marker of an input request", "error", err)
		return nil
	}
	var m askedMarker
	if json.Unmarshal(raw, &m) != nil || m.Principal != who.Principal {
		return errUnsolicited
	}
	ttl := min(time.Until(time.UnixMilli(m.Deadline)), answerTTL)
	if ttl <= 0 {
		return errUnsolicited // the call gave up
	}
	a := answer{Session: who.Session, Key: string(key), Result: msg.Result, Error: msg.Error}
	if msg.Kind == jsonrpc.KindResponse && (len(msg.Result) == 0 || msg.Result[0] != '{') {
		// Not a result the upstream could take: the call fails now
		// rather than at its timeout.
		a.Result, a.Error = nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "the client's answer is not an object")
	}
	buf, err := json.Marshal(a)
	if err != nil {
		return nil
	}
	err = b.mailbox.Post(ctx, answerKeyPrefix+box, buf, ttl)
	if err != nil && (errors.Is(err, session.ErrLimit) || errors.Is(err, session.ErrFull)) {
		// Too big for the mailbox: a short error in its place, so the
		// call fails now rather than at its timeout.
		b.log.Debug("a client's answer to an input request exceeds the mailbox", "tenant", who.Tenant, "error", err)
		a.Result, a.Error = nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the answer exceeds the gateway's mailbox limit")
		if buf, err = json.Marshal(a); err == nil {
			err = b.mailbox.Post(ctx, answerKeyPrefix+box, buf, ttl)
		}
	}
	if err != nil {
		b.log.Warn("posting a client's answer to an input request", "error", err)
	}
	return nil
}

// unsolicited drops a client's answer that no pending request of the
// gateway's awaits, counting it.
func (b *Bridge) unsolicited(who *Caller) {
	b.metrics.LimitRejection(telemetry.LimitUnsolicitedAnswer, who.Tenant)
	b.log.Debug("dropped a client's answer to no pending request", "tenant", who.Tenant)
}
