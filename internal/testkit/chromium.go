package testkit

import (
	"os/exec"
	"testing"
)

// Chromium returns the path of a Chromium (or Chrome) binary for the
// browser tests. None is a failure, not a skip, as a missing Redis is: a
// suite that skipped its browser tests would pass without testing the
// console. Debian: apt-get install chromium (.ci/run does).
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("testkit: no chromium on PATH; install it (Debian: apt-get install chromium), .ci/run does")
	return ""
}
