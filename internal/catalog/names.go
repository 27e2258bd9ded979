package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Namespacing.
//
// Tools and prompts are exposed as "<prefix>__<name>"; resource URIs and URI
// templates as "<prefix>+<uri>", which keeps the result a URI (the prefix
// becomes part of the scheme: "github+file:///x") and keeps templates
// expandable by the client. Prefixes match [a-z0-9-]*, so neither "__" nor
// "+" can occur inside one and the split is unambiguous. An upstream with an
// empty prefix passes its names and URIs through unchanged.
//
// Names are routed back through the catalog (see catalog.go), never by
// parsing alone: a name the catalog does not list is not callable.
const (
	nameSeparator = "__"
	uriSeparator  = "+"

	// maxNameLen bounds exposed tool and prompt names. The spec allows 128
	// characters (2025-11-25 server/tools, "Tool Names"), but widely used
	// hosts reject tool names over 64, so the gateway keeps every exposed
	// name within 64: see shortenName.
	maxNameLen = 64
	// hashLen is how many hex digits of the original name's SHA-256 a
	// shortened name keeps.
	hashLen = 8
)

// ExposedName returns the name a tool or prompt of an upstream with the given
// prefix is shown under.
func ExposedName(prefix, name string) string {
	full := name
	if prefix != "" {
		full = prefix + nameSeparator + name
	}
	if len(full) <= maxNameLen {
		return full
	}
	return shortenName(prefix, name)
}

// shortenName makes a name that does not fit in maxNameLen fit: it keeps the
// prefix and as much of the start of the name as room allows, then "_" and
// the first hashLen hex digits of SHA-256(name). The result is deterministic,
// so every replica and every session shows the same name, and distinct
// originals get distinct names except for a 32-bit hash collision, which the
// catalog reports as a conflict like any other.
func shortenName(prefix, name string) string {
	sum := sha256.Sum256([]byte(name))
	suffix := "_" + hex.EncodeToString(sum[:])[:hashLen]
	head := ""
	if prefix != "" {
		head = prefix + nameSeparator
	}
	room := maxNameLen - len(head) - len(suffix)
	if room < 0 {
		room = 0
	}
	keep := name
	if len(keep) > room {
		// Cut on a character boundary: half a UTF-8 sequence would not
		// survive JSON encoding unchanged.
		for room > 0 && !utf8.RuneStart(keep[room]) {
			room--
		}
		keep = keep[:room]
	}
	return head + keep + suffix
}

// ExposedURI returns the URI (or URI template) a resource of an upstream with
// the given prefix is shown under.
func ExposedURI(prefix, uri string) string {
	if prefix == "" {
		return uri
	}
	return prefix + uriSeparator + uri
}

// UpstreamURI reverses ExposedURI for an upstream with the given prefix. It
// reports false when uri does not belong to that prefix.
func UpstreamURI(prefix, uri string) (string, bool) {
	if prefix == "" {
		return uri, true
	}
	rest, ok := strings.CutPrefix(uri, prefix+uriSeparator)
	return rest, ok && rest != ""
}

// Name hygiene. Upstreams are untrusted, and what they list is shown to
// people and to models: a name must read as what it is.
//
// A tool or prompt name, or a resource URI, holding a control character
// (Unicode Cc: \n, \r, BEL…), a format character (Cf: zero-width joiners,
// U+202E and the other bidi embeddings, overrides and isolates) or another
// bidi control (Bidi_Control) could hide or reorder what a client shows, so
// it is dropped from the Listing, which makes it unroutable too. Invalid
// UTF-8 is dropped with them.
//
// Tool names outside what 2025-11-25 server/tools.mdx "Tool Names"
// recommends (1 to 128 of A-Z a-z 0-9 _ - .) are kept: that rule is a
// SHOULD, and spaces or non-ASCII letters are harmless to route. They are
// counted, so an admin can see them.

// hasHiddenChar reports whether s holds a character that could hide or
// disguise what s says (see above).
func hasHiddenChar(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b < utf8.RuneSelf {
			if b < 0x20 || b == 0x7f {
				return true // ASCII controls, the common case
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return true
		}
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Bidi_Control) {
			return true
		}
		i += n - 1
	}
	return false
}

// standardToolName reports whether name keeps to the characters and length
// 2025-11-25 server/tools.mdx "Tool Names" recommends.
func standardToolName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch b := name[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '_', b == '-', b == '.':
		default:
			return false
		}
	}
	return true
}

// foreignNamespace reports whether key, listed by an upstream with an empty
// prefix, lies in the namespace of one of prefixes (every other configured
// non-empty prefix): "<prefix>__…" for a name, "<prefix>+…" for a URI.
// Such a key is never taken from an unprefixed upstream, or it could shadow
// (conflict with) or impersonate the real owner's item. URI schemes are
// case-insensitive (RFC 3986 §3.1), so the URI check is too.
func foreignNamespace(prefixes []string, key string, uri bool) bool {
	for _, p := range prefixes {
		if uri {
			if len(key) > len(p) && key[len(p)] == uriSeparator[0] && strings.EqualFold(key[:len(p)], p) {
				return true
			}
		} else if strings.HasPrefix(key, p) && strings.HasPrefix(key[len(p):], nameSeparator) {
			return true
		}
	}
	return false
}
