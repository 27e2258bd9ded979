// Command issuer is the token issuer of the benchmarks (see
// bench/README.md): [auth.DevIssuer], the throwaway issuer of `gateway
// demo`, on a loopback port, with one long-lived token written to a file.
// bench/compare.sh runs its gateways with this issuer trusted, and mcpload
// sends the token, so that every request is authenticated the way a real
// client's is, with the token verified once and then taken from the
// verifier's cache.
//
//	go run ./bench/issuer -token-file /tmp/token
//
// It prints "listening on http://ADDR" once it serves its key set, after
// writing the token (mode 0600). Like `gateway demo`'s, this issuer mints
// any token for any tenant: trust it only in a gateway of your own on
// loopback, never in one that serves anyone else.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/cli"
)

func main() { cli.Main("issuer", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("issuer", stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address, on loopback (port 0 picks a free port)")
	tokenFile := fs.String("token-file", "", "where to write the token (required; created with mode 0600)")
	subject := fs.String("subject", "bench", "the token's sub")
	tenant := fs.String("tenant", "default", "the token's tenant claim")
	audience := fs.String("audience", "mcpbench", "the token's aud: one of the gateway's audiences for this issuer")
	scopes := fs.String("scopes", "mcp", "the token's scopes, space-separated")
	ttl := fs.Duration("ttl", 12*time.Hour, "the token's lifetime")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *tokenFile == "" {
		return errors.New("-token-file is required")
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-addr must be a loopback address: this issuer mints any token, got %q", *addr)
	}
	dev, err := auth.NewDevIssuer()
	if err != nil {
		return err
	}
	dev.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if err := dev.Start(ln); err != nil {
		ln.Close()
		return err
	}
	defer dev.Close()
	token, err := dev.Token(*subject, *tenant, *audience, strings.Fields(*scopes), *ttl)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*tokenFile, []byte(token), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on %s\n", dev.URL)
	<-ctx.Done()
	return nil
}
