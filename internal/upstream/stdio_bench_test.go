package upstream

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// BenchmarkIdleStdioSessions opens 100 upstream sessions with the Go SDK
// stdio test server and leaves them idle, once with a process per session
// (isolation session) and once with one process for all (isolation shared,
// as for 100 sessions of one tenant). It reports the gateway's heap growth
// per session (gw_heap_B/session), its goroutines per session, and the
// resident memory of the servers' processes per session (child_rss_B/session).
//
//	go test -run '^$' -bench IdleStdioSessions -benchtime 1x ./internal/upstream/
func BenchmarkIdleStdioSessions(b *testing.B) {
	const n = 100
	for _, iso := range []string{config.IsolationSession, config.IsolationShared} {
		b.Run(iso, func(b *testing.B) {
			for b.Loop() {
				cfg := config.Upstream{Name: "fs", Command: []string{testkit.StdioServer(b)}, Timeout: config.Duration(30 * time.Second),
					Stdio: &config.UpstreamStdio{Isolation: iso, MaxProcesses: n, StopGrace: config.Duration(time.Second)}}
				c := New(cfg, Options{})
				ctx := context.Background()
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				g0 := runtime.NumGoroutine()
				for range n {
					if _, err := c.Open(ctx); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				g1 := runtime.NumGoroutine()
				var rss int64
				for _, pid := range testkit.ChildPids(strconv.Itoa(os.Getpid())) {
					rss += rssOf(pid)
				}
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "gw_heap_B/session")
				b.ReportMetric(float64(g1-g0)/n, "goroutines/session")
				b.ReportMetric(float64(rss)/n, "child_rss_B/session")
				b.ReportMetric(float64(c.pipe.Conns()), "processes")
				c.Close()
			}
		})
	}
}

// rssOf returns the resident set size of process pid, in bytes.
func rssOf(pid string) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
