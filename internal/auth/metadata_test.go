package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/gateway/internal/config"
)

func TestMetadataURLAndPaths(t *testing.T) {
	cases := []struct {
		public string
		url    string
		paths  []string
	}{
		{"https://mcp.example.com/mcp", "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
			[]string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"}},
		{"https://mcp.example.com", "https://mcp.example.com/.well-known/oauth-protected-resource",
			[]string{"/.well-known/oauth-protected-resource"}},
		{"https://mcp.example.com/", "https://mcp.example.com/.well-known/oauth-protected-resource",
			[]string{"/.well-known/oauth-protected-resource"}},
		{"https://mcp.example.com:8443/public/mcp/", "https://mcp.example.com:8443/.well-known/oauth-protected-resource/public/mcp",
			[]string{"/.well-known/oauth-protected-resource/public/mcp", "/.well-known/oauth-protected-resource"}},
		{"http://127.0.0.1:8080/mcp?x=1", "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
			[]string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"}},
		{"mcp.example.com", "", []string{"/.well-known/oauth-protected-resource/mcp.example.com", "/.well-known/oauth-protected-resource"}},
	}
	for _, tc := range cases {
		t.Run(tc.public, func(t *testing.T) {
			if got := MetadataURL(tc.public); got != tc.url {
				t.Errorf("MetadataURL = %q, want %q", got, tc.url)
			}
			if diff := cmp.Diff(tc.paths, MetadataPaths(tc.public)); diff != "" {
				t.Errorf("MetadataPaths mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetadataHandler(t *testing.T) {
	cfg := &config.Config{
		Server: config.Server{PublicURL: testPublicURL},
		Auth: config.Auth{Issuers: []config.Issuer{
			{Name: "a", IssuerURL: "https://a.example.com"},
			{Name: "b", IssuerURL: "https://b.example.com/realms/x"},
			{Name: "a2", IssuerURL: "https://a.example.com"},
		}},
	}
	h := MetadataHandler(cfg, []string{"mcp:tools", "mcp:admin"})

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/.well-known/oauth-protected-resource/mcp", nil))
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	for k, v := range map[string]string{
		"Content-Type":                "application/json",
		"Cache-Control":               "public, max-age=300",
		"Access-Control-Allow-Origin": "*",
	} {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"resource":                 testPublicURL,
		"authorization_servers":    []any{"https://a.example.com", "https://b.example.com/realms/x"},
		"scopes_supported":         []any{"mcp:tools", "mcp:admin"},
		"bearer_methods_supported": []any{"header"},
		"resource_name":            "MCP gateway",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metadata mismatch (-want +got):\n%s", diff)
	}

	w = httptest.NewRecorder()
	MetadataHandler(cfg, nil).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	got = nil
	_ = json.Unmarshal(w.Body.Bytes(), &got)
	if _, ok := got["scopes_supported"]; ok {
		t.Error("scopes_supported present with no scopes")
	}

	for method, status := range map[string]int{http.MethodPost: 405, http.MethodOptions: 204, http.MethodHead: 200} {
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, "/", nil))
		if w.Code != status {
			t.Errorf("%s: status %d, want %d", method, w.Code, status)
		}
	}
}
