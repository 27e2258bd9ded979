package instructions

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
)

func TestClean(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"  a\r\nb\tc  ", "a\nb\tc"},
		{"bell\a, esc\x1b, nul\x00, del\x7f, c1\u0085", "bell, esc, nul, del, c1"},
		{"bidi\u202e override, zero\u200bwidth", "bidi override, zerowidth"},
		{"bad \xff utf-8", "bad  utf-8"},
		{"# Heading\ntext # not one\n## another", "\\# Heading\ntext # not one\n\\## another"},
	} {
		if got := Clean(tc.in); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := Clean(strings.Repeat("é", config.MaxInstructionsBytes))
	if len(long) > config.MaxInstructionsBytes || !strings.HasSuffix(long, truncatedMark) || !utf8.ValidString(long) {
		t.Errorf("a long text: %d bytes, ends %q", len(long), long[len(long)-40:])
	}
}

// However many upstreams a tenant has, the gateway's instructions stay
// within MaxTotal, and say how many were left out.
func TestMergeBounded(t *testing.T) {
	var m Memory
	var ups []Upstream
	for i := range 20 {
		name := fmt.Sprintf("up-%d", i)
		m.Remember(name, strings.Repeat("x", 2*config.MaxInstructionsBytes))
		ups = append(ups, Upstream{Name: name, Prefix: name})
	}
	got := m.Merge(ups)
	if len(got) > MaxTotal {
		t.Errorf("%d bytes, want at most %d", len(got), MaxTotal)
	}
	if !strings.Contains(got, "## up-0\n") || !strings.HasSuffix(got, "[the instructions of 17 more servers were left out by the gateway]") {
		t.Errorf("instructions: %q", got[len(got)-200:])
	}
}

// TestMerge: upstreams in the order given, each under its heading and
// prefix; an admin's override replaces an upstream's text, "off" leaves it
// out, and one whose text is forgotten or unknown is not mentioned.
func TestMerge(t *testing.T) {
	var m Memory
	if got := m.Merge([]Upstream{{Name: "a"}}); got != "" {
		t.Errorf("nothing known: %q", got)
	}
	m.Remember("a", "Use a's tools.")
	m.Remember("b", "Use b's tools.")
	m.Remember("c", "Use c's tools.")
	m.Remember("d", "Gone soon.")
	m.Remember("d", "\u200b") // cleaned to nothing: forgotten
	got := m.Merge([]Upstream{
		{Name: "b", Prefix: "bee", Config: &config.UpstreamInstructions{Mode: config.InstructionsOverride, Text: " Admin's words. "}},
		{Name: "a"},
		{Name: "c", Config: &config.UpstreamInstructions{Mode: config.InstructionsOff}},
		{Name: "d"},
	})
	want := "This server is a gateway in front of several MCP servers; their instructions follow.\n\n" +
		"## b\n\nIts tools and prompts are named " + catalog.ExposedName("bee", "<name>") +
		", its resource URIs start with " + catalog.ExposedURI("bee", "") + ".\n\nAdmin's words.\n\n" +
		"## a\n\nUse a's tools."
	if got != want {
		t.Errorf("Merge = %q, want %q", got, want)
	}
}
