package credentials_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
)

// jwtLike is a caller's token shaped like a real one: a JWT of some 300
// characters.
const jwtLike = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIiwidHlwIjoiYXQrand0In0." +
	"eyJpc3MiOiJodHRwczovL2lkcC5leGFtcGxlIiwic3ViIjoiYWxpY2UiLCJ0ZW5hbnQiOiJhY21lIiwiYXVkIjoiaHR0cHM6Ly9tY3AuZXhhbXBsZSIsImV4cCI6MTgwMDAwMDAwMH0." +
	"c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmUtc2lnbmF0dXJlLXNpZ25hdHVyZQ"

// pieces reports the pieces of 8 bytes of secret that s holds.
func pieces(s, secret string) []string {
	var out []string
	for i := 0; i+8 <= len(secret); i++ {
		if strings.Contains(s, secret[i:i+8]) {
			out = append(out, secret[i:i+8])
		}
	}
	return out
}

// TestTokenExchangeRefusalEchoesNoToken: an authorization server that
// echoes the subject token, whole or cut, in its error or its description,
// gets neither into the error (which the gateway logs): the registered
// code stays, the description goes.
func TestTokenExchangeRefusalEchoesNoToken(t *testing.T) {
	for _, tc := range []struct {
		name       string
		code, desc func(sent string) string
		want       []string
	}{
		{"description holds the token", func(string) string { return "invalid_grant" },
			func(s string) string { return "subject_token " + s + " is expired" },
			[]string{"HTTP 400", "invalid_grant"}},
		{"description holds its first 130 characters", func(string) string { return "invalid_request" },
			func(s string) string { return "bad token: " + s[:130] },
			[]string{"HTTP 400", "invalid_request"}},
		{"description holds a short piece", func(string) string { return "invalid_grant" },
			func(s string) string { return "token " + s[60:72] + " refused" },
			[]string{"HTTP 400", "invalid_grant"}},
		{"the error code is the token", func(s string) string { return s },
			func(string) string { return "no" },
			[]string{"HTTP 400", "an unregistered error code"}},
		{"a description without a token stays", func(string) string { return "invalid_grant" },
			func(string) string { return "the subject may not be impersonated" },
			[]string{"invalid_grant: the subject may not be impersonated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				st := r.PostFormValue("subject_token")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]string{"error": tc.code(st), "error_description": tc.desc(st)})
			}))
			defer as.Close()
			var logs bytes.Buffer
			a := &config.UpstreamAuth{Mode: config.AuthTokenExchange, TokenURL: as.URL + "/token", ClientID: gwClient, ClientSecret: gwSecret}
			src := source(t, config1(upstream(a)), credentials.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			err := src.Apply(ctxOf(caller("https://idp", "alice", "t1", jwtLike)), http.Header{})
			var ce *credentials.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Apply: %v, want a *credentials.Error", err)
			}
			msg := err.Error()
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			// As the gateway logs it.
			slog.New(slog.NewTextHandler(&logs, nil)).Warn("upstream initialize failed", "error", err)
			if p := pieces(logs.String(), jwtLike); len(p) > 0 {
				t.Errorf("the log shows pieces %q of the token:\n%s", p, logs.String())
			}
			if strings.Contains(logs.String(), "description") || strings.Contains(msg, "is expired") && tc.name != "a description without a token stays" {
				t.Errorf("the description was kept: %s", msg)
			}
		})
	}
}
