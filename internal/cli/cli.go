// Package cli holds what the repository's small commands share: mcpload
// (cmd/mcpload) and the benchmark tools under bench/. It is not for the
// gateway's own command, whose subcommands exit and log differently.
package cli

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
	"strings"
	"syscall"
	"time"
)

// Main runs a command's run with the process's arguments, standard output
// and standard error, in a context that SIGINT and SIGTERM cancel. If run
// fails, Main prints "name: error" to standard error (not for
// flag.ErrHelp: the flag set has printed the usage) and exits with
// status 1.
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, name+":", err)
		}
		os.Exit(1)
	}
}

// NewFlagSet returns the flag set of the command name: it prints problems
// and -h to stderr and returns them from Parse.
func NewFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// Parse parses args with fs, for a command that takes flags only: an
// argument left after the flags is an error.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return nil
}

// Serve serves srv on ln until ctx is done, then shuts srv down, giving
// open requests 2 seconds to finish (open SSE streams may outlive that:
// they are cut). It returns srv.Serve's error if serving fails first, else
// nil.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
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

// KeyValues is a repeatable flag of key=value pairs, each set into the
// map (a later value for a key replaces an earlier one). Pass a non-nil
// map to flag.FlagSet.Var.
type KeyValues map[string]string

func (f KeyValues) String() string { return "" }

// Set adds one key=value pair; the key must not be empty.
func (f KeyValues) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	f[k] = v
	return nil
}

// Micros formats a latency in microseconds as the commands print it, with
// a unit that keeps 3 significant digits or so: "850µs", "12.50ms",
// "1.25s".
func Micros(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2fs", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.2fms", us/1e3)
	default:
		return fmt.Sprintf("%.0fµs", us)
	}
}
