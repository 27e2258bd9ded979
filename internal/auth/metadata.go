package auth

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/mcpgw/gateway/internal/config"
)

// wellKnownPath is the well-known URI suffix of RFC 9728 §3.
const wellKnownPath = "/.well-known/oauth-protected-resource"

// metadataMaxAge is how long clients may cache the metadata: short, since
// a config reload can change the issuers.
const metadataMaxAge = "public, max-age=300"

// MetadataURL returns the URL of the protected resource metadata for the
// resource publicURL, built as RFC 9728 §3.1 says: the well-known suffix is
// inserted between host and path, so https://mcp.example.com/mcp gives
// https://mcp.example.com/.well-known/oauth-protected-resource/mcp. It is the
// URL the challenges of [Middleware] name. It returns "" if publicURL is not
// an absolute URL.
func MetadataURL(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	m := url.URL{Scheme: u.Scheme, Host: u.Host}
	return m.String() + MetadataPaths(publicURL)[0]
}

// MetadataPaths returns the paths at which the gateway serves its protected
// resource metadata, the one [MetadataURL] names first: the path-inserted
// well-known URI (/.well-known/oauth-protected-resource/mcp for a resource
// at /mcp) and the root one (/.well-known/oauth-protected-resource), which
// MCP clients try in that order when they have no resource_metadata URL
// (MCP 2025-11-25 basic/authorization, "Protected Resource Metadata
// Discovery Requirements"). For a resource at the root they are one path.
//
// Both serve the same document, whose resource is publicURL. Strictly, RFC
// 9728 §3.3 ties the root document to the resource at the root; serving
// the MCP endpoint's document there too is what MCP clients that probe the
// root expect, and only they ask for it.
func MetadataPaths(publicURL string) []string {
	var p string
	if u, err := url.Parse(publicURL); err == nil {
		p = strings.TrimSuffix(u.EscapedPath(), "/")
	}
	if p == "" {
		return []string{wellKnownPath}
	}
	if p[0] != '/' {
		p = "/" + p
	}
	return []string{wellKnownPath + p, wellKnownPath}
}

// resourceMetadata is the RFC 9728 §2 document the gateway serves.
type resourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
}

// MetadataHandler serves the protected resource metadata (RFC 9728) of the
// gateway: its resource (server.public_url), the issuers as authorization
// servers, scopesSupported (omitted if empty; MCP 2026-07-28 asks servers
// not to list offline_access), and "header" as the only bearer method. Mount
// it at every path of [MetadataPaths].
//
// The document is public, so any origin may read it (browser-based MCP
// clients fetch it cross-origin), and clients may cache it for 5 minutes.
func MetadataHandler(cfg *config.Config, scopesSupported []string) http.Handler {
	md := resourceMetadata{
		Resource:               cfg.Server.PublicURL,
		AuthorizationServers:   []string{},
		ScopesSupported:        slices.Clone(scopesSupported),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "MCP gateway",
	}
	for _, is := range cfg.Auth.Issuers {
		if !slices.Contains(md.AuthorizationServers, is.IssuerURL) {
			md.AuthorizationServers = append(md.AuthorizationServers, is.IssuerURL)
		}
	}
	body, err := json.Marshal(md)
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	body = append(body, '\n')
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodOptions:
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "*")
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", metadataMaxAge)
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}
