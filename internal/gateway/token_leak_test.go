package gateway_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestTokenExchangeFailureLogsNoToken: an authorization server that
// refuses the exchange and echoes the caller's token in its answer (the
// description, whole and cut to 130 characters, and the error code) puts
// no part of it in the gateway's log, at any level, nor in what the client
// is told.
func TestTokenExchangeFailureLogsNoToken(t *testing.T) {
	idp := testkit.StartIDP(t, idpClients)
	up := testkit.NewAuthUpstream(t, testkit.AuthUpstreamOptions{Name: "svc", JWKSURL: idp.JWKSURL, Audience: "https://svc.example"})
	for _, echo := range []func(tok string) map[string]string{
		func(tok string) map[string]string {
			return map[string]string{"error": "invalid_grant", "error_description": "bad subject_token " + tok[:min(130, len(tok))]}
		},
		func(tok string) map[string]string {
			return map[string]string{"error": "invalid_request", "error_description": "token=" + tok}
		},
		func(tok string) map[string]string { return map[string]string{"error": tok[:64]} },
	} {
		as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(echo(r.PostFormValue("subject_token")))
		}))
		t.Cleanup(as.Close)
		var logs testkit.SyncBuffer
		_, url := startGatewayWith(t, gateway.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
			[]upstreamSpec{{name: "svc", url: up.URL}}, func(c *config.Config) {
				c.Auth = config.Auth{Issuers: []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}}}
				c.Tenants = []config.Tenant{{ID: "acme"}}
				c.Upstreams[0].Prefix = ptr("svc")
				c.Upstreams[0].Auth = &config.UpstreamAuth{Mode: config.AuthTokenExchange, TokenURL: as.URL + "/token",
					ClientID: "gateway", ClientSecret: "gateway-secret", Resource: "https://svc.example"}
			})
		tok := idp.Token(t, "acme-app", url, "mcp")
		cs := testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}})
		_, _ = cs.ListTools(context.Background(), nil)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "svc__whoami"})
		told := ""
		if err != nil {
			told = err.Error()
		} else {
			b, _ := json.Marshal(res)
			told = string(b)
		}
		if !strings.Contains(logs.String(), "token exchange refused (HTTP 400)") {
			t.Fatalf("the failure was not logged:\n%s", logs.String())
		}
		for _, where := range []struct{ name, s string }{{"log", logs.String()}, {"client", told}} {
			for i := 0; i+8 <= len(tok); i++ {
				if strings.Contains(where.s, tok[i:i+8]) {
					t.Fatalf("the %s shows %q of the caller's token:\n%s", where.name, tok[i:i+8], where.s)
				}
			}
		}
	}
}
