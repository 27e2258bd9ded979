package catalog

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestExposedName(t *testing.T) {
	long := strings.Repeat("x", 70)
	tests := []struct {
		name, prefix, in, want string
	}{
		{"prefixed", "github", "create_issue", "github__create_issue"},
		{"no prefix", "", "create_issue", "create_issue"},
		{"exactly 64", "p", strings.Repeat("a", 61), "p__" + strings.Repeat("a", 61)},
		{"too long", "github", long, "github__" + strings.Repeat("x", 64-8-9) + "_" + hash8(long)},
		{"too long without prefix", "", long, strings.Repeat("x", 64-9) + "_" + hash8(long)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ExposedName(tt.prefix, tt.in)
			if got != tt.want {
				t.Errorf("ExposedName(%q, %q) = %q, want %q", tt.prefix, tt.in, got, tt.want)
			}
			if len(got) > maxNameLen {
				t.Errorf("len = %d > %d", len(got), maxNameLen)
			}
		})
	}
	// Two long names with a common head stay distinct.
	a, b := ExposedName("p", long+"a"), ExposedName("p", long+"b")
	if a == b {
		t.Errorf("distinct long names shortened to the same %q", a)
	}
}

func hash8(s string) string { return shortenName("", s)[len(shortenName("", s))-8:] }

func TestURINamespacing(t *testing.T) {
	tests := []struct {
		prefix, uri, exposed string
	}{
		{"github", "file:///a/b", "github+file:///a/b"},
		{"github", "repo://x/{id}", "github+repo://x/{id}"},
		{"", "file:///a", "file:///a"},
	}
	for _, tt := range tests {
		if got := ExposedURI(tt.prefix, tt.uri); got != tt.exposed {
			t.Errorf("ExposedURI(%q, %q) = %q, want %q", tt.prefix, tt.uri, got, tt.exposed)
		}
		back, ok := UpstreamURI(tt.prefix, tt.exposed)
		if !ok || back != tt.uri {
			t.Errorf("UpstreamURI(%q, %q) = %q, %v", tt.prefix, tt.exposed, back, ok)
		}
	}
	for _, bad := range []string{"other+file:///a", "github+", "githubfile:///a", "file:///a"} {
		if _, ok := UpstreamURI("github", bad); ok {
			t.Errorf("UpstreamURI(github, %q) matched", bad)
		}
	}
}

func FuzzNames(f *testing.F) {
	f.Add("github", "create_issue")
	f.Add("", strings.Repeat("é", 40))
	f.Fuzz(func(t *testing.T, prefix, name string) {
		got := ExposedName(prefix, name)
		if len(prefix)+len(nameSeparator)+9 <= maxNameLen && len(got) > maxNameLen {
			t.Fatalf("ExposedName(%q, %q) = %q: %d bytes", prefix, name, got, len(got))
		}
		if utf8.ValidString(name) && utf8.ValidString(prefix) && !utf8.ValidString(got) {
			t.Fatalf("ExposedName(%q, %q) = %q is not valid UTF-8", prefix, name, got)
		}
		if prefix != "" && !strings.HasPrefix(got, prefix+nameSeparator) {
			t.Fatalf("ExposedName(%q, %q) = %q lost its prefix", prefix, name, got)
		}
		back, ok := UpstreamURI(prefix, ExposedURI(prefix, name))
		if name != "" && (!ok || back != name) {
			t.Fatalf("URI round trip of %q under %q gave %q, %v", name, prefix, back, ok)
		}
	})
}

func TestHasHiddenChar(t *testing.T) {
	for _, s := range []string{"nl\nx", "cr\rx", "bel\ax", "rlo\u202ex", "lri\u2066x", "zw\u200bx", "bom\ufeffx", "esc\x1bx", "del\x7fx", "c1\u0085x", "lrm\u200ex", "bad\xffutf8", "tab\tx"} {
		if !hasHiddenChar(s) {
			t.Errorf("hasHiddenChar(%q) = false", s)
		}
	}
	for _, s := range []string{"echo", "get_user", "a.b-c", "nbsp\u00a0x", "é", "日本語", "space x", "emoji😀"} {
		if hasHiddenChar(s) {
			t.Errorf("hasHiddenChar(%q) = true", s)
		}
	}
}

func TestStandardToolName(t *testing.T) {
	for _, s := range []string{"getUser", "DATA_EXPORT_v2", "admin.tools.list", "a-b", strings.Repeat("x", 128)} {
		if !standardToolName(s) {
			t.Errorf("standardToolName(%q) = false", s)
		}
	}
	for _, s := range []string{"", "a b", "a,b", "é", "a/b", strings.Repeat("x", 129)} {
		if standardToolName(s) {
			t.Errorf("standardToolName(%q) = true", s)
		}
	}
}

func TestForeignNamespace(t *testing.T) {
	prefixes := []string{"beta", "gh"}
	for _, tt := range []struct {
		key  string
		uri  bool
		want bool
	}{
		{"beta__echo", false, true},
		{"gh__x", false, true},
		{"beta_echo", false, false},
		{"betax__echo", false, false},
		{"echo", false, false},
		{"beta+file:///x", false, false}, // a name, not a URI
		{"beta+file:///x", true, true},
		{"BETA+file:///x", true, true}, // schemes are case-insensitive
		{"beta__x", true, false},
		{"betamax+file:///x", true, false},
		{"file:///beta+x", true, false},
	} {
		if got := foreignNamespace(prefixes, tt.key, tt.uri); got != tt.want {
			t.Errorf("foreignNamespace(%q, uri=%v) = %v, want %v", tt.key, tt.uri, got, tt.want)
		}
	}
}
