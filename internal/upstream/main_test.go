package upstream

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/testkit"
)

// TestMain fails the run if a goroutine running this package's code
// outlives the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(2 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func leakedGoroutines(wait time.Duration) string {
	var leaked []string
	if testkit.Poll(wait, func() bool {
		leaked = leaked[:0]
		for _, g := range goroutines() {
			if strings.Contains(g, "internal/upstream.") && !strings.Contains(g, "upstream.TestMain") && !strings.Contains(g, "upstream.leakedGoroutines") {
				leaked = append(leaked, g)
			}
		}
		return len(leaked) == 0
	}) {
		return ""
	}
	return strings.Join(leaked, "\n\n")
}

// goroutines returns the stack of every goroutine, each with its header
// ("goroutine 7 [select]:").
func goroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Split(string(buf), "\n\n")
}

// waitBlockedIn waits until a goroutine blocks (on a channel, a lock or
// the network) in function fn, as "upstream.(*Response).Next". It may be
// called outside the test's goroutine.
func waitBlockedIn(fn string) error {
	if testkit.Poll(5*time.Second, func() bool {
		for _, g := range goroutines() {
			header, _, _ := strings.Cut(g, "\n")
			if strings.Contains(g, fn+"(") && !strings.Contains(header, "[running]") && !strings.Contains(header, "[runnable]") {
				return true
			}
		}
		return false
	}) {
		return nil
	}
	return fmt.Errorf("no goroutine blocked in %s within 5s", fn)
}
