package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/router"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/tenant"
)

// logFlags are the logging flags every long-running command takes.
type logFlags struct {
	format, level string
}

func (lf *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&lf.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&lf.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (lf *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(lf.level)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch lf.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format: want text or json, got %q", lf.format)
}

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "configs/gateway.yaml", "path of the YAML config file")
	var lf logFlags
	lf.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitError{2}
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	cfg, err := config.Load(*path, getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	return runGateway(ctx, cfg, log, nil)
}

// runGateway serves cfg until ctx is done. ready, if not nil, is called with
// the MCP listener's address once it accepts connections.
func runGateway(ctx context.Context, cfg *config.Config, log *slog.Logger, ready func(addr string)) error {
	// Sessions that expire in the store end their upstream sessions too.
	// The hook runs in the store's sweeper, so the work goes elsewhere.
	var expire atomic.Pointer[router.Handler]
	store := session.NewMemory(session.MemoryOptions{
		IdleTTL:     cfg.Sessions.IdleTTL.D(),
		MaxSessions: cfg.Sessions.MaxSessions,
		OnExpire: func(rec *session.Record) {
			if h := expire.Load(); h != nil {
				go h.Expire(rec)
			}
		},
	})
	defer store.Close()
	mcp, err := router.New(router.Options{Config: cfg, Store: store, Logger: log, Version: version})
	if err != nil {
		return err
	}
	expire.Store(mcp)

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           newMux(mcp, log),
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout.D(),
		// No WriteTimeout: responses stream. Each request is bounded by
		// server.request_timeout inside the handler instead.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	servers := []*http.Server{srv}
	listeners := []net.Listener{ln}
	if cfg.Server.AdminListen != "" {
		aln, err := net.Listen("tcp", cfg.Server.AdminListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("admin listener: %w", err)
		}
		servers = append(servers, &http.Server{Handler: adminMux(), ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, aln)
		log.Info("admin listening on http://" + aln.Addr().String())
	}

	errc := make(chan error, len(servers))
	for i, s := range servers {
		go func() { errc <- s.Serve(listeners[i]) }()
	}
	addr := ln.Addr().String()
	log.Info("listening on http://"+addr+"/mcp", "upstreams", len(cfg.Upstreams), "session_store", cfg.Sessions.Store)
	if ready != nil {
		ready(addr)
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutCtx)
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// newMux wires the MCP endpoint: recover, request id, auth, then the router.
// The auth middleware is the seam where token validation plugs in; until
// then every caller is the anonymous principal of the default tenant.
func newMux(mcp http.Handler, log *slog.Logger) http.Handler {
	r := chi.NewRouter()
	r.Use(recoverer(log))
	r.Use(middleware.RequestID)
	r.With(auth.Anonymous(tenant.DefaultID)).Handle("/mcp", mcp)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 page not found: the MCP endpoint is /mcp", http.StatusNotFound)
	})
	return r
}

// recoverer turns a panic in a handler into a JSON-RPC internal error (when
// nothing was written yet) and a log line, never a crash. It lets
// http.ErrAbortHandler through: that is how a handler aborts a stream.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("panic serving request", "panic", fmt.Sprint(v), "path", r.URL.Path)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write(jsonrpc.AppendError(nil, jsonrpc.ID{}, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error"}))
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// adminMux serves the operator endpoints. Metrics and a readiness check
// that looks at dependencies come with the observability work.
func adminMux() http.Handler {
	r := chi.NewRouter()
	ok := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	}
	r.Get("/healthz", ok)
	r.Get("/readyz", ok)
	return r
}

func validate(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path of the YAML config file (required)")
	if err := fs.Parse(args); err != nil {
		return exitError{2}
	}
	if *path == "" {
		fmt.Fprintln(stderr, "gateway validate: -config is required")
		return exitError{2}
	}
	if _, err := config.Load(*path, getenv); err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			for _, p := range ps {
				fmt.Fprintln(stdout, p.Error())
			}
		} else {
			fmt.Fprintf(stdout, "%s: %v\n", *path, err)
		}
		return exitError{1}
	}
	fmt.Fprintf(stdout, "%s: ok\n", *path)
	return nil
}

// quote shell-quotes s for the instructions demo mode prints.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
