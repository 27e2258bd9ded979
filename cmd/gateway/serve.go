package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/explain"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/generation"
	"github.com/mcpgw/gateway/internal/policy"
)

// newFlagSet returns the flag set of the subcommand name: it reports
// problems and -h to stderr and returns them from Parse.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// flagError is a command's answer to flags it could not parse: exit status
// 2, the flag package having said why; but -h (or -help) asked for the
// usage, which was printed: exit status 0.
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return errHelp
	}
	return exitError{2}
}

// errHelp ends a command that printed its usage because it was asked to.
var errHelp = exitError{0}

// parseLogged parses args with fs and the logging flags every
// long-running command takes, and returns the logger they ask for, which
// writes to w. Flags fs cannot parse give exitError{2}, fs having said why.
func parseLogged(fs *flag.FlagSet, args []string, w io.Writer) (*slog.Logger, error) {
	format := fs.String("log-format", "text", "log format: text or json")
	levelName := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, flagError(err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*levelName)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch *format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format: want text or json, got %q", *format)
}

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", stderr)
	path := fs.String("config", "configs/gateway.yaml", "path of the YAML config file")
	log, err := parseLogged(fs, args, stderr)
	if err != nil {
		return err
	}
	cfg, err := config.Load(*path, getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	for _, w := range cfg.Warnings {
		log.Warn("config warning", "problem", w.Error())
	}
	// go-redis logs connection failures through a package-wide logger; the
	// gateway reports them itself (503s, /readyz), so they go to debug.
	redis.SetLogger(redisLogger{log})
	return gateway.Run(ctx, cfg, gateway.Options{Logger: log, Version: version, Getenv: getenv}, nil)
}

func validate(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("validate", stderr)
	path := fs.String("config", "", "path of the YAML config file (required)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *path == "" {
		fmt.Fprintln(stderr, "gateway validate: -config is required")
		return exitError{2}
	}
	cfg, err := config.LoadForCheck(*path, getenv)
	if err != nil {
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
	if err := generation.Check(cfg); err != nil {
		fmt.Fprintf(stdout, "%s: %v\n", *path, err)
		return exitError{1}
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stdout, "warning: "+w.Error())
	}
	fmt.Fprintf(stdout, "%s: ok\n", *path)
	return nil
}

// quote shell-quotes s for the instructions demo mode prints.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// explainCmd prints what a tenant would see of each upstream, and why.
func explainCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("explain", stderr)
	path := fs.String("config", "", "path of the YAML config file (required)")
	id := fs.String("tenant", "", "tenant id (required)")
	subject := fs.String("subject", "", "apply policy rules as this subject (sub)")
	claimsFile := fs.String("claims", "", "apply policy rules as a principal with the claims of this JSON file (a token's payload)")
	callTool := fs.String("call", "", "with -subject or -claims: the call-time decision of this tool, as the tenant sees it")
	callArgs := fs.String("args", "", "with -call: the call's arguments, a JSON object")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *path == "" || *id == "" {
		fmt.Fprintln(stderr, "gateway explain: -config and -tenant are required")
		return exitError{2}
	}
	opts := explain.Options{}
	if *subject != "" || *claimsFile != "" {
		p, err := explainPrincipal(*subject, *claimsFile)
		if err != nil {
			fmt.Fprintln(stderr, "gateway explain:", err)
			return exitError{2}
		}
		opts.Principal = p
	}
	if *callTool != "" {
		if opts.Principal == nil {
			fmt.Fprintln(stderr, "gateway explain: -call needs -subject or -claims")
			return exitError{2}
		}
		opts.Call = &explain.Call{Tool: *callTool}
		if *callArgs != "" {
			if !json.Valid([]byte(*callArgs)) || !strings.HasPrefix(strings.TrimSpace(*callArgs), "{") {
				fmt.Fprintln(stderr, "gateway explain: -args must be a JSON object")
				return exitError{2}
			}
			opts.Call.Arguments = json.RawMessage(*callArgs)
		}
	}
	cfg, err := config.Load(*path, getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stderr, "warning:", w.Error())
	}
	if err := explain.Explain(ctx, cfg, *id, stdout, opts); err != nil {
		fmt.Fprintln(stderr, "gateway explain:", err)
		return exitError{1}
	}
	return nil
}

// explainPrincipal is the principal of explain's -subject and -claims:
// the claims file's, with sub, scope (space-separated) or scp, and
// azp or client_id read as a token's.
func explainPrincipal(subject, claimsFile string) (*policy.Principal, error) {
	p := &policy.Principal{Subject: subject}
	if claimsFile != "" {
		b, err := os.ReadFile(claimsFile)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &p.Claims); err != nil || p.Claims == nil {
			return nil, fmt.Errorf("%s: not a JSON object of claims", claimsFile)
		}
		if s, ok := p.Claims["sub"].(string); ok && p.Subject == "" {
			p.Subject = s
		}
		switch s := p.Claims["scope"].(type) {
		case string:
			p.Scopes = strings.Fields(s)
		}
		if l, ok := p.Claims["scp"].([]any); ok && p.Scopes == nil {
			for _, v := range l {
				if s, ok := v.(string); ok {
					p.Scopes = append(p.Scopes, s)
				}
			}
		}
	}
	return p, nil
}

// redisLogger routes go-redis's internal log lines to slog at debug level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "redis")
}

// pinCmd writes the pins file: the definitions every upstream lists now.
func pinCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("pin", stderr)
	path := fs.String("config", "", "path of the YAML config file (required)")
	out := fs.String("out", "", "file to write (default: the config's pins.file)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *path == "" {
		fmt.Fprintln(stderr, "gateway pin: -config is required")
		return exitError{2}
	}
	cfg, err := config.Load(*path, getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	dest := cmp.Or(*out, cfg.Pins.File)
	if dest == "" {
		fmt.Fprintln(stderr, "gateway pin: the config has no pins.file: give -out")
		return exitError{2}
	}
	f, err := explain.Pin(ctx, cfg, explain.Options{})
	if err != nil {
		// Nothing written: a partial file would misjudge the others.
		fmt.Fprintln(stderr, "gateway pin:", err)
		return exitError{1}
	}
	data, err := f.Marshal()
	if err == nil {
		err = writeFileAtomic(dest, data)
	}
	if err != nil {
		fmt.Fprintln(stderr, "gateway pin:", err)
		return exitError{1}
	}
	n := 0
	for _, u := range f.Upstreams {
		n += len(u.Tools) + len(u.Prompts)
	}
	fmt.Fprintf(stdout, "pinned %d definitions of %d upstreams in %s; reload the gateway to apply\n", n, len(f.Upstreams), dest)
	return nil
}

// writeFileAtomic replaces name with data, so that a gateway reloading
// meanwhile reads the old file or the new one, never half of one.
func writeFileAtomic(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".pins-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}
