package credentials

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/vault"
)

const gwOrigin = "https://gw.example"

// consentDemand returns the vault consent links are kept in, and the
// error a user_oauth call of alice's to upstream docs fails with.
func consentDemand(t *testing.T) (*vault.Vault, error) {
	t.Helper()
	c, err := vault.NewCipher([]vault.KeyMaterial{{ID: "k1", Secret: bytes.Repeat([]byte{7}, 32)}})
	if err != nil {
		t.Fatal(err)
	}
	v := vault.New(vault.NewMemory(vault.Limits{PendingPerPrincipal: 8, Pending: 100}), c)
	b := &Broker{now: time.Now}
	b.cur.Store(&brokerState{cfg: &config.Config{Vault: config.Vault{ConsentTTL: config.Duration(10 * time.Minute)}}, vault: v, origin: gwOrigin})
	k := vault.Key{Principal: vault.Principal{Issuer: "https://idp.example", Subject: "alice", Tenant: "acme"}, Upstream: "docs"}
	return v, &Error{Upstream: "docs", Mode: ModeUserOAuth, Err: &ConsentRequired{Upstream: "docs", b: b, key: k}}
}

// Client capabilities.
var (
	urlCaps  = json.RawMessage(`{"elicitation":{"url":{},"form":{}}}`)
	formCaps = json.RawMessage(`{"elicitation":{}}`)
	nullURL  = json.RawMessage(`{"elicitation":{"url":null}}`)
)

// pendingSession returns the session the consent link url told of its
// completion.
func pendingSession(t *testing.T, v *vault.Vault, url string) string {
	t.Helper()
	id, ok := strings.CutPrefix(url, gwOrigin+ConsentPath+"?id=")
	if !ok {
		t.Fatalf("link %q is not the gateway's consent page", url)
	}
	p, err := v.Peek(context.Background(), id)
	if err != nil {
		t.Fatalf("link %q: %v", url, err)
	}
	return p.Session
}

// TestConsentNeeded: only a consent demand is one, wrapped or not; it is
// the caller's to act on.
func TestConsentNeeded(t *testing.T) {
	_, err := consentDemand(t)
	if cr := ConsentNeeded(err); cr == nil || cr.Upstream != "docs" {
		t.Fatalf("ConsentNeeded(%v) = %v", err, cr)
	}
	if !CallerMustAct(err) {
		t.Error("a consent demand is not the caller's to act on")
	}
	for _, other := range []error{nil, errors.New("boom"), &Error{Upstream: "docs", Mode: ModeTokenExchange, Err: ErrNoCaller}} {
		if ConsentNeeded(other) != nil || CallerMustAct(other) {
			t.Errorf("%v taken for a consent demand", other)
		}
	}
}

// TestConsentAnswerSessionClient: a 2025-11-25 client that declared
// URL-mode elicitation gets URLElicitationRequiredError (-32042) with the
// link, made for its session (told when the link is used), whatever the
// method.
func TestConsentAnswerSessionClient(t *testing.T) {
	for _, tool := range []bool{true, false} {
		v, err := consentDemand(t)
		a := ConsentNeeded(err).Answer(context.Background(), ConsentClient{Caps: urlCaps, Session: "s1", Tool: tool})
		var je *jsonrpc.Error
		if a.Result != nil || a.ToolError != "" || !errors.As(a.Err, &je) || je.Code != -32042 {
			t.Fatalf("tool %v: answer %+v", tool, a)
		}
		if !strings.Contains(je.Message, "upstream docs") {
			t.Errorf("message %q", je.Message)
		}
		var data struct {
			Elicitations []map[string]string `json:"elicitations"`
		}
		if err := json.Unmarshal(je.Data, &data); err != nil || len(data.Elicitations) != 1 {
			t.Fatalf("data %s: %v", je.Data, err)
		}
		el := data.Elicitations[0]
		if el["mode"] != "url" || el["elicitationId"] == "" || !strings.Contains(el["message"], el["url"]) {
			t.Errorf("elicitation %v", el)
		}
		if !strings.HasSuffix(el["url"], "?id="+el["elicitationId"]) {
			t.Errorf("elicitation id %q is not the link's %q", el["elicitationId"], el["url"])
		}
		if s := pendingSession(t, v, el["url"]); s != "s1" {
			t.Errorf("link made for session %q, want s1", s)
		}
	}
}

// TestConsentAnswerStateless: a 2026-07-28 client that declared URL-mode
// elicitation gets, on a method that may answer input_required, such a
// result with a URL-mode elicitation/create; the link tells no session.
func TestConsentAnswerStateless(t *testing.T) {
	v, err := consentDemand(t)
	a := ConsentNeeded(err).Answer(context.Background(), ConsentClient{Caps: urlCaps, Stateless: true, Session: "rec-1", Input: true, Tool: true})
	if a.Err != nil || a.ToolError != "" {
		t.Fatalf("answer %+v", a)
	}
	var res struct {
		ResultType    string `json:"resultType"`
		InputRequests map[string]struct {
			Method string            `json:"method"`
			Params map[string]string `json:"params"`
		} `json:"inputRequests"`
	}
	if err := json.Unmarshal(a.Result, &res); err != nil {
		t.Fatalf("result %s: %v", a.Result, err)
	}
	in, ok := res.InputRequests["consent-docs"]
	if res.ResultType != "input_required" || len(res.InputRequests) != 1 || !ok {
		t.Fatalf("result %s", a.Result)
	}
	if in.Method != protocol.MethodElicit || in.Params["mode"] != "url" || !strings.Contains(in.Params["message"], in.Params["url"]) {
		t.Errorf("input request %+v", in)
	}
	if s := pendingSession(t, v, in.Params["url"]); s != "" {
		t.Errorf("a 2026-07-28 client's link tells session %q", s)
	}

	// A method that cannot answer input_required: the tools/call result
	// with isError, or the JSON-RPC error, as for any other client.
	a = ConsentNeeded(err).Answer(context.Background(), ConsentClient{Caps: urlCaps, Stateless: true, Tool: true})
	if a.Result != nil || a.Err != nil || !strings.Contains(a.ToolError, gwOrigin+ConsentPath) {
		t.Errorf("stateless tools/call without input: %+v", a)
	}
}

// TestConsentAnswerOtherClients: a client without URL-mode elicitation
// gets the link in a tools/call result with isError, or else in a
// JSON-RPC error; no session is told of its use.
func TestConsentAnswerOtherClients(t *testing.T) {
	for _, caps := range []json.RawMessage{nil, formCaps, nullURL, json.RawMessage(`{"elicitation":true}`)} {
		v, err := consentDemand(t)
		cr := ConsentNeeded(err)
		a := cr.Answer(context.Background(), ConsentClient{Caps: caps, Session: "s1", Tool: true})
		if a.Result != nil || a.Err != nil || !strings.Contains(a.ToolError, "open "+gwOrigin+ConsentPath) || !strings.Contains(a.ToolError, "retry") {
			t.Fatalf("caps %s, tools/call: %+v", caps, a)
		}
		url := strings.Fields(strings.SplitAfter(a.ToolError, "open ")[1])[0]
		if s := pendingSession(t, v, url); s != "" {
			t.Errorf("caps %s: link tells session %q", caps, s)
		}
		a = cr.Answer(context.Background(), ConsentClient{Caps: caps, Session: "s1"})
		var je *jsonrpc.Error
		if a.Result != nil || a.ToolError != "" || !errors.As(a.Err, &je) || je.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(je.Message, gwOrigin+ConsentPath) {
			t.Errorf("caps %s, other method: %+v", caps, a)
		}
	}
}

// TestConsentAnswerNoLink: a link that cannot be made is an internal
// error naming why.
func TestConsentAnswerNoLink(t *testing.T) {
	b := &Broker{now: time.Now}
	b.cur.Store(&brokerState{cfg: &config.Config{}})
	cr := &ConsentRequired{Upstream: "docs", b: b}
	a := cr.Answer(context.Background(), ConsentClient{Caps: urlCaps, Session: "s1", Tool: true})
	var je *jsonrpc.Error
	if !errors.As(a.Err, &je) || je.Code != jsonrpc.CodeInternalError || !strings.Contains(je.Message, "vault") {
		t.Errorf("answer %+v", a)
	}
}

// TestElicitationComplete: the notification a session is sent once its
// link was used.
func TestElicitationComplete(t *testing.T) {
	msg, err := jsonrpc.Decode(ElicitationComplete("el-1"))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]string
	if msg.Kind != jsonrpc.KindNotification || msg.Method != protocol.NotifyElicitationComplete || json.Unmarshal(msg.Params, &p) != nil || p["elicitationId"] != "el-1" || len(p) != 1 {
		t.Errorf("notification %+v %s", msg, msg.Params)
	}
}
