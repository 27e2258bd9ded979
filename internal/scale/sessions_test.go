package scale

import (
	"context"
	"os"
	"testing"
	"time"
)

// Issue 7: "100,000 idle sessions in the memory store under 200 MiB RSS"
// on one replica; issue 33 lowered it to 96 MiB. With the memory store's
// packed records the test measures 76-80 MiB (429-465 bytes per session),
// which leaves a fifth for the noise of shared CI machines (the RSS
// depends on when the collector last ran).
const (
	defaultSessions = 100_000
	sessionsRSSMax  = 96 * mib
)

// TestIdleSessions opens 100,000 sessions on a gateway process (memory
// store, one upstream, anonymous) and checks that its resident set stays
// under 96 MiB. Every session holds an upstream session too: the
// upstream hands out a 32-character Mcp-Session-Id per initialize and
// forgets it, so the gateway's records are as big as with a real upstream
// while the test's upstream costs next to nothing.
//
// It takes about 15s. Under the race detector (make test) the test's own
// client and upstream are instrumented and it takes twice as long, so
// there it runs only with MCPGW_SCALE=1; the gateway binary is never built
// with the race detector, so the figures do not change. bench/README.md
// gives the commands.
func TestIdleSessions(t *testing.T) {
	needProc(t)
	if raceEnabled && os.Getenv("MCPGW_SCALE") != "1" {
		t.Skip("race detector on: this ~30s test runs only with MCPGW_SCALE=1 (or without -race: go test ./internal/scale/); see bench/README.md")
	}
	n := envInt(t, "MCPGW_SCALE_SESSIONS", defaultSessions)
	const workers = 32 // keep-alive connections; the gateway's upstream pool keeps 64

	up := newFastUpstream(t, 2, true)
	g := startGateway(t, up.URL, n)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// Warm up: every connection, the upstream pool, the first sessions.
	warm, err := openSessions(ctx, g.host, g.path, workers, workers)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	base := rss(t, g.pid)

	start := time.Now()
	cpu0 := cpuTime(t, g.pid)
	waitProfile := g.startCPUProfile(t, "sessions.cpu.pprof", 5*time.Second)
	if _, err := openSessions(ctx, g.host, g.path, n-len(warm), workers); err != nil {
		t.Fatal(err)
	}
	waitProfile()
	elapsed := time.Since(start)
	cpu := cpuTime(t, g.pid) - cpu0
	after := rss(t, g.pid)

	if got := g.metric(t, "mcpgw_sessions_active"); got >= 0 && int(got) != n {
		t.Errorf("mcpgw_sessions_active = %v, want %d", got, n)
	}
	if got := up.count("initialize"); got != n {
		t.Errorf("the upstream saw %d initialize requests, want %d (one per session)", got, n)
	}
	perSession := float64(after-base) / float64(n-len(warm))
	t.Logf("%d sessions in %v (%.0f/s, gateway CPU %v, %.0fµs per session)",
		n, elapsed.Round(time.Millisecond), float64(n-len(warm))/elapsed.Seconds(), cpu,
		float64(cpu.Microseconds())/float64(n-len(warm)))
	t.Logf("gateway RSS: %s before, %s after (peak %s): %.0f bytes per session; Go heap in use %s, goroutines %v",
		formatMiB(base), formatMiB(after), formatMiB(procStatus(t, g.pid, "VmHWM")), perSession,
		formatMiB(int64(g.metric(t, "go_memstats_heap_inuse_bytes"))), g.metric(t, "go_goroutines"))
	g.saveHeapProfile(t, "sessions.heap.pprof")
	if live := g.liveHeap(t); live > 0 {
		t.Logf("live Go heap after a forced GC: %s, %.0f bytes per session", formatMiB(live), float64(live)/float64(n))
	}
	if after >= sessionsRSSMax {
		t.Errorf("gateway RSS with %d idle sessions is %s, want under %s", n, formatMiB(after), formatMiB(sessionsRSSMax))
	}
}
