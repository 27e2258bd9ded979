package dispatch

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
)

// Instructions.
//
// An upstream's initialize (or server/discover) result may carry
// instructions for the model: how to use its tools. The gateway answers
// with its own, which hold each of the tenant's upstreams' under a heading
// naming it and the prefix its names are exposed under, in config order.
// The text is the upstream's, and goes to a model: it is untrusted. Each
// is cleaned (control and format characters go, lines that would open a
// heading of their own are escaped, so that no upstream speaks under
// another's name) and cut to config.MaxInstructionsBytes when it arrives,
// and all of them together to maxInstructionsTotal. An admin may replace
// one upstream's or leave it out (upstreams[].instructions).

// maxInstructionsTotal bounds the gateway's instructions, headings and
// all: a tenant's upstreams are many more than a model's context wants.
const maxInstructionsTotal = 16 << 10

// truncatedMark ends instructions the gateway cut.
const truncatedMark = "\n[truncated by the gateway]"

// cleanInstructions returns an upstream's instructions fit to pass on: valid
// UTF-8 without control characters other than newline and tab, nor
// Unicode format characters (bidirectional overrides, zero-width ones);
// lines that start with "#" are escaped; at most config.MaxInstructionsBytes,
// a cut marked.
func cleanInstructions(s string) string {
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

// rememberInstructions keeps an upstream's instructions, cleaned, as this
// replica last saw them.
func (h *Server) rememberInstructions(name, text string) {
	text = cleanInstructions(text)
	h.capsMu.Lock()
	defer h.capsMu.Unlock()
	if text == "" {
		delete(h.lastInstructions, name)
		return
	}
	h.lastInstructions[name] = text
}

// instructions returns the gateway's instructions for ups: each one's that
// is known (its own as this replica last saw them, or the admin's
// override), under a heading, at most maxInstructionsTotal; "" if none.
func (rq *Request) instructions(ups []*upstreamRef) string {
	var b strings.Builder
	omitted := 0
	for _, up := range ups {
		text := ""
		switch in := up.cfg.Instructions; {
		case in != nil && in.Mode == config.InstructionsOff:
			continue
		case in != nil && in.Mode == config.InstructionsOverride:
			text = strings.TrimSpace(in.Text)
		default:
			rq.h.capsMu.Lock()
			text = rq.h.lastInstructions[up.cfg.Name]
			rq.h.capsMu.Unlock()
		}
		if text == "" {
			continue
		}
		section := "## " + up.cfg.Name + "\n\n"
		if p := up.cat.Prefix; p != "" {
			section += "Its tools and prompts are named " + catalog.ExposedName(p, "<name>") +
				", its resource URIs start with " + catalog.ExposedURI(p, "") + ".\n\n"
		}
		section += text + "\n\n"
		if b.Len()+len(section) > maxInstructionsTotal-200 {
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
