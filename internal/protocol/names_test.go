package protocol

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMethodNamesDefinedOnce: production code names an MCP method by its
// constant, never by a string literal of its own, so that a method is
// spelled in one place (names.go). Raw strings (JSON documents in text)
// and test helpers are left alone.
func TestMethodNamesDefinedOnce(t *testing.T) {
	known := map[string]bool{}
	for _, m := range Methods {
		known[m.Name] = true
	}
	// A literal that spells a method's name but means something else.
	allowed := map[string]string{"internal/session/redis.go": "ping"} // the Redis command
	skip := []string{"internal/protocol/", "internal/testkit/", "internal/conformance/"}
	fset := token.NewFileSet()
	for _, root := range []string{"../../internal", "../../cmd/gateway"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel := strings.TrimPrefix(filepath.ToSlash(path), "../../")
			for _, s := range skip {
				if strings.HasPrefix(rel, s) {
					return nil
				}
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || strings.HasPrefix(lit.Value, "`") {
					return true
				}
				v, err := strconv.Unquote(lit.Value)
				if err == nil && known[v] && allowed[rel] != v {
					t.Errorf("%s: method %q spelled out: use its constant", fset.Position(lit.Pos()), v)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
