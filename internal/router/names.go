package router

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
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

// exposedName returns the name a tool or prompt of an upstream with the given
// prefix is shown under.
func exposedName(prefix, name string) string {
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

// exposedURI returns the URI (or URI template) a resource of an upstream with
// the given prefix is shown under.
func exposedURI(prefix, uri string) string {
	if prefix == "" {
		return uri
	}
	return prefix + uriSeparator + uri
}

// upstreamURI reverses exposedURI for an upstream with the given prefix. It
// reports false when uri does not belong to that prefix.
func upstreamURI(prefix, uri string) (string, bool) {
	if prefix == "" {
		return uri, true
	}
	rest, ok := strings.CutPrefix(uri, prefix+uriSeparator)
	return rest, ok && rest != ""
}
