// Command mcpload is a load generator for MCP servers over Streamable HTTP:
// the direct upstream, a reverse proxy in front of it, or the gateway.
//
//	mcpload -url http://127.0.0.1:8080/mcp -c 32 -d 10s -tool up__echo -payload 100
//
// Each of the -c virtual clients opens its own MCP session (initialize,
// then notifications/initialized) and then sends one request at a time,
// for -warmup (not measured) and then -d: tools/call of -tool with a text
// argument of -payload bytes (-mode call), tools/list (-mode list), or
// both (-mode mix, -list-ratio of them lists). At the end each client
// deletes its session. All clients share one keep-alive transport with an
// idle connection per client.
//
// It speaks raw HTTP and JSON rather than using an SDK, so that its own
// cost per request is small and the same for every target. It checks every
// response: status 200, an application/json body or a text/event-stream
// holding the JSON-RPC response with the request's id, a result and no
// error, and for an echo tool (-check-echo; by default for a tool named
// "echo" or "*__echo") the very text it sent. Failures are counted by kind.
//
// It prints requests per second (of the requests that passed), p50, p90,
// p99 and max latency (sending to the end of the response body, from a
// log-linear histogram accurate to 0.4%) and the errors, as text or, with
// -json, as one JSON line. It exits with status 1 if any request failed.
//
// # Loopback only
//
// By default mcpload connects only to loopback addresses (127.0.0.0/8,
// ::1): the URL's host must be one or "localhost", and the dialer refuses
// any other address a name resolves to. These are shared machines and
// networks: a load test aimed by mistake at someone else's server is an
// outage for them. -allow-remote lifts the check for a target you own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcpgw/gateway/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, errFailures):
		os.Exit(1)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "mcpload:", err)
		os.Exit(2)
	}
}

// errFailures is returned by run after the report when requests failed.
var errFailures = errors.New("some requests failed")

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, opts, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	tr := newTransport(cfg.Clients, cfg.AllowRemote)
	defer tr.CloseIdleConnections()
	rep, err := runLoad(ctx, cfg, newHTTPClient(tr, cfg.Timeout))
	if err != nil {
		return err
	}
	rep.Tags = opts.tags
	if opts.json {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeText(stdout)
	}
	if err != nil {
		return err
	}
	if rep.Errors > 0 {
		return errFailures
	}
	return nil
}

// outputOptions are the flags that shape the output rather than the load.
type outputOptions struct {
	json bool
	tags map[string]string
}

// headerFlag collects repeated -H "Name: value" flags.
type headerFlag struct{ h http.Header }

func (f *headerFlag) String() string { return "" }

func (f *headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("want \"Name: value\", got %q", s)
	}
	f.h.Add(name, strings.TrimSpace(value))
	return nil
}

// parseFlags turns the command line into a validated config.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*config, *outputOptions, error) {
	fs := cli.NewFlagSet("mcpload", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mcpload -url http://127.0.0.1:PORT/mcp [flags]\n\nflags:")
		fs.PrintDefaults()
	}
	cfg := &config{Header: make(http.Header)}
	opts := &outputOptions{tags: make(map[string]string)}
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080/mcp", "the MCP endpoint")
	fs.IntVar(&cfg.Clients, "c", 1, "concurrent virtual clients, each with its own session")
	fs.DurationVar(&cfg.Duration, "d", 10*time.Second, "measured duration, after the warm-up")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "warm-up before measuring (requests sent, checked, not measured)")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "bound on one request, response body included")
	fs.StringVar(&cfg.Mode, "mode", modeCall, "call (tools/call), list (tools/list) or mix")
	fs.Float64Var(&cfg.ListRatio, "list-ratio", 0.1, "share of tools/list requests with -mode mix")
	fs.StringVar(&cfg.Tool, "tool", "echo", `tool to call, such as "up__echo" through the gateway`)
	fs.StringVar(&cfg.BodyArg, "body-arg", "", `nest the text argument in an object argument of this name ("body" for a tool made of an OpenAPI operation's JSON body)`)
	fs.IntVar(&cfg.Payload, "payload", 100, "bytes of the text argument of the tool call")
	fs.StringVar(&cfg.Fill, "fill", fillX, `what fills the text: "x" (one letter repeated) or "prose" (an issue tracker's text, with numbers, URLs and dates)`)
	fs.StringVar(&cfg.Protocol, "protocol", "2025-11-25", "protocol version asked for in initialize")
	checkEcho := fs.String("check-echo", "auto", `check that the tool returns the text sent: true, false, or auto (true for a tool named "echo" or "*__echo")`)
	fs.IntVar(&cfg.ExpectTools, "expect-tools", 0, "if positive, the number of tools tools/list must return")
	hf := &headerFlag{h: cfg.Header}
	fs.Var(hf, "H", `extra header "Name: value" on every request (repeatable)`)
	token := fs.String("token", "", "bearer token, sent as Authorization: Bearer TOKEN (default $MCPLOAD_TOKEN, which keeps it out of ps)")
	fs.BoolVar(&cfg.AllowRemote, "allow-remote", false, "allow a non-loopback target (these are shared machines: load only what you own)")
	fs.BoolVar(&opts.json, "json", false, "print the result as one JSON line instead of text")
	fs.Var(cli.KeyValues(opts.tags), "tag", "key=value copied into the JSON result's tags (repeatable)")
	if err := cli.Parse(fs, args); err != nil {
		return nil, nil, err
	}

	var problems []error
	if *token == "" {
		*token = getenv("MCPLOAD_TOKEN")
	}
	if *token != "" {
		if cfg.Header.Get("Authorization") != "" {
			problems = append(problems, errors.New("both -token and an Authorization header given"))
		}
		cfg.Header.Set("Authorization", "Bearer "+*token)
	}
	if cfg.Clients < 1 || cfg.Clients > 100000 {
		problems = append(problems, fmt.Errorf("-c must be between 1 and 100000, got %d", cfg.Clients))
	}
	if cfg.Duration <= 0 {
		problems = append(problems, fmt.Errorf("-d must be positive, got %v", cfg.Duration))
	}
	if cfg.Warmup < 0 {
		problems = append(problems, fmt.Errorf("-warmup must not be negative, got %v", cfg.Warmup))
	}
	if cfg.Timeout <= 0 {
		problems = append(problems, fmt.Errorf("-timeout must be positive, got %v", cfg.Timeout))
	}
	switch cfg.Mode {
	case modeCall, modeList, modeMix:
	default:
		problems = append(problems, fmt.Errorf("-mode must be call, list or mix, got %q", cfg.Mode))
	}
	if cfg.ListRatio < 0 || cfg.ListRatio > 1 {
		problems = append(problems, fmt.Errorf("-list-ratio must be between 0 and 1, got %v", cfg.ListRatio))
	}
	if cfg.Tool == "" {
		problems = append(problems, errors.New("-tool must not be empty"))
	}
	if cfg.Fill != fillX && cfg.Fill != fillProse {
		problems = append(problems, fmt.Errorf("-fill must be x or prose, got %q", cfg.Fill))
	}
	if cfg.Payload < 0 || cfg.Payload > 64<<20 {
		problems = append(problems, fmt.Errorf("-payload must be between 0 and 64 MiB, got %d", cfg.Payload))
	}
	switch *checkEcho {
	case "auto":
		cfg.CheckEcho = cfg.Tool == "echo" || strings.HasSuffix(cfg.Tool, "__echo")
	case "true":
		cfg.CheckEcho = true
	case "false":
	default:
		problems = append(problems, fmt.Errorf("-check-echo must be auto, true or false, got %q", *checkEcho))
	}
	if err := checkTarget(cfg.URL, cfg.AllowRemote); err != nil {
		problems = append(problems, err)
	}
	if err := errors.Join(problems...); err != nil {
		return nil, nil, err
	}
	return cfg, opts, nil
}

// checkTarget checks that rawURL is an http(s) URL and, unless allowRemote,
// that its host is a loopback address or "localhost". (The dialer checks
// the addresses a name resolves to as well.)
func checkTarget(rawURL string, allowRemote bool) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("-url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-url must be an absolute http or https URL, got %q", rawURL)
	}
	if allowRemote {
		return nil
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-url %q is not on loopback: mcpload refuses remote targets unless -allow-remote is given "+
		"(these are shared machines and networks: a load test aimed at someone else's server is an outage for them)", rawURL)
}
