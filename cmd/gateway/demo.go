package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/demo"
	"github.com/mcpgw/gateway/internal/gateway"
)

// demoTenant is the tenant of the token demo mode prints.
const demoTenant = "demo"

// runDemo runs the gateway with an embedded demo upstream and an embedded
// development token issuer, all on loopback: no config file, no external
// service.
func runDemo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "address of the MCP listener (port 0: any free port)")
	upstreamListen := fs.String("upstream-listen", "127.0.0.1:0", "address of the embedded demo upstream (port 0: any free port)")
	issuerListen := fs.String("issuer-listen", "127.0.0.1:0", "address of the embedded development token issuer (port 0: any free port)")
	adminListen := fs.String("admin-listen", "127.0.0.1:0", "address of the admin listener: the console, /metrics, /healthz, /readyz (port 0: any free port)")
	log, err := parseLogged(fs, args, stderr)
	if err != nil {
		return err
	}

	// The MCP listener first: its address is the resource the demo token
	// is issued for.
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	publicURL := "http://" + ln.Addr().String() + "/mcp"

	// The demo upstream: a real MCP server on its own loopback port.
	uln, err := net.Listen("tcp", *upstreamListen)
	if err != nil {
		return err
	}
	usrv := &http.Server{Handler: demo.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := usrv.Serve(uln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("demo upstream", "error", err)
		}
	}()
	defer usrv.Close()

	// The development issuer: it exists only here, and says so.
	dev, err := auth.NewDevIssuer()
	if err != nil {
		return err
	}
	dev.Logger = log
	iln, err := net.Listen("tcp", *issuerListen)
	if err != nil {
		return err
	}
	if err := dev.Start(iln); err != nil {
		return err
	}
	defer dev.Close()
	token, err := dev.Token("demo-user", demoTenant, publicURL, []string{"mcp"}, 12*time.Hour)
	if err != nil {
		return err
	}

	upstreamURL := "http://" + uln.Addr().String() + "/mcp"
	// The admin listener, on loopback: the console needs no sign-in there.
	aln, err := net.Listen("tcp", *adminListen)
	if err != nil {
		return err
	}
	defer aln.Close()
	adminURL := "http://" + aln.Addr().String()
	cfg := &config.Config{
		// No drain delay: no load balancer to wait for, and Ctrl-C
		// should stop the demo at once.
		Server: config.Server{Listen: ln.Addr().String(), AdminListen: aln.Addr().String(), PublicURL: publicURL, DrainDelay: new(config.Duration)},
		Auth: config.Auth{
			Issuers:        []config.Issuer{dev.Issuer("demo-dev")},
			RequiredScopes: []string{"mcp"},
		},
		Tenants:   []config.Tenant{{ID: demoTenant}},
		Upstreams: []config.Upstream{{Name: "demo", URL: upstreamURL}},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	return gateway.Run(ctx, cfg, gateway.Options{Logger: log, Version: version, Listener: ln, AdminListener: aln}, func(addr string) {
		fmt.Fprintf(stdout, `
MCP gateway demo
  endpoint:  %s
  upstream:  demo, embedded, at %s (-upstream-listen):
             tools demo__echo, demo__add, demo__countdown, demo__time,
             resource demo+demo://readme, prompt demo__review
  issuer:    %s (-issuer-listen), embedded, for development only
  admin:     %s/console (-admin-listen): the operator's console, and
             /metrics, /healthz, /readyz
  token:     a development token for tenant %q, valid 12h, from that issuer:

%s

Connect any MCP host to the endpoint with the Streamable HTTP transport and the
header "Authorization: Bearer <token>", or try:
  curl -si %s -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}'

Sessions are kept in memory. Stop with Ctrl-C.
`, publicURL, upstreamURL, dev.URL, adminURL, demoTenant, token, quote(publicURL), token)
	})
}
