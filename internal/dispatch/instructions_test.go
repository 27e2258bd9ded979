package dispatch

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
)

func TestCleanInstructions(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"  a\r\nb\tc  ", "a\nb\tc"},
		{"bell\a, esc\x1b, nul\x00, del\x7f, c1\u0085", "bell, esc, nul, del, c1"},
		{"bidi\u202e override, zero\u200bwidth", "bidi override, zerowidth"},
		{"bad \xff utf-8", "bad  utf-8"},
		{"# Heading\ntext # not one\n## another", "\\# Heading\ntext # not one\n\\## another"},
	} {
		if got := cleanInstructions(tc.in); got != tc.want {
			t.Errorf("cleanInstructions(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := cleanInstructions(strings.Repeat("é", config.MaxInstructionsBytes))
	if len(long) > config.MaxInstructionsBytes || !strings.HasSuffix(long, truncatedMark) || !utf8.ValidString(long) {
		t.Errorf("a long text: %d bytes, ends %q", len(long), long[len(long)-40:])
	}
}

// However many upstreams a tenant has, the gateway's instructions stay
// within maxInstructionsTotal, and say how many were left out.
func TestInstructionsBounded(t *testing.T) {
	h := &Server{lastInstructions: map[string]string{}}
	var ups []*upstreamRef
	for i := range 20 {
		name := fmt.Sprintf("up-%d", i)
		h.rememberInstructions(name, strings.Repeat("x", 2*config.MaxInstructionsBytes))
		ups = append(ups, &upstreamRef{cfg: config.Upstream{Name: name}, cat: catalog.Upstream{Name: name, Prefix: name}})
	}
	got := (&Request{h: h}).instructions(ups)
	if len(got) > maxInstructionsTotal {
		t.Errorf("%d bytes, want at most %d", len(got), maxInstructionsTotal)
	}
	if !strings.Contains(got, "## up-0\n") || !strings.HasSuffix(got, "[the instructions of 17 more servers were left out by the gateway]") {
		t.Errorf("instructions: %q", got[len(got)-200:])
	}
}
