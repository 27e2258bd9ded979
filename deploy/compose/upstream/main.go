// Command upstream is the demo upstream MCP server of the docker-compose
// stack (deploy/compose): the gateway's embedded demo server (echo, add,
// countdown, time, a resource, a template and a prompt; see internal/demo)
// plus a whoami tool that names the instance, so that two instances behind
// one gateway can be told apart.
//
//	upstream -addr :9001 -name alpha
//
// If UPSTREAM_TOKEN is set, every request must carry
// "Authorization: Bearer $UPSTREAM_TOKEN": the gateway holds that credential
// (upstreams[].headers), MCP clients never see it. GET /healthz answers
// "ok" without a token.
//
// It is a demo, not a template for production servers.
package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/demo"
)

func main() {
	addr := flag.String("addr", ":9001", "listen address")
	name := flag.String("name", "upstream", "instance name that the whoami tool reports")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *name, os.Getenv("UPSTREAM_TOKEN"), log); err != nil {
		log.Error("upstream", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, name, token string, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", requireToken(token, handler(name)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("upstream listening", "addr", addr, "name", name, "token_required", token != "")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// handler serves one MCP server (the demo's tools plus whoami) over
// Streamable HTTP.
func handler(name string) http.Handler {
	s := demo.NewServer()
	host, _ := os.Hostname()
	mcp.AddTool(s, &mcp.Tool{
		Name:        "whoami",
		Description: "Returns the name and host of this upstream instance.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, whoamiResult, error) {
		r := whoamiResult{Name: name, Host: host}
		text := fmt.Sprintf("upstream %q on host %q", r.Name, r.Host)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, r, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		// The gateway ends its upstream sessions when its own expire; this
		// only bounds sessions whose gateway went away.
		SessionTimeout: 2 * time.Hour,
	})
}

type whoamiResult struct {
	Name string `json:"name"`
	Host string `json:"host"`
}

// requireToken wraps next so that it answers 401 unless the request carries
// the bearer token. An empty token turns the check off.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="demo-upstream"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
