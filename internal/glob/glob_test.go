package glob

import (
	"path"
	"testing"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "anything/at/all", true},
		{"list_*", "list_repos", true},
		{"list_*", "xlist_repos", false},
		{"get_*", "get_", true},
		{"create_issue", "create_issue", true},
		{"create_issue", "create_issues", false},
		{"create_issue", "Create_issue", false},
		{"repo://acme/*", "repo://acme/x/y/z", true},
		{"repo://acme/*", "repo://acme2/x", false},
		{"repo://*/public/*", "repo://a/b/public/c", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a?c", "aéc", true},
		{"[ab]x", "bx", true},
		{"[^ab]x", "bx", false},
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{"*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"[", "[", false},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.name); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("list_*", "list_x")
	f.Add("[a-c]*?", "b/zz")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		got := Match(pattern, name)
		// Where path.Match's '*' cannot differ from ours (no '/' in the
		// name) and the pattern is valid, both agree.
		if ok, err := path.Match(pattern, name); err == nil && !containsByte(name, '/') && ok != got {
			t.Fatalf("Match(%q, %q) = %v, path.Match says %v", pattern, name, got, ok)
		}
	})
}

func containsByte(s string, b byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return true
		}
	}
	return false
}
