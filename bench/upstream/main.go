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
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/mcpgw/gateway/bench/echoserver"
	"github.com/mcpgw/gateway/internal/cli"
)

func main() { cli.Main("upstream", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("upstream", stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0 picks a free port)")
	tools := fs.Int("tools", 0, "number of extra tools besides echo, for tools/list tests")
	jsonResp := fs.Bool("json", false, "answer with application/json instead of SSE streams")
	count := fs.Bool("count", false, "count requests by JSON-RPC method, served at "+echoserver.StatsPath)
	if err := cli.Parse(fs, args); err != nil {
		return err
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
	return cli.Serve(ctx, srv, ln)
}
