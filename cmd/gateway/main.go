// Command gateway is a multi-tenant remote MCP gateway: one Streamable HTTP
// endpoint that aggregates upstream MCP servers.
//
//	gateway serve -config FILE     run the gateway
//	gateway validate -config FILE  check a config; list every problem
//	gateway explain -config FILE -tenant ID  what a tenant sees, and why
//	gateway pin -config FILE       write the pins file
//	gateway demo [-listen ADDR]    run with an embedded demo upstream
//	gateway bridge -- CMD ARGS...  serve a stdio MCP server over Streamable HTTP
//	gateway version                print the version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts the drain (see gateway.Run); a second one
	// gets the default action, which ends the process at once: an operator
	// pressing Ctrl-C twice does not wait out server.drain_delay.
	context.AfterFunc(ctx, stop)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code) // 0 after a usage asked for with -h
		}
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

// exitError ends the process with code after its message was printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

const usage = `usage: gateway <command> [flags]

commands:
  serve -config FILE     run the gateway with the given config
  validate -config FILE  check a config file; print every problem as FILE:LINE: message
  explain -config FILE -tenant ID
                         show what a tenant would see through each upstream, and why
  pin -config FILE [-out FILE]
                         write the pins file (pins.file): the tool and prompt definitions
                         every upstream lists now, for the gateway to check them against
  demo [-listen ADDR]    run with an embedded demo upstream and token issuer (no files, no
                         services); the endpoint listens on ADDR, 127.0.0.1:8080 by default
  bridge [-listen ADDR] [-allow-origin ORIGIN] -- COMMAND [ARG...]
                         run a stdio MCP server and serve it as a Streamable HTTP upstream at /mcp,
                         WITHOUT authentication, on 127.0.0.1:8080 by default
  tokens list|revoke -config FILE [-tenant ID] [-subject SUB] [-upstream NAME]
                         list (without values) or revoke the users' upstream tokens
                         (auth mode user_oauth) in a Redis store
  version                print the version

Run "gateway <command> -h" for a command's flags.
`

// run is the whole program, with the process's pieces passed in so tests can
// drive it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError{2}
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return serve(ctx, rest, getenv, stdout, stderr)
	case "validate":
		return validate(rest, getenv, stdout, stderr)
	case "demo":
		return runDemo(ctx, rest, getenv, stdout, stderr)
	case "explain":
		return explainCmd(ctx, rest, getenv, stdout, stderr)
	case "bridge":
		return bridge(ctx, rest, stderr)
	case "pin":
		return pinCmd(ctx, rest, getenv, stdout, stderr)
	case "tokens":
		return tokens(ctx, rest, getenv, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "gateway", version)
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "gateway: unknown command %q\n\n%s", cmd, usage)
		return exitError{2}
	}
}
