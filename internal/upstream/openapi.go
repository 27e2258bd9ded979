package upstream

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/openapi"
)

// OpenAPI upstreams
//
// A REST API described by an OpenAPI document is served, like a stdio
// upstream, as an MCP endpoint in the gateway's own process: a
// 2026-07-28 server without sessions whose tools are the API's operations
// (see package openapi). The Client speaks Streamable HTTP to it; each
// tools/call becomes one request to the API, on the HTTP client the
// Client would have used for an HTTP upstream (the upstream's tls
// settings, no redirect followed), carrying the headers the Client set:
// the config's and the credentials'.

// errUnusableDocument fails the requests of an openapi upstream whose
// document does not compile.
var errUnusableDocument = errors.New("invalid openapi document")

// serveOpenAPI makes c's requests go to cfg's API. The config's
// validation compiled its document already: it fails to compile here
// only if cfg did not come from a validated config, and then every
// request fails.
func (c *Client) serveOpenAPI(cfg config.Upstream) {
	api, err := openapi.Compile(cfg.OpenAPI.Source(), cfg.OpenAPI.Options(cfg.Name))
	if err != nil {
		c.log.Error("openapi document: every request will fail", "error", err)
		c.setupErr = errUnusableDocument
		return
	}
	c.api = api
	rest := c.hc
	c.hc = &http.Client{Transport: api.Transport(rest, int64(c.maxMsg))}
	c.url = pipeURL
}

// restRedactions are the replacements that keep the API's address out of
// error messages.
func (c *Client) restRedactions() []string {
	if c.api == nil {
		return nil
	}
	u, err := url.Parse(c.api.BaseURL())
	if err != nil || u.Host == "" {
		return nil
	}
	out := []string{c.api.BaseURL(), "<upstream>", u.Redacted(), "<upstream>", u.Host, "<upstream>"}
	if h := u.Hostname(); h != u.Host {
		out = append(out, h, "<upstream>")
	}
	return out
}
