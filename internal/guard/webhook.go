package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/share"
)

// External hooks. The gateway POSTs an envelope naming the phase, the
// principal, the upstream and the item, with the content as it stands
// after the built-in guards (so a hook never sees what they redacted);
// the hook answers allow, block (with a message for the model) or replace
// (with new content). docs/guards.md has the contract.

// Envelope is the JSON body the gateway POSTs to a hook.
type Envelope struct {
	// Version is the contract's version: 1.
	Version int    `json:"version"`
	Phase   string `json:"phase"`
	Method  string `json:"method,omitempty"`
	Tenant  string `json:"tenant"`
	Subject string `json:"subject,omitempty"`
	// Guard is the guard's name (or config path).
	Guard    string `json:"guard"`
	Upstream string `json:"upstream"`
	Tool     string `json:"tool,omitempty"`
	Item     string `json:"item,omitempty"`
	// Content is the arguments object, the result or the definition.
	Content json.RawMessage `json:"content"`
}

// Answer is what a hook answers.
type Answer struct {
	// Action is "allow", "block" or "replace".
	Action string `json:"action"`
	// Message, with block, is told to the model (at most 1 KiB of it,
	// without control or format characters).
	Message string `json:"message,omitempty"`
	// Content, with replace, is the content to pass on instead: a JSON
	// object, as the content was.
	Content json.RawMessage `json:"content,omitempty"`
}

// Values of Answer.Action.
const (
	HookAllow   = "allow"
	HookBlock   = "block"
	HookReplace = "replace"
)

// A WebhookEvent is one request to a hook, or one not sent.
type WebhookEvent struct {
	Guard    string
	Phase    Phase
	Duration time.Duration
	// Action is the hook's answer; "" when it could not be asked.
	Action string
	// Err is why it could not be asked: ErrBusy, a timeout, a status, an
	// answer outside the contract. It holds no content.
	Err error
}

// ErrBusy is the error of a request not sent because max_in_flight
// requests, or the tenant's or the principal's share of them, were in
// flight.
var ErrBusy = errors.New("webhook: max_in_flight requests already in flight")

// maxHookMessage bounds the message of a hook's block.
const maxHookMessage = 1 << 10

type webhook struct {
	guard       string
	url         string
	header      http.Header
	client      *http.Client
	timeout     time.Duration
	maxResponse int64
	// slots bounds the requests in flight (max_in_flight), of which
	// one tenant holds at most half and one principal a quarter: a
	// tenant that floods the hook is refused before the others are.
	slots      share.Counts
	shares     share.Share
	allowOnErr bool
	onEvent    func(WebhookEvent)
}

func newWebhook(c *config.GuardWebhook, path, guard string, o Options) (*webhook, error) {
	w := &webhook{
		guard: guard, url: c.URL, header: http.Header{}, client: o.HTTPClient,
		timeout: c.Timeout.D(), maxResponse: c.MaxResponseBytes,
		allowOnErr: c.OnError == config.GuardAllow, onEvent: o.OnWebhook,
	}
	for k, v := range c.Headers {
		w.header.Set(k, v)
	}
	if w.timeout <= 0 {
		w.timeout = config.DefaultGuardWebhookTimeout.D()
	}
	if w.maxResponse <= 0 {
		w.maxResponse = config.DefaultGuardWebhookMaxResponse
	}
	n := c.MaxInFlight
	if n <= 0 {
		n = config.DefaultGuardWebhookMaxInFlight
	}
	w.shares = share.Share{Pool: n, Tenant: max(1, (n+1)/2), Principal: max(1, (n+3)/4)}
	if w.client == nil {
		var err error
		if w.client, err = c.TLS.HTTPClient(); err != nil {
			return nil, fmt.Errorf("%s.tls: %w", path, err)
		}
	}
	return w, nil
}

// ask asks g's hook about content and records its answer; it returns the
// content to pass on and whether the hook (or its on_error) blocked.
func (r *runner) ask(ctx context.Context, g *guard, content json.RawMessage) (json.RawMessage, bool) {
	in := r.in
	if in == nil {
		in = &Input{}
	}
	env := Envelope{Version: 1, Phase: r.phase.String(), Method: in.Method, Tenant: in.Tenant, Subject: in.Subject,
		Guard: g.name, Upstream: r.s.upstream, Tool: in.Tool, Item: in.Item, Content: content}
	start := time.Now()
	ans, err := g.hook.call(ctx, &env)
	if ev := g.hook.onEvent; ev != nil {
		e := WebhookEvent{Guard: g.name, Phase: r.phase, Duration: time.Since(start), Err: err}
		if err == nil {
			e.Action = ans.Action
		}
		ev(e)
	}
	if err != nil {
		r.v.Err = err
		if g.hook.allowOnErr {
			r.add(g, "webhook-error", Flag, 1)
			return content, false
		}
		r.add(g, "webhook-error", Block, 1)
		r.blockGuard = g
		r.block("the content check it depends on did not answer")
		return nil, true
	}
	switch ans.Action {
	case HookBlock:
		r.add(g, "webhook", Block, 1)
		r.blockGuard = g
		why := "the content check refused it"
		if m := cleanMessage(ans.Message); m != "" {
			why += " (" + m + ")"
		}
		r.block(why)
		return nil, true
	case HookReplace:
		r.add(g, "webhook", Redact, 1)
		return ans.Content, false
	}
	return content, false
}

// call POSTs env to the hook and returns its answer, checked against the
// contract.
func (w *webhook) call(ctx context.Context, env *Envelope) (*Answer, error) {
	who := env.Tenant + "\x00" + env.Subject
	if w.slots.Take(who, env.Tenant, w.shares) != 0 {
		return nil, ErrBusy
	}
	defer w.slots.Give(who, env.Tenant)
	body, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("webhook: encoding the request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return nil, errors.New("webhook: invalid request") // the URL may hold credentials: not quoted
	}
	for k, v := range w.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("webhook: no answer within %v", w.timeout)
		}
		return nil, errors.New("webhook: the request failed")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("webhook: status %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, w.maxResponse+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("webhook: no answer within %v", w.timeout)
		}
		return nil, errors.New("webhook: reading the answer failed")
	}
	if int64(len(b)) > w.maxResponse {
		return nil, fmt.Errorf("webhook: answer longer than %d bytes", w.maxResponse)
	}
	var ans Answer
	if !jsonx.Valid(b) || json.Unmarshal(b, &ans) != nil {
		return nil, errors.New("webhook: the answer is not a JSON object of the contract")
	}
	switch ans.Action {
	case HookAllow, HookBlock:
	case HookReplace:
		c := bytes.TrimSpace(ans.Content)
		if len(c) == 0 || c[0] != '{' || !jsonx.Valid(c) {
			return nil, errors.New(`webhook: "replace" without a JSON object in "content"`)
		}
		ans.Content = c
	default:
		return nil, errors.New(`webhook: "action" is not "allow", "block" or "replace"`)
	}
	return &ans, nil
}

// cleanMessage returns a hook's message fit for the model: without
// control or format characters, at most maxHookMessage bytes.
func cleanMessage(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r >= 0xE0000 && r <= 0xE007F {
			if r == '\n' || r == '\t' {
				return ' '
			}
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > maxHookMessage {
		cut := maxHookMessage
		for cut > 0 && s[cut]&0xc0 == 0x80 {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// compileRegexp compiles an extra pattern (validation compiled it once
// already, with its line).
func compileRegexp(expr string) (*regexp.Regexp, error) { return regexp.Compile(expr) }
