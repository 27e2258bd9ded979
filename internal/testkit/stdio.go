package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// StdioServerPackage is the import path of the stdio test server.
const StdioServerPackage = "github.com/mcpgw/gateway/internal/testkit/stdioserver"

var stdioBuild struct {
	once sync.Once
	path string
	err  error
}

// StdioServer builds the Go SDK stdio test server (package stdioserver),
// once per test binary, and returns its path. See that package for its
// tools.
func StdioServer(t testing.TB) string {
	t.Helper()
	stdioBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "mcpgw-stdioserver-")
		if err != nil {
			stdioBuild.err = err
			return
		}
		path := filepath.Join(dir, "stdioserver")
		out, err := exec.Command("go", "build", "-o", path, StdioServerPackage).CombinedOutput()
		if err != nil {
			os.RemoveAll(dir)
			stdioBuild.err = fmt.Errorf("go build %s: %v\n%s", StdioServerPackage, err, out)
			return
		}
		stdioBuild.path = path
	})
	if stdioBuild.err != nil {
		t.Fatalf("testkit: %v", stdioBuild.err)
	}
	return stdioBuild.path
}
