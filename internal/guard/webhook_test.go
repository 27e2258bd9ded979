package guard

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgw/gateway/internal/testkit"
)

// hookGuard is a guard list with one built-in guard (email, redact) and
// then a webhook guard with the settings extra.
func hookGuard(url, extra string) string {
	return "      - {detect: [email]}\n      - name: hook\n        webhook: {url: " + url + ", headers: {X-Key: \"${HOOK_KEY}\"}" + extra + "}\n"
}

// TestWebhookAnswers: allow, block and replace through a real HTTP hook;
// the hook sees the envelope, after the built-in guards.
func TestWebhookAnswers(t *testing.T) {
	var answer testkit.GuardHookAnswer
	var mu sync.Mutex
	hook := testkit.NewGuardHook(t, func(testkit.GuardHookRequest) testkit.GuardHookAnswer {
		mu.Lock()
		defer mu.Unlock()
		return answer
	})
	var events []WebhookEvent
	e := compile(t, hookGuard(hook.URL, ""), "", Options{OnWebhook: func(ev WebhookEvent) { mu.Lock(); events = append(events, ev); mu.Unlock() }})
	in := &Input{Tenant: "acme", Subject: "alice", Upstream: "u", Tool: "send", Method: "tools/call"}
	set := func(a testkit.GuardHookAnswer) { mu.Lock(); answer = a; mu.Unlock() }

	set(testkit.GuardHookAnswer{Action: "allow"})
	args := json.RawMessage(`{"to":"bob@example.com","body":"hi"}`)
	out, v := e.For("acme", "u", "send").Arguments(ctx, in, args)
	if string(out) != `{"to":"[redacted:email]","body":"hi"}` || v.Action != Redact {
		t.Errorf("allow: %s %+v", out, v)
	}
	reqs := hook.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Phase != "arguments" || r.Tenant != "acme" || r.Subject != "alice" || r.Upstream != "u" || r.Tool != "send" ||
		r.Method != "tools/call" || r.Guard != "hook" || r.Header.Get("X-Key") != "s3cret-value-1234" {
		t.Errorf("envelope %+v", r)
	}
	if strings.Contains(string(r.Content), "bob@") {
		t.Errorf("the hook saw what the built-in guard redacted: %s", r.Content)
	}

	set(testkit.GuardHookAnswer{Action: "block", Message: "Policy 7\x1b[31m forbids\u200b this."})
	out, v = e.For("acme", "u", "send").Arguments(ctx, in, args)
	if out != nil || v.Action != Block || !strings.Contains(v.Message, "(Policy 7[31m forbids this.)") {
		t.Errorf("block: %s %+v", out, v)
	}

	set(testkit.GuardHookAnswer{Action: "replace", Content: json.RawMessage(`{"to":"nobody","body":"hi"}`)})
	out, v = e.For("acme", "u", "send").Arguments(ctx, in, args)
	if string(out) != `{"to":"nobody","body":"hi"}` || v.Action != Redact {
		t.Errorf("replace: %s %+v", out, v)
	}
	if v := hook.Violations(); len(v) > 0 {
		t.Errorf("contract violations: %v", v)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 3 || events[0].Action != "allow" || events[1].Action != "block" || events[2].Err != nil {
		t.Errorf("events %+v", events)
	}
}

// TestWebhookErrors: a hook that fails, answers outside the contract or
// too long blocks (on_error block, the default), or passes flagged
// (on_error allow).
func TestWebhookErrors(t *testing.T) {
	hook := testkit.NewGuardHook(t, nil)
	for _, c := range []struct {
		name  string
		setup func()
	}{
		{"status", func() { hook.FailWith(http.StatusInternalServerError) }},
		{"not json", func() { hook.AnswerRaw([]byte("ok")) }},
		{"unknown action", func() { hook.AnswerRaw([]byte(`{"action":"maybe"}`)) }},
		{"replace without content", func() { hook.AnswerRaw([]byte(`{"action":"replace"}`)) }},
		{"replace with a string", func() { hook.AnswerRaw([]byte(`{"action":"replace","content":"x"}`)) }},
		{"too long", func() { hook.AnswerRaw([]byte(`{"action":"allow","message":"` + strings.Repeat("x", 2048) + `"}`)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			hook.FailWith(0)
			hook.AnswerRaw(nil)
			c.setup()
			for _, onErr := range []string{"", ", on_error: allow"} {
				e := compile(t, hookGuard(hook.URL, ", max_response_bytes: 1024"+onErr), "", Options{})
				res := textResult("fine")
				out, v := e.For("t", "u", "x").Result(ctx, &Input{Upstream: "u"}, res)
				if v.Err == nil {
					t.Errorf("on_error %q: no error", onErr)
				}
				if onErr == "" && (out != nil || v.Action != Block || kinds(v)[0] != "webhook-error") {
					t.Errorf("on_error block: %s %+v", out, v)
				}
				if onErr != "" && (string(out) != string(res) || v.Action != Flag) {
					t.Errorf("on_error allow: %s %+v", out, v)
				}
			}
		})
	}
}

// TestWebhookTimeout: a hook that does not answer within its timeout
// blocks; the clock is synctest's.
func TestWebhookTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := testkit.NewGuardHookHandler(nil)
		release := hook.Hold()
		defer release()
		e := compile(t, hookGuard("http://hook.test/guard", ", timeout: 3s"), "", Options{HTTPClient: hook.Client()})
		start := time.Now()
		out, v := e.For("t", "u", "x").Result(ctx, &Input{}, textResult("fine"))
		if out != nil || v.Action != Block || v.Err == nil || !strings.Contains(v.Err.Error(), "3s") {
			t.Errorf("timeout: %s %+v", out, v)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("took %v, want the 3s timeout", d)
		}
	})
}

// TestWebhookInFlightBound: past max_in_flight a request is not sent and
// counts as an error.
func TestWebhookInFlightBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := testkit.NewGuardHookHandler(nil)
		release := hook.Hold()
		var events []WebhookEvent
		var mu sync.Mutex
		e := compile(t, hookGuard("http://hook.test/guard", ", max_in_flight: 1"), "",
			Options{HTTPClient: hook.Client(), OnWebhook: func(ev WebhookEvent) { mu.Lock(); events = append(events, ev); mu.Unlock() }})
		s := e.For("t", "u", "x")
		done := make(chan Verdict)
		go func() {
			_, v := s.Result(ctx, &Input{}, textResult("first"))
			done <- v
		}()
		synctest.Wait() // the first request is held by the hook
		if now, _ := hook.InFlight(); now != 1 {
			t.Fatalf("%d in flight", now)
		}
		out, v := s.Result(ctx, &Input{}, textResult("second"))
		if out != nil || v.Action != Block || !errors.Is(v.Err, ErrBusy) {
			t.Errorf("second: %s %+v", out, v)
		}
		release()
		if v := <-done; v.Action != Pass {
			t.Errorf("first: %+v", v)
		}
		if _, most := hook.InFlight(); most != 1 {
			t.Errorf("at most %d in flight", most)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(events) != 2 || !errors.Is(events[0].Err, ErrBusy) {
			t.Errorf("events %+v", events)
		}
	})
}

// TestWebhookTenantShare: of max_in_flight requests to a hook, one tenant
// holds at most half and one principal a quarter: a tenant that holds its
// share is refused while another tenant is still served.
func TestWebhookTenantShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := testkit.NewGuardHookHandler(nil)
		release := hook.Hold()
		e := compile(t, hookGuard("http://hook.test/guard", ", max_in_flight: 4"), "", Options{HTTPClient: hook.Client()})
		s := e.For("t", "u", "x")
		var wg sync.WaitGroup
		// acme's two principals take acme's share of 2 (one each: a
		// principal's share is 1).
		for _, sub := range []string{"alice", "bob"} {
			wg.Go(func() { s.Result(ctx, &Input{Tenant: "acme", Subject: sub}, textResult("x")) })
		}
		synctest.Wait()
		if _, v := s.Result(ctx, &Input{Tenant: "acme", Subject: "carol"}, textResult("x")); !errors.Is(v.Err, ErrBusy) {
			t.Errorf("acme past its share: %+v", v)
		}
		if _, v := s.Result(ctx, &Input{Tenant: "acme", Subject: "alice"}, textResult("x")); !errors.Is(v.Err, ErrBusy) {
			t.Errorf("alice past her share: %+v", v)
		}
		done := make(chan Verdict, 1)
		go func() {
			_, v := s.Result(ctx, &Input{Tenant: "globex", Subject: "dana"}, textResult("x"))
			done <- v
		}()
		synctest.Wait()
		if now, _ := hook.InFlight(); now != 3 {
			t.Errorf("%d in flight, want acme's 2 and globex's 1", now)
		}
		release()
		if v := <-done; v.Err != nil {
			t.Errorf("globex refused: %+v", v)
		}
		wg.Wait()
	})
}
