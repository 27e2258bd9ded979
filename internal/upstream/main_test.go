package upstream

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
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
	deadline := time.Now().Add(wait)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "internal/upstream.") && !strings.Contains(g, "upstream.TestMain") && !strings.Contains(g, "upstream.leakedGoroutines") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
