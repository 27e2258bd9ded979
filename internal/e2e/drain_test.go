package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMDrainLosesNoRequest: replicas of the binary behind a
// round-robin load balancer that checks /readyz, under a steady load of
// tool calls from raw HTTP clients and a go-sdk client; one replica gets
// SIGTERM. Its /readyz turns 503 at once, the load balancer takes it out of
// rotation within its check interval while it still serves (its drain
// delay), it exits cleanly, and not one request fails.
func TestSIGTERMDrainLosesNoRequest(t *testing.T) {
	const (
		drainDelay    = 1500 * time.Millisecond
		checkInterval = 300 * time.Millisecond
		workers       = 6
		victim        = 1
	)
	c := startCluster(t, func(o *clusterOptions) { o.drainDelay = "1500ms"; o.shutdownGrace = "10s" })
	var readyURLs []string
	for _, p := range c.replicas {
		readyURLs = append(readyURLs, "http://"+p.AdminAddr+"/readyz")
	}
	c.lb.CheckReadiness(t, readyURLs, checkInterval)
	token := c.token(t, "acme-app")
	sids := make([]string, workers)
	for i := range sids {
		sids[i] = initialize(t, c.endpoint, token)
	}
	cs := c.connect(t, nil)

	var (
		mu       sync.Mutex
		failures []string
		calls    int
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, sid := range sids {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				text := fmt.Sprintf("w%d-%d", w, n)
				r, err := do(http.MethodPost, c.endpoint, token, sid, echoCall(n+2, "alpha__echo", text))
				switch {
				case err != nil:
					fail("worker %d call %d: %v", w, n, err)
				case r.status != http.StatusOK || !strings.Contains(r.body, `"alpha:`+text+`"`):
					fail("worker %d call %d: %d %s", w, n, r.status, r.body)
				default:
					mu.Lock()
					calls++
					mu.Unlock()
				}
			}
		})
	}
	// The go-sdk client too: its GET stream, wherever it landed, must
	// reconnect without failing the session.
	wg.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			got, err := callText(ctx, cs, "beta__echo", map[string]any{"text": fmt.Sprint("sdk-", n)})
			cancel()
			if err != nil || got != fmt.Sprint("beta:sdk-", n) {
				fail("go-sdk call %d: %q, %v", n, got, err)
				continue
			}
			mu.Lock()
			calls++
			mu.Unlock()
		}
	})
	stopLoad := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer stopLoad()

	time.Sleep(time.Second) // load on all three replicas
	p := c.replicas[victim]
	// A GET stream held by the victim, as MCP hosts hold one: it must not
	// hold up the exit, and it is told to reconnect.
	streamEnd := openRawStream(t, p.Endpoint, token, sids[0])
	from := len(c.lb.Log())
	c.markStopped(victim)
	start := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The load balancer sees the 503 within its check interval.
	var outAfter time.Duration
	for c.lb.InRotation()[victim] {
		if time.Since(start) > drainDelay {
			t.Fatalf("replica %d still in rotation %v after SIGTERM", victim, time.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
	outAfter = time.Since(start)
	var exitAfter time.Duration
	select {
	case <-p.Exited():
		exitAfter = time.Since(start)
	case <-time.After(15 * time.Second):
		t.Fatalf("replica %d still running 15s after SIGTERM", victim)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("replica %d did not exit cleanly: %v", victim, err)
	}
	select {
	case tail := <-streamEnd:
		if !strings.Contains(tail, "retry: 1000\n\n") {
			t.Errorf("the victim's GET stream ended without a retry field: %q", tail)
		}
	case <-time.After(5 * time.Second):
		t.Error("the victim's GET stream did not end")
	}
	time.Sleep(500 * time.Millisecond) // load on the other two
	stopLoad()

	var toVictim, victimDuringDrain int
	for _, e := range c.lb.Log()[from:] {
		if e.Backend == victim {
			toVictim++
			if e.Status == http.StatusOK {
				victimDuringDrain++
			}
		}
		if e.Err != "" || (e.Status != 0 && e.Status >= 500) {
			t.Errorf("LB: %+v", e)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d calls, %d failed; replica %d out of rotation %v after SIGTERM, exited after %v; the LB sent it %d requests after SIGTERM (%d answered 200)",
		calls, len(failures), victim, outAfter.Round(time.Millisecond), exitAfter.Round(time.Millisecond), toVictim, victimDuringDrain)
	if exitAfter < drainDelay || exitAfter > drainDelay+2*time.Second {
		t.Errorf("replica exited %v after SIGTERM, want just after its drain delay (%v): calls are short, and its GET stream must not hold it", exitAfter, drainDelay)
	}
	if calls < 100 {
		t.Errorf("only %d calls succeeded: the load proves nothing", calls)
	}
	if !strings.Contains(p.Output(), "shutting down") {
		t.Errorf("replica %d logged no shutdown:\n%s", victim, p.Output())
	}
	c.assertAlive(t)
}

// openRawStream opens the GET stream of session sid at endpoint and
// returns a channel that receives the stream's last bytes when it ends.
func openRawStream(t *testing.T, endpoint, token, sid string) <-chan string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	// No client timeout: the stream lasts.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET stream at %s: %d", endpoint, resp.StatusCode)
	}
	end := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		end <- string(b[max(0, len(b)-64):])
	}()
	return end
}
