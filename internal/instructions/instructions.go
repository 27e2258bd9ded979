// Package instructions makes the gateway's instructions for the model
// out of its upstreams'.
//
// An upstream's initialize (or server/discover) result may carry
// instructions for the model: how to use its tools. The gateway answers
// with its own, which hold each of the tenant's upstreams' under a heading
// naming it and the prefix its names are exposed under, in config order.
// The text is the upstream's, and goes to a model: it is untrusted. Each
// is cleaned (control and format characters go, lines that would open a
// heading of their own are escaped, so that no upstream speaks under
// another's name) and cut to config.MaxInstructionsBytes when it arrives
// ([Memory.Remember]), and all of them together to MaxTotal
// ([Memory.Merge]). An admin may replace one upstream's or leave it out
// (upstreams[].instructions).
package instructions

import (
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
)

// MaxTotal bounds the gateway's instructions, headings and all: a
// tenant's upstreams are many more than a model's context wants.
const MaxTotal = 16 << 10

// truncatedMark ends instructions the gateway cut.
const truncatedMark = "\n[truncated by the gateway]"

// Clean returns an upstream's instructions fit to pass on: valid UTF-8
// without control characters other than newline and tab, nor Unicode
// format characters (bidirectional overrides, zero-width ones); lines that
// start with "#" are escaped; at most config.MaxInstructionsBytes, a cut
// marked.
func Clean(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	max := config.MaxInstructionsBytes - len(truncatedMark)
	lineStart := true
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				continue // invalid UTF-8
			}
		}
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
			continue
		}
		if lineStart && r == '#' {
			b.WriteByte('\\')
		}
		if b.Len()+utf8.RuneLen(r) > max {
			return strings.TrimSpace(b.String()) + truncatedMark
		}
		b.WriteRune(r)
		lineStart = r == '\n'
	}
	return strings.TrimSpace(b.String())
}

// A Memory holds each upstream's instructions, cleaned, as this replica
// last saw them: at most config.MaxInstructionsBytes per upstream, under
// the upstream's name. Its zero value is empty and ready to use; its
// methods may be called concurrently.
type Memory struct {
	mu   sync.Mutex
	last map[string]string // upstream → its instructions, cleaned
}

// Remember keeps upstream name's instructions, cleaned; "" forgets them.
func (m *Memory) Remember(name, text string) {
	text = Clean(text)
	m.mu.Lock()
	defer m.mu.Unlock()
	if text == "" {
		delete(m.last, name)
		return
	}
	if m.last == nil {
		m.last = make(map[string]string)
	}
	m.last[name] = text
}

func (m *Memory) lastOf(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[name]
}

// An Upstream is one upstream, for Merge: its name, the prefix its names
// are exposed under, and its upstreams[].instructions (nil for its own).
type Upstream struct {
	Name, Prefix string
	Config       *config.UpstreamInstructions
}

// Merge returns the gateway's instructions for ups: each one's that is
// known (its own as last remembered, or the admin's override), under a
// heading, at most MaxTotal; "" if none.
func (m *Memory) Merge(ups []Upstream) string {
	var b strings.Builder
	omitted := 0
	for _, up := range ups {
		text := ""
		switch in := up.Config; {
		case in != nil && in.Mode == config.InstructionsOff:
			continue
		case in != nil && in.Mode == config.InstructionsOverride:
			text = strings.TrimSpace(in.Text)
		default:
			text = m.lastOf(up.Name)
		}
		if text == "" {
			continue
		}
		section := "## " + up.Name + "\n\n"
		if p := up.Prefix; p != "" {
			section += "Its tools and prompts are named " + catalog.ExposedName(p, "<name>") +
				", its resource URIs start with " + catalog.ExposedURI(p, "") + ".\n\n"
		}
		section += text + "\n\n"
		if b.Len()+len(section) > MaxTotal-200 {
			omitted++
			continue
		}
		b.WriteString(section)
	}
	if omitted > 0 {
		b.WriteString("[the instructions of " + strconv.Itoa(omitted) + " more servers were left out by the gateway]\n")
	}
	if b.Len() == 0 {
		return ""
	}
	return "This server is a gateway in front of several MCP servers; their instructions follow.\n\n" + strings.TrimSpace(b.String())
}
