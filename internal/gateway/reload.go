package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/generation"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/transport"
)

// Live reload.
//
// Run watches the config file (polling its content, which also sees the
// symlink swap a Kubernetes ConfigMap update makes) and reloads on SIGHUP.
// A new config is loaded and validated completely before anything changes;
// an invalid one is refused with the problems `gateway validate` prints, and
// the gateway keeps serving the last good one. The swap is atomic: requests
// in flight finish with the config they started with, and a request sees
// one config from its authentication to its last upstream call.

// reloadInterval is how often Run looks at the config file.
const reloadInterval = 2 * time.Second

type reloadState struct {
	// swap serializes Reload: the endpoint's generation and the auth chain
	// in front of it must be replaced in the same order.
	swap sync.Mutex

	mu         sync.Mutex
	generation int
	loaded     time.Time
	lastErr    error
	lastErrAt  time.Time
	sum        [32]byte // of the file last loaded or refused
}

// Reload makes cfg, valid with defaults applied, the gateway's config.
// Settings that only a restart can change (listeners, public URL, session
// store) keep their running values; the reload says so in the log.
func (g *Gateway) Reload(cfg *config.Config) error {
	g.reload.swap.Lock()
	defer g.reload.swap.Unlock()
	prev := g.live.Load()
	cfg = keepRestartOnly(prev.cfg, cfg, g.log.Warn)
	// Provision and validate: everything of the new generation that can
	// fail is built first, and a failure changes nothing.
	v, err := g.verifierFor(cfg, prev)
	var next *generation.Prepared
	if err == nil {
		next, err = g.server.Prepare(cfg)
	}
	if err != nil {
		g.refused(err)
		return err
	}
	// Swap: the new auth chain is built around the endpoint's new
	// generation and published as one, so a request entering /mcp gets
	// both or neither; the replaced upstreams' clients are released after.
	g.edge.SetConfig(next, func(rt *transport.Snapshot) { g.live.Store(g.buildLive(cfg, v, rt)) })
	g.metrics.ConfigReload(telemetry.ReloadOK)
	g.reload.mu.Lock()
	g.reload.generation++
	g.reload.loaded = time.Now()
	g.reload.lastErr = nil
	gen := g.reload.generation
	g.reload.mu.Unlock()
	g.log.Info("config reloaded", "generation", gen, "path", cfg.Path, "upstreams", len(cfg.Upstreams), "tenants", len(cfg.Tenants))
	return nil
}

// ReloadFile loads, validates and applies the config file at path.
func (g *Gateway) ReloadFile(path string, getenv func(string) string) error {
	cfg, err := config.Load(path, getenv)
	if err != nil {
		g.refused(err)
		return err
	}
	for _, w := range cfg.Warnings {
		g.log.Warn("config warning", "problem", w.Error())
	}
	return g.Reload(cfg)
}

func (g *Gateway) refused(err error) {
	g.metrics.ConfigReload(telemetry.ReloadError)
	g.reload.mu.Lock()
	g.reload.lastErr, g.reload.lastErrAt = err, time.Now()
	g.reload.mu.Unlock()
	var ps config.Problems
	if errors.As(err, &ps) {
		for _, p := range ps {
			g.log.Error("config reload refused; keeping the last good config", "problem", p.Error())
		}
		return
	}
	g.log.Error("config reload refused; keeping the last good config", "error", err)
}

// ReloadStatus describes the config generation in force and the last
// refused reload, for /readyz.
func (g *Gateway) ReloadStatus() string {
	g.reload.mu.Lock()
	defer g.reload.mu.Unlock()
	s := fmt.Sprintf("config: generation %d, loaded %s", g.reload.generation, g.reload.loaded.UTC().Format(time.RFC3339))
	if err := g.reload.lastErr; err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		var ps config.Problems
		if errors.As(err, &ps) && len(ps) > 1 {
			first = fmt.Sprintf("%s (and %d more problems)", first, len(ps)-1)
		}
		s += fmt.Sprintf("; last reload refused %s: %s", g.reload.lastErrAt.UTC().Format(time.RFC3339), first)
	}
	return s
}

// Generation returns how many configs the gateway has run with, the first
// included.
func (g *Gateway) Generation() int {
	g.reload.mu.Lock()
	defer g.reload.mu.Unlock()
	return g.reload.generation
}

// watchState is the config watch's goroutine, which Close stops and
// waits for.
type watchState struct {
	mu     sync.Mutex
	stop   context.CancelFunc
	done   chan struct{}
	closed bool
}

// startWatch starts the config watch (see watch) unless one runs or the
// gateway is closed.
func (g *Gateway) startWatch(path string, getenv func(string) string, every time.Duration) {
	g.watch.mu.Lock()
	defer g.watch.mu.Unlock()
	if g.watch.closed || g.watch.stop != nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	g.watch.stop, g.watch.done = stop, done
	go func() {
		defer close(done)
		g.watchConfig(ctx, path, getenv, every)
	}()
}

// stopWatch stops the config watch, waiting for a reload in progress to
// finish, and keeps any from starting again.
func (g *Gateway) stopWatch() {
	g.watch.mu.Lock()
	stop, done := g.watch.stop, g.watch.done
	g.watch.closed = true
	g.watch.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// watchConfig reloads path when its content changes or on SIGHUP, until
// ctx ends.
func (g *Gateway) watchConfig(ctx context.Context, path string, getenv func(string) string, every time.Duration) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if b, err := os.ReadFile(path); err == nil {
		g.reload.mu.Lock()
		g.reload.sum = sha256.Sum256(b)
		g.reload.mu.Unlock()
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		force := false
		select {
		case <-ctx.Done():
			return
		case <-hup:
			force = true
			g.log.Info("SIGHUP: reloading the config", "path", path)
		case <-tick.C:
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if force {
				g.refused(err)
			}
			continue // a file being replaced; the next tick sees it
		}
		sum := sha256.Sum256(b)
		g.reload.mu.Lock()
		same := bytes.Equal(sum[:], g.reload.sum[:])
		g.reload.sum = sum
		g.reload.mu.Unlock()
		if same && !force {
			continue
		}
		_ = g.ReloadFile(path, getenv)
	}
}

// keepRestartOnly returns next with the settings a running gateway cannot
// change taken from cur, warning about each that differs.
func keepRestartOnly(cur, next *config.Config, warn func(string, ...any)) *config.Config {
	c := *next
	keep := func(name string, curV, nextV any, restore func()) {
		if !reflect.DeepEqual(curV, nextV) {
			warn("config reload: this setting needs a restart; keeping the running value", "setting", name)
			restore()
		}
	}
	keep("server.listen", cur.Server.Listen, c.Server.Listen, func() { c.Server.Listen = cur.Server.Listen })
	keep("server.admin_listen", cur.Server.AdminListen, c.Server.AdminListen, func() { c.Server.AdminListen = cur.Server.AdminListen })
	keep("server.public_url", cur.Server.PublicURL, c.Server.PublicURL, func() { c.Server.PublicURL = cur.Server.PublicURL })
	keep("server.read_header_timeout", cur.Server.ReadHeaderTimeout, c.Server.ReadHeaderTimeout, func() { c.Server.ReadHeaderTimeout = cur.Server.ReadHeaderTimeout })
	keep("sessions", cur.Sessions, c.Sessions, func() { c.Sessions = cur.Sessions })
	keep("telemetry", cur.Telemetry, c.Telemetry, func() { c.Telemetry = cur.Telemetry })
	keep("budgets.redis", cur.Budgets.Redis, c.Budgets.Redis, func() { c.Budgets.Redis = cur.Budgets.Redis })
	return &c
}

func getenvOr(f func(string) string) func(string) string {
	if f == nil {
		return os.Getenv
	}
	return f
}
