package check

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the gateway repository: this module is deploy/check in it.
var repoRoot = func() string {
	abs, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return abs
}()

// repoPath returns the absolute path of a slash-separated path in the
// repository.
func repoPath(rel string) string { return filepath.Join(repoRoot, filepath.FromSlash(rel)) }

var gateway struct {
	once sync.Once
	dir  string
	v    *Validator
	err  error
}

// validator returns a Validator for the gateway binary, built once per
// test run.
func validator(t *testing.T) *Validator {
	t.Helper()
	gateway.once.Do(func() {
		gateway.dir, gateway.err = os.MkdirTemp("", "deploy-check-")
		if gateway.err == nil {
			gateway.v, gateway.err = BuildGateway(repoRoot, gateway.dir)
		}
	})
	if gateway.err != nil {
		t.Fatal(gateway.err)
	}
	return gateway.v
}

func TestMain(m *testing.M) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil || !strings.Contains(string(data), "module github.com/mcpgw/gateway\n") {
		panic("deploy/check must run from its directory inside the gateway repository")
	}
	code := m.Run()
	if gateway.dir != "" {
		os.RemoveAll(gateway.dir)
	}
	os.Exit(code)
}

// validateConfig writes data to a file named base in a new directory and
// runs `gateway validate` on it; source says where data comes from.
func validateConfig(t *testing.T, source, base, data string, env map[string]string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), base)
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := validator(t).Validate(file, env); err != nil {
		t.Errorf("%s (lines are the source file's): %v", source, err)
	}
}
