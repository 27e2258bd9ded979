// Command upstream is the fast, minimal upstream MCP server of the
// benchmarks (see bench/README.md): the go-sdk server of package
// bench/echoserver, with an echo tool and -tools more, over Streamable HTTP.
//
//	go run ./bench/upstream -addr 127.0.0.1:0 [-tools N] [-json] [-count]
//
// It prints "listening on http://ADDR/mcp" once it accepts connections, so
// that a script can start it on a free port (the default 127.0.0.1:0) and
// read the port back.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcpgw/gateway/bench/echoserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "upstream:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0 picks a free port)")
	tools := fs.Int("tools", 0, "number of extra tools besides echo, for tools/list tests")
	jsonResp := fs.Bool("json", false, "answer with application/json instead of SSE streams")
	count := fs.Bool("count", false, "count requests by JSON-RPC method, served at "+echoserver.StatsPath)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *tools < 0 {
		return errors.New("-tools must not be negative")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           echoserver.NewHandler(echoserver.Options{ExtraTools: *tools, JSONResponse: *jsonResp, Count: *count}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	fmt.Fprintf(stdout, "listening on http://%s%s (tools: %d, json: %t)\n", ln.Addr(), echoserver.Path, *tools+1, *jsonResp)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx) // open SSE streams may outlive the grace period
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
