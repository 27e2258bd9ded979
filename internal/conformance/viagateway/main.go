// Command viagateway runs an MCP client through the gateway, for the
// conformance suite's client scenarios. The suite runs a client command
// with its test server's URL as the last argument; viagateway is that
// command: it starts the gateway in this process, with the test server as
// its only upstream (prefix "", so names and URIs are the server's, and
// anonymous clients), then runs the client named by its arguments with the
// gateway's MCP URL in place of the test server's, its environment passed
// through (MCP_CONFORMANCE_SCENARIO and the rest). It exits as the client
// does, and stops the gateway.
//
//	viagateway CLIENT [ARG...] SERVER-URL
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: viagateway CLIENT [ARG...] SERVER-URL")
		os.Exit(2)
	}
	os.Exit(run(os.Args[1:len(os.Args)-1], os.Args[len(os.Args)-1]))
}

func run(client []string, serverURL string) int {
	cfg := &config.Config{
		Server:    config.Server{Listen: "127.0.0.1:0"},
		Auth:      config.Auth{Anonymous: true},
		Upstreams: []config.Upstream{{Name: "test", URL: serverURL, Prefix: new(string)}},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "viagateway:", err)
		return 2
	}
	ctx, stop := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() {
		done <- gateway.Run(ctx, cfg, gateway.Options{Logger: log, Audit: nil, Getenv: func(string) string { return "" }}, func(a string) { addr <- a })
	}()
	var url string
	select {
	case a := <-addr:
		url = "http://" + a + "/mcp"
	case err := <-done:
		fmt.Fprintln(os.Stderr, "viagateway: the gateway did not start:", err)
		stop()
		return 2
	case <-time.After(10 * time.Second):
		fmt.Fprintln(os.Stderr, "viagateway: the gateway did not start in 10s")
		stop()
		return 2
	}
	cmd := exec.Command(client[0], append(client[1:], url)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err := cmd.Run()
	stop()
	if gerr := <-done; gerr != nil && !errors.Is(gerr, context.Canceled) {
		fmt.Fprintln(os.Stderr, "viagateway: the gateway:", gerr)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode()
	case err != nil:
		fmt.Fprintln(os.Stderr, "viagateway:", err)
		return 2
	}
	return 0
}

