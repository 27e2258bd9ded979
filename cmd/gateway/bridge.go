package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/pipe"
)

const (
	// bridgeShutdown bounds the wait for requests in flight when the
	// bridge stops.
	bridgeShutdown = 10 * time.Second
	// bridgeListen is the bridge's default address: loopback only, for it
	// has no authentication (2025-11-25 basic/transports, "Security
	// Warning": servers running locally should bind to localhost).
	bridgeListen = "127.0.0.1:8080"
)

// bridge runs one stdio MCP server and serves it as a Streamable HTTP
// endpoint at /mcp, with the code the gateway runs its stdio upstreams with
// (package pipe): one process shared by every session, started on first
// use and again, with backoff, after it exits. It has no authentication:
// it is meant to run where only the gateway reaches it. It listens on
// loopback unless told otherwise, and refuses a request whose Origin is
// present and not allowed (see checkOrigin).
func bridge(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("bridge", stderr)
	listen := fs.String("listen", bridgeListen, "address of the MCP listener (served at /mcp); it has no authentication")
	idle := fs.Duration("idle-timeout", 0, "stop the server after this long without a request (0: never)")
	grace := fs.Duration("stop-grace", 5*time.Second, "time the server has after SIGTERM before SIGKILL")
	origins := make(map[string]bool)
	fs.Func("allow-origin", "an `origin` (scheme://host[:port]) whose browser requests are served; repeatable. A request with any other Origin gets 403", func(s string) error {
		if !isOrigin(s) {
			return fmt.Errorf("%q is not an origin: want scheme://host[:port]", s)
		}
		origins[strings.ToLower(s)] = true
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: gateway bridge [flags] -- COMMAND [ARG...]")
		fmt.Fprintln(stderr, "\nThe bridge has no authentication: whoever reaches its address runs the server's tools.")
		fmt.Fprintln(stderr, "It listens on "+bridgeListen+" unless -listen says otherwise; expose it only where only the gateway reaches it.")
		fs.PrintDefaults()
	}
	log, err := parseLogged(fs, args, stderr)
	if err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fs.Usage()
		return exitError{2}
	}
	h := pipe.NewHandler(pipe.Options{
		Name:        "bridge",
		Isolation:   pipe.Shared,
		IdleTimeout: *idle,
		Logger:      log,
		Dial: func(context.Context, *http.Request, string) (pipe.Conn, error) {
			// The bridge's own environment is the server's: the bridge
			// runs for it alone.
			p, err := pipe.Start(pipe.Command{Argv: argv, Env: os.Environ(), StopGrace: *grace, Logger: log})
			if err == nil {
				log.Info("stdio server started", "pid", p.PID())
			}
			return p, err
		},
	})
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: checkOrigin(mux, origins), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening on http://"+ln.Addr().String()+"/mcp", "command", argv[0])
	if !loopback(ln.Addr()) {
		log.Warn("the bridge listens beyond loopback and has no authentication: let only the gateway reach it (a NetworkPolicy, a firewall)", "listen", ln.Addr().String())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), bridgeShutdown)
	defer cancel()
	// Streams stay open until the server stops: stop it first.
	h.Close()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// checkOrigin refuses a request whose Origin header is present and not
// one of origins (lower case) with 403 and a JSON-RPC error without id:
// a web page the user visits could otherwise reach the bridge through
// DNS rebinding (2025-11-25 basic/transports, "Security Warning": servers
// MUST validate the Origin header). Requests without Origin (the
// gateway's, any non-browser client's) pass.
func checkOrigin(next http.Handler, origins map[string]bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !origins[strings.ToLower(o)] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write(jsonrpc.AppendError(nil, jsonrpc.ID{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "Forbidden: origin not allowed"}))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isOrigin reports whether s is scheme://host[:port] and nothing more.
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Hostname() != "" && u.Opaque == "" && u.User == nil &&
		u.Path == "" && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" && !strings.HasSuffix(s, "#")
}

// loopback reports whether a is a loopback address.
func loopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}
