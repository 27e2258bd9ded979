package telemetry

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syncBuffer is a bytes.Buffer a handler and a summary's timer may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.b.String()), "\n")
}

func newLimited(t *testing.T, max int) (*slog.Logger, *syncBuffer, *Metrics, *prometheus.Registry) {
	t.Helper()
	var buf syncBuffer
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(newLogLimiter(h, m, LogWindow, max)), &buf, m, reg
}

// An outage that fails every request writes its error once per window,
// then one summary with the count; the metric counts the rest.
func TestLogLimiterSummarizes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, buf, m, _ := newLimited(t, MaxLogKeys)
		for i := range 264 {
			log.Error("session store", "error", fmt.Errorf("dial tcp: connection refused (%d)", i))
		}
		if got := buf.lines(); len(got) != 1 || !strings.Contains(got[0], "(0)") {
			t.Fatalf("logged during the window: %q", got)
		}
		if got := testutil.ToFloat64(m.logSup.WithLabelValues("session store")); got != 263 {
			t.Errorf("mcpgw_log_suppressed_total = %v, want 263", got)
		}
		time.Sleep(LogWindow)
		synctest.Wait()
		got := buf.lines()
		if len(got) != 2 || !strings.Contains(got[1], LogSuppressedMessage) || !strings.Contains(got[1], `message="session store" suppressed=263`) ||
			!strings.Contains(got[1], "level=ERROR") || strings.Contains(got[1], "refused") {
			t.Fatalf("summary: %q", got)
		}
		// A new window logs the first again; nothing was suppressed in it,
		// so no summary follows.
		log.Error("session store", "error", "again")
		time.Sleep(2 * LogWindow)
		synctest.Wait()
		if got := buf.lines(); len(got) != 3 || !strings.Contains(got[2], "again") {
			t.Fatalf("next window: %q", got)
		}
	})
}

// Records below Warn pass; records that differ in message, upstream,
// problem or name are limited apart; handlers derived with With share the
// windows.
func TestLogLimiterKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, buf, _, _ := newLimited(t, MaxLogKeys)
		for range 3 {
			log.Info("config reloaded")
			log.Debug("client gone")
			log.Warn("upstream initialize failed", "upstream", "alpha", "error", "x")
			log.Warn("upstream initialize failed", "upstream", "beta", "error", "y")
			log.Error("config reload refused", "problem", "a")
			log.Error("config reload refused", "problem", "b")
			log.With("tenant", "acme").Error("request failed", "error", "z")
			log.Error("request failed", "error", "w")
			log.With("upstream", "alpha").Error("upstream tls: every request will fail")
			log.With("upstream", "beta").WithGroup("g").Error("upstream tls: every request will fail")
		}
		got := strings.Join(buf.lines(), "\n")
		for s, want := range map[string]int{
			"config reloaded": 3, "client gone": 3, "upstream=alpha": 2, "upstream=beta": 2,
			"problem=a": 1, "problem=b": 1, `msg="request failed"`: 1,
			"upstream tls: every request will fail": 2,
		} {
			if n := strings.Count(got, s); n != want {
				t.Errorf("%q logged %d times, want %d:\n%s", s, n, want, got)
			}
		}
	})
}

// Messages that vary (a message built from upstream text, say) keep the
// label set and the window table bounded, and the log too.
func TestLogLimiterBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max = 8
		log, buf, _, reg := newLimited(t, max)
		l := log.Handler().(*LogLimiter)
		for i := range 1000 {
			log.Error(fmt.Sprintf("upstream said %d", i), "error", "e")
			log.Error("same", "name", fmt.Sprintf("tool-%d", i))
		}
		l.s.mu.Lock()
		n := len(l.s.entries)
		l.s.mu.Unlock()
		if n > max+1 {
			t.Errorf("%d windows tracked, want at most %d", n, max+1)
		}
		if lines := buf.lines(); len(lines) > max+1 {
			t.Errorf("%d lines logged in one window, want at most %d", len(lines), max+1)
		}
		labels, err := testutil.GatherAndCount(reg, "mcpgw_log_suppressed_total")
		if err != nil {
			t.Fatal(err)
		}
		if labels > MaxLogMessageLabels+1 {
			t.Errorf("%d message labels, want at most %d", labels, MaxLogMessageLabels+1)
		}
		// Once the windows ended, they make room for new keys.
		time.Sleep(2 * LogWindow)
		synctest.Wait()
		before := len(buf.lines())
		log.Error("fresh", "error", "e")
		if lines := buf.lines(); len(lines) != before+1 || !strings.Contains(lines[len(lines)-1], "fresh") {
			t.Errorf("a new message after the windows ended: %q", lines[before:])
		}
	})
}

// Close logs the pending summary at once, and no timer runs after it.
func TestLogLimiterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, buf, _, _ := newLimited(t, MaxLogKeys)
		for range 3 {
			log.Error("session store")
		}
		log.Handler().(*LogLimiter).Close()
		if got := buf.lines(); len(got) != 2 || !strings.Contains(got[1], "suppressed=2") {
			t.Fatalf("after Close: %q", got)
		}
		log.Error("session store")
		time.Sleep(2 * LogWindow)
		synctest.Wait()
		if got := buf.lines(); len(got) != 3 {
			t.Fatalf("after Close, records pass and nothing more is logged: %q", got)
		}
	})
}
