package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/mcpgw/gateway/internal/pipe"
)

// bridgeShutdown bounds the wait for requests in flight when the bridge
// stops.
const bridgeShutdown = 10 * time.Second

// bridge runs one stdio MCP server and serves it as a Streamable HTTP
// endpoint at /mcp, with the code the gateway runs its stdio upstreams with
// (package pipe): one process shared by every session, started on first
// use and again, with backoff, after it exits. It has no authentication:
// it is meant to run where only the gateway reaches it.
func bridge(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("bridge", stderr)
	listen := fs.String("listen", ":8080", "address of the MCP listener (served at /mcp)")
	idle := fs.Duration("idle-timeout", 0, "stop the server after this long without a request (0: never)")
	grace := fs.Duration("stop-grace", 5*time.Second, "time the server has after SIGTERM before SIGKILL")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: gateway bridge [flags] -- COMMAND [ARG...]")
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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening on http://"+ln.Addr().String()+"/mcp", "command", argv[0])
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
