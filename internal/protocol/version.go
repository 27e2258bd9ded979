package protocol

import (
	"fmt"
	"slices"
	"strings"
)

// A Version is a protocol revision, named by its date ("2025-11-25") and
// ordered by it: a later revision is a greater Version. The zero Version is
// none.
//
// A version string that is not a date ("DRAFT-2026-v1", "1.0", "") does not
// parse: it names no revision whose place in the order is known, and every
// caller says what it does with one.
type Version uint32 // the date as the decimal number yyyymmdd

// The revisions the gateway speaks.
const (
	V2025_03_26 Version = 20250326
	V2025_06_18 Version = 20250618
	V2025_11_25 Version = 20251125
	// V2026_07_28 is the first revision without initialize and sessions.
	V2026_07_28 Version = 20260728
)

// Versions lists every revision the gateway speaks, newest first;
// SessionVersions and StatelessVersions split them by whether a revision
// has initialize and sessions. Callers must not modify them.
var (
	Versions          = []Version{V2026_07_28, V2025_11_25, V2025_06_18, V2025_03_26}
	SessionVersions   = []Version{V2025_11_25, V2025_06_18, V2025_03_26}
	StatelessVersions = []Version{V2026_07_28}
)

const (
	// LatestSession is the newest revision with sessions.
	LatestSession = V2025_11_25
	// LatestStateless is the newest revision without them.
	LatestStateless = V2026_07_28
	// Assumed is the revision to assume of a request with no
	// MCP-Protocol-Version header and no other way to tell (2025-11-25
	// basic/transports, "Protocol Version Header").
	Assumed = V2025_03_26
)

// ParseVersion returns the Version s names, and whether s is a date in the
// form YYYY-MM-DD at all. Any such date parses, listed or not, so that an
// unknown later revision still sorts after the known ones.
func ParseVersion(s string) (Version, bool) {
	if len(s) != len("yyyy-mm-dd") || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	var n uint32
	for i := 0; i < len(s); i++ {
		if i == 4 || i == 7 {
			continue
		}
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint32(c-'0')
	}
	if m, d := n/100%100, n%100; m < 1 || m > 12 || d < 1 || d > 31 {
		return 0, false
	}
	return Version(n), true
}

// Listed reports whether s names one of vs. Only the exact date string
// names a Version, so this is what slices.Contains of their strings would
// say.
func Listed(s string, vs []Version) bool {
	v, ok := ParseVersion(s)
	return ok && slices.Contains(vs, v)
}

// AtLeast reports whether v is w or a later revision.
func (v Version) AtLeast(w Version) bool { return v >= w }

// Stateless reports whether v has no initialize and no sessions:
// 2026-07-28 and every later revision.
func (v Version) Stateless() bool { return v >= V2026_07_28 }

// String returns v as the protocol spells it, "" for the zero Version.
func (v Version) String() string {
	switch v {
	case 0:
		return ""
	case V2025_03_26:
		return "2025-03-26"
	case V2025_06_18:
		return "2025-06-18"
	case V2025_11_25:
		return "2025-11-25"
	case V2026_07_28:
		return "2026-07-28"
	}
	return fmt.Sprintf("%04d-%02d-%02d", uint32(v)/10000, uint32(v)/100%100, uint32(v)%100)
}

// MarshalText encodes v as its string, so that a []Version marshals to the
// JSON array of version strings the protocol lists (server/discover's
// supportedVersions, UnsupportedProtocolVersion's data).
func (v Version) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// Join returns the strings of vs separated by sep.
func Join(vs []Version, sep string) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return strings.Join(s, sep)
}
