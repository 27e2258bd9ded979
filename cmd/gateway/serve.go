package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/dispatch"
	"github.com/mcpgw/gateway/internal/gateway"
)

// logFlags are the logging flags every long-running command takes.
type logFlags struct {
	format, level string
}

func (lf *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&lf.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&lf.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (lf *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(lf.level)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch lf.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format: want text or json, got %q", lf.format)
}

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "configs/gateway.yaml", "path of the YAML config file")
	var lf logFlags
	lf.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitError{2}
	}
	log, err := lf.logger(stderr)
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
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path of the YAML config file (required)")
	if err := fs.Parse(args); err != nil {
		return exitError{2}
	}
	if *path == "" {
		fmt.Fprintln(stderr, "gateway validate: -config is required")
		return exitError{2}
	}
	cfg, err := config.Load(*path, getenv)
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
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stdout, "warning: "+w.Error())
	}
	fmt.Fprintf(stdout, "%s: ok\n", *path)
	return nil
}

// quote shell-quotes s for the instructions demo mode prints.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func explain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path of the YAML config file (required)")
	id := fs.String("tenant", "", "tenant id (required)")
	if err := fs.Parse(args); err != nil {
		return exitError{2}
	}
	if *path == "" || *id == "" {
		fmt.Fprintln(stderr, "gateway explain: -config and -tenant are required")
		return exitError{2}
	}
	cfg, err := config.Load(*path, getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stderr, "warning:", w.Error())
	}
	if err := dispatch.Explain(ctx, cfg, *id, stdout, dispatch.ExplainOptions{}); err != nil {
		fmt.Fprintln(stderr, "gateway explain:", err)
		return exitError{1}
	}
	return nil
}

// redisLogger routes go-redis's internal log lines to slog at debug level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "redis")
}
