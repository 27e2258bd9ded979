package testkit

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// minNodeMajor is the oldest Node.js major version the scripts in node/ run
// on.
const minNodeMajor = 20

var nodeSetup struct {
	once sync.Once
	dir  string // the node/ directory, dependencies installed
	node string // path of the node binary
	err  error
}

// NodeDir returns the directory of the testkit's Node scripts
// (internal/testkit/node), with their npm dependencies installed. If
// node_modules is missing or older than package-lock.json, it runs
// "npm ci" there, once per test binary, under an exclusive file lock so
// that test binaries of several packages running in parallel do not race.
// A missing or too old node or npm fails the test: these tests are never
// skipped.
func NodeDir(t testing.TB) string {
	t.Helper()
	nodeSetup.once.Do(func() {
		nodeSetup.dir, nodeSetup.node, nodeSetup.err = setUpNode()
	})
	if nodeSetup.err != nil {
		t.Fatalf("testkit: %v", nodeSetup.err)
	}
	return nodeSetup.dir
}

// nodeBinary returns the path of node, after NodeDir has checked it.
func nodeBinary(t testing.TB) string {
	t.Helper()
	NodeDir(t)
	return nodeSetup.node
}

func setUpNode() (dir, node string, err error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", "", errors.New("cannot locate the testkit sources")
	}
	dir = filepath.Join(filepath.Dir(file), "node")
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err != nil {
		return "", "", fmt.Errorf("the testkit's Node scripts: %v", err)
	}

	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("node (Node.js >= %d) is required by this test and was not found in PATH: %v", minNodeMajor, err)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s --version: %v", node, err)
	}
	version := strings.TrimSpace(string(out))
	major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	if n, err := strconv.Atoi(major); err != nil || n < minNodeMajor {
		return "", "", fmt.Errorf("node.js >= %d is required by this test, %s is %s", minNodeMajor, node, version)
	}

	if !nodeModulesStale(dir) {
		return dir, node, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", "", fmt.Errorf("npm is required by this test (to install %s/node_modules) and was not found in PATH: %v", dir, err)
	}

	// One lock per node/ directory, shared by every test binary on the
	// machine.
	h := fnv.New64a()
	h.Write([]byte(dir))
	lockPath := filepath.Join(os.TempDir(), fmt.Sprintf("mcpgw-testkit-npm-%x.lock", h.Sum64()))
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("npm lock: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", "", fmt.Errorf("npm lock %s: %v", lockPath, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	// Another test binary may have installed them while we waited.
	if !nodeModulesStale(dir) {
		return dir, node, nil
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
	}
	if nodeModulesStale(dir) {
		return "", "", fmt.Errorf("npm ci in %s left node_modules older than package-lock.json", dir)
	}
	return dir, node, nil
}

// nodeModulesStale reports whether dir/node_modules needs installing: npm
// writes node_modules/.package-lock.json last, after a complete install.
func nodeModulesStale(dir string) bool {
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return true
	}
	installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err != nil {
		return true
	}
	return installed.ModTime().Before(lock.ModTime())
}
