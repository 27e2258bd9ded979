package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

// normalizingUpstream is a hand-written MCP server (JSON answers only) that
// reads resource URIs the lenient way real file servers do: scheme and host
// in any case, "localhost" for no host, "file:/p" for "file:///p", and runs
// of slashes as one. It serves file:///secret/key and file:///public/key,
// and counts the reads that reached the secret.
type normalizingUpstream struct {
	url         string
	secretReads atomic.Int32
}

const upstreamSecret = "TOP-SECRET-CONTENTS"

func newNormalizingUpstream(t *testing.T) *normalizingUpstream {
	u := &normalizingUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				URI string `json:"uri"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		answer := func(result any) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
		}
		switch msg.Method {
		case "initialize":
			answer(map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"resources": map[string]any{}},
				"serverInfo": map[string]any{"name": "lenient", "version": "1"}})
		case "resources/list":
			answer(map[string]any{"resources": []any{}})
		case "resources/templates/list":
			answer(map[string]any{"resourceTemplates": []any{}})
		case "resources/read":
			p := lenientPath(msg.Params.URI)
			if p != "/secret/key" && p != "/public/key" {
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID,
					"error": map[string]any{"code": -32002, "message": "Resource not found"}})
				return
			}
			text := "public"
			if p == "/secret/key" {
				u.secretReads.Add(1)
				text = upstreamSecret
			}
			answer(map[string]any{"contents": []any{map[string]any{"uri": msg.Params.URI, "text": text}}})
		default:
			answer(map[string]any{})
		}
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL + "/mcp"
	return u
}

// lenientPath returns the path a lenient server reads in a file URI, or "".
func lenientPath(uri string) string {
	scheme, rest, ok := strings.Cut(uri, ":")
	if !ok || !strings.EqualFold(scheme, "file") {
		return ""
	}
	if h, ok := strings.CutPrefix(rest, "//"); ok {
		host, path, _ := strings.Cut(h, "/")
		if host != "" && !strings.EqualFold(host, "localhost") {
			return ""
		}
		rest = "/" + path
	}
	for strings.Contains(rest, "//") {
		rest = strings.ReplaceAll(rest, "//", "/")
	}
	return rest
}

// TestDenyRuleEverySpelling: `deny: ["file:///secret/*"]` holds against
// every spelling of the URI that a lenient upstream reads as the secret;
// each read is answered as a URI that does not exist, and none reaches the
// upstream.
func TestDenyRuleEverySpelling(t *testing.T) {
	up := newNormalizingUpstream(t)
	url := startGateway(t, []upstreamSpec{{name: "fs", url: up.url}}, func(c *config.Config) {
		c.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{
			{Name: "fs", Resources: config.Rules{Deny: []string{"file:///secret/*"}}},
		}}}
	})
	cs := testkit.Connect(t, url, nil)
	ctx := context.Background()

	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fs+file:///public/key"})
	if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "public" {
		t.Fatalf("public resource: %+v, %v", res, err)
	}
	// What an unknown URI gets: the gateway's own answer.
	_, unknownErr := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "nope+file:///secret/key"})
	var unknown *sdkjsonrpc.Error
	if !errors.As(unknownErr, &unknown) {
		t.Fatalf("unknown URI: %v", unknownErr)
	}
	for _, spelling := range []string{
		"file:///secret/key",
		"FILE:///secret/key",
		"File:///secret/key",
		"file:////secret/key",
		"file://///secret/key",
		"file:/secret/key",
		"file://localhost/secret/key",
		"FILE://LOCALHOST/secret/key",
		"file:///secret//key",
		"file:///%2Fsecret/key",
	} {
		uri := "fs+" + spelling
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		var got *sdkjsonrpc.Error
		if !errors.As(err, &got) {
			t.Errorf("%s: %+v, %v: read", spelling, res, err)
			continue
		}
		if got.Code != unknown.Code || got.Message != "Resource not found: "+uri ||
			unknown.Message != "Resource not found: nope+file:///secret/key" {
			t.Errorf("%s: error %d %q; an unknown URI gets %d %q", spelling, got.Code, got.Message, unknown.Code, unknown.Message)
		}
	}
	if n := up.secretReads.Load(); n != 0 {
		t.Errorf("the upstream served the secret %d times", n)
	}
}

// echoingUpstream is a hand-written MCP server with one tool, "leak", whose
// calls fail with an HTTP 500 whose body echoes the request's headers, as a
// debugging error page does; resources/read fails with a JSON-RPC error
// that echoes them too.
func echoingUpstream(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var headers strings.Builder
		r.Header.Write(&headers)
		w.Header().Set("Content-Type", "application/json")
		var result any
		switch msg.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": "2025-11-25", "serverInfo": map[string]any{"name": "echo", "version": "1"},
				"capabilities": map[string]any{"tools": map[string]any{}, "resources": map[string]any{}}}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": "leak", "inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "panic serving request; headers:\n"+headers.String())
			return
		case "resources/read":
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID,
				"error": map[string]any{"code": -32603, "message": "failed with headers " + headers.String(), "data": headers.String()}})
			return
		default:
			result = map[string]any{}
		}
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestUpstreamErrorsHoldNoSecret: the configured upstream header values
// never reach a client or the log through an upstream's error that echoes
// the request headers.
func TestUpstreamErrorsHoldNoSecret(t *testing.T) {
	const bearer, apiKey = "gw-to-upstream-bearer-7f3a9c", "upstream-api-key-51d0e2"
	cfg := &config.Config{Auth: config.Auth{Anonymous: true}}
	cfg.Upstreams = []config.Upstream{{Name: "echo", URL: echoingUpstream(t), Watch: ptr(false),
		Headers: map[string]string{"Authorization": "Bearer " + bearer, "X-Api-Key": apiKey}}}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	g, err := gateway.New(cfg, gateway.Options{Version: "test",
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })

	cs := testkit.Connect(t, srv.URL+"/mcp", nil)
	ctx := context.Background()
	var seen []string
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo__leak"})
	if err == nil {
		b, _ := json.Marshal(res)
		seen = append(seen, string(b))
		if !res.IsError {
			t.Errorf("tools/call of a failing upstream: %s", b)
		}
	} else {
		seen = append(seen, err.Error())
	}
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "echo+file:///x"})
	if err == nil {
		t.Error("resources/read of a failing upstream succeeded")
	} else {
		seen = append(seen, err.Error())
		var rpcErr *sdkjsonrpc.Error
		if errors.As(err, &rpcErr) {
			seen = append(seen, string(rpcErr.Data))
		}
	}
	all := strings.Join(seen, "\n")
	if !strings.Contains(all, "[redacted]") {
		t.Errorf("the upstream's errors did not reach the client redacted: %s", all)
	}
	for where, text := range map[string]string{"client": all, "log": logs.String()} {
		for _, secret := range []string{bearer, apiKey} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s saw secret %q: %s", where, secret, text)
			}
		}
	}
	if testing.Verbose() {
		t.Logf("client saw: %s", all)
	}
}

// TestRequireATJWT: with require_at_jwt, a real provider's RFC 9068 access
// token (oidc-provider signs JWT access tokens with typ at+jwt) is
// accepted, and a token of the same issuer with another typ gets the 401
// invalid_token of any token failure, with the reason "wrong token type".
// An issuer without the option keeps accepting typ JWT.
func TestRequireATJWT(t *testing.T) {
	e := startAuthGateway(t, func(c *config.Config) {
		c.Auth.Issuers[0].RequireATJWT = true // the real provider
	})
	good := e.idp.Token(t, "acme-app", e.url, "mcp")
	if hdr, _, _ := segments(t, good); hdr["typ"] != "at+jwt" {
		t.Fatalf("the provider's token has typ %v", hdr["typ"])
	}
	// The same token with typ JWT: the signature no longer matches, but
	// the type is refused before any key is looked up.
	hdr, payload, sig := segments(t, good)
	hdr["typ"] = "JWT"
	jwtTyped := encodeSeg(hdr) + "." + encodeSeg(payload) + "." + sig
	delete(hdr, "typ")
	untyped := encodeSeg(hdr) + "." + encodeSeg(payload) + "." + sig
	now := time.Now()
	lab := e.lab.sign(t, jwt.MapClaims{"iss": e.lab.url, "sub": "lab-user", "aud": e.url, "scope": "mcp",
		"org": map[string]any{"tenant": "acme"}, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	if hdr, _, _ := segments(t, lab); hdr["typ"] != "JWT" {
		t.Fatalf("the lab token has typ %v", hdr["typ"])
	}

	for _, tc := range []struct {
		name, token string
		status      int
	}{
		{"provider at+jwt", good, 200},
		{"provider token as typ JWT", jwtTyped, 401},
		{"provider token without typ", untyped, 401},
		{"issuer without require_at_jwt, typ JWT", lab, 200},
	} {
		resp, err := http.DefaultClient.Do(authedPost(t, e.url, tc.token, "", initBody))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		if tc.status == 401 {
			want := `Bearer resource_metadata="` + e.metadata + `", scope="mcp", error="invalid_token", error_description="wrong token type"`
			if got := resp.Header.Get("WWW-Authenticate"); got != want {
				t.Errorf("%s: WWW-Authenticate %q, want %q", tc.name, got, want)
			}
		}
	}
}
