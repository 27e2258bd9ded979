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
// When the scenario's context (MCP_CONFORMANCE_CONTEXT) holds a client id
// and secret (the client credentials scenarios), they are the gateway's
// own at the test server's authorization server: the upstream's auth is
// client_credentials, with the issuer an admin would read off the server's
// protected resource metadata (RFC 9728), as viagateway does here. The
// OAuth client under test is then the gateway; the client behind it, which
// has nothing to do with the upstream's credentials, runs the initialize
// scenario.
//
//	viagateway CLIENT [ARG...] SERVER-URL
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
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
	if auth, err := clientCredentials(serverURL); err != nil {
		fmt.Fprintln(os.Stderr, "viagateway:", err)
		return 2
	} else if auth != nil {
		cfg.Upstreams[0].Auth = auth
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
	if cfg.Upstreams[0].Auth != nil {
		cmd.Env = append(os.Environ(), "MCP_CONFORMANCE_SCENARIO=initialize")
	}
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

// clientCredentials returns the upstream auth of a scenario whose context
// gives the client's id and secret, nil for any other.
func clientCredentials(serverURL string) (*config.UpstreamAuth, error) {
	var c struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw == "" || json.Unmarshal([]byte(raw), &c) != nil || c.ClientID == "" || c.ClientSecret == "" {
		return nil, nil
	}
	issuer, err := authorizationServer(serverURL)
	if err != nil {
		return nil, err
	}
	return &config.UpstreamAuth{Mode: config.AuthClientCredentials, Issuer: issuer, ClientID: c.ClientID, ClientSecret: c.ClientSecret}, nil
}

// authorizationServer reads the first authorization server that the
// protected resource metadata of the MCP server at serverURL names: the
// metadata's URL is in the resource_metadata of the server's 401.
func authorizationServer(serverURL string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Post(serverURL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	_, rest, ok := strings.Cut(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`)
	if !ok {
		return "", fmt.Errorf("%s: no resource_metadata in its answer (HTTP %d)", serverURL, resp.StatusCode)
	}
	prm, _, _ := strings.Cut(rest, `"`)
	resp, err = client.Get(prm)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var md struct {
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil || len(md.AuthorizationServers) == 0 {
		return "", fmt.Errorf("%s: no authorization server (%v)", prm, err)
	}
	return md.AuthorizationServers[0], nil
}
