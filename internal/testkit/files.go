package testkit

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// tempDirs maps each test (testing.TB) to the directory WriteFile uses for
// it, so that all of a test's files sit side by side.
var tempDirs sync.Map

// WriteFile writes content to the file name (slash-separated, relative) in
// a temporary directory of the test's own, creating parent directories, and
// returns its path. All files a test writes share that directory, so they
// may refer to each other by relative path. The directory is removed at the
// end of the test.
func WriteFile(t testing.TB, name, content string) string {
	t.Helper()
	dir, ok := tempDirs.Load(t)
	if !ok {
		var loaded bool
		if dir, loaded = tempDirs.LoadOrStore(t, t.TempDir()); !loaded {
			t.Cleanup(func() { tempDirs.Delete(t) })
		}
	}
	path := filepath.Join(dir.(string), filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return path
}
