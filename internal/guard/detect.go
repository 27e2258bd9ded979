package guard

import (
	"bytes"
	"math/bits"
	"regexp"
	"slices"
	"strings"
)

// A match is one finding in one string: the bytes s[start:end] of kind.
// sc is the scanner that found it (its guard and action).
type match struct {
	start, end int
	kind       string
	sc         int
}

// A detector finds matches in a string. Each is linear in the string's
// length (Go's regexp is RE2; the scanners are hand-written loops that
// never step back further than a bounded window).
type detector interface {
	// kinds are the kinds it may report.
	kinds() []string
	// present reports whether the detector may find anything in raw, the
	// JSON the strings come from; false only when it certainly cannot.
	// esc says raw holds \u escapes of characters a detector looks for,
	// so that raw's bytes prove nothing.
	present(raw []byte, esc bool) bool
	// find appends the matches in s to ms and returns it; it stops
	// after limit matches in all.
	find(s string, ms []match, limit int) []match
}

// ---------------------------------------------------------------------------
// Regular expressions with a literal prefilter: credentials and the
// admins' extra patterns.

// reDetector matches a regular expression. When the expression has a
// capturing group, a match is the group's span (the secret part of a
// larger context, such as the password of user:password@).
type reDetector struct {
	kind string
	re   *regexp.Regexp
	// lits: at least one of them is in every match (empty: no prefilter).
	lits  []string
	group bool
}

func (d *reDetector) kinds() []string { return []string{d.kind} }

func (d *reDetector) present(raw []byte, esc bool) bool {
	if esc || len(d.lits) == 0 {
		return true
	}
	for _, l := range d.lits {
		if bytes.Contains(raw, []byte(l)) {
			return true
		}
	}
	return false
}

func (d *reDetector) find(s string, ms []match, limit int) []match {
	if len(d.lits) > 0 {
		found := false
		for _, l := range d.lits {
			if strings.Contains(s, l) {
				found = true
				break
			}
		}
		if !found {
			return ms
		}
	}
	n := limit - len(ms)
	if n <= 0 {
		return ms
	}
	if d.group {
		// The first group that took part in the match (alternatives may
		// each have their own).
		for _, loc := range d.re.FindAllStringSubmatchIndex(s, n) {
			for g := 1; 2*g+1 < len(loc); g++ {
				if a, b := loc[2*g], loc[2*g+1]; a >= 0 && b > a {
					ms = append(ms, match{start: a, end: b, kind: d.kind})
					break
				}
			}
		}
		return ms
	}
	for _, loc := range d.re.FindAllStringIndex(s, n) {
		if loc[1] > loc[0] {
			ms = append(ms, match{start: loc[0], end: loc[1], kind: d.kind})
		}
	}
	return ms
}

// ---------------------------------------------------------------------------
// Credentials: rules anchored on a literal each format starts with. A
// string is searched for the literals (vectorized), and the rule's
// expression, anchored, runs only where one is found and the byte before
// it cannot be part of the same token; each attempt reads at most the
// token it looks at, so the work stays linear in the string.

// A litRule is one format of a credential kind.
type litRule struct {
	lits []string
	// re matches from the literal on; it must start with "^".
	re *regexp.Regexp
	// before, if set, reports whether the byte before the literal allows
	// a match there (ok is false at the start of the string).
	before func(c byte, ok bool) bool
	// cont, if set, reports whether a byte right after the match would
	// continue the token: then it is no match.
	cont func(c byte) bool
	// group: a match is the span of the expression's first group.
	group bool
	// pre, if set, is a cheap test of s[p:] (from the literal) that must
	// hold for the expression to be tried.
	pre func(s string) bool
}

type litDetector struct {
	kind  string
	rules []*litRule
}

func (d *litDetector) kinds() []string { return []string{d.kind} }

// present is for a detector used alone; the engine asks narrow with the
// literals of the whole message found in one pass.
func (d *litDetector) present(raw []byte, esc bool) bool {
	return esc || len(d.narrow(litsIn(raw), false).rules) > 0
}

// The literals of every credential rule, numbered for a bit set: one pass
// over a message finds which of them it holds (litsIn), where a search per
// literal would read it some forty times.
var (
	allLits []string
	litBit  = map[string]uint64{}
	// first[c] and second[c] are the literals whose first (second) byte
	// is c.
	first, second [256]uint64
)

func init() {
	add := func(l string) {
		if _, ok := litBit[l]; ok {
			return
		}
		if len(allLits) == 64 {
			panic("guard: more than 64 credential literals")
		}
		bit := uint64(1) << len(allLits)
		allLits = append(allLits, l)
		litBit[l] = bit
		first[l[0]] |= bit
		second[l[1]] |= bit
	}
	for _, rules := range credentialRules {
		for _, r := range rules {
			for _, l := range r.lits {
				add(l)
			}
		}
	}
	add(pemLiteral)
}

// litsIn returns the set of credential literals raw holds.
func litsIn(raw []byte) uint64 {
	var found uint64
	if len(raw) < 2 {
		return 0
	}
	// f is the literals that may start at i-1; each byte is loaded once.
	f := first[raw[0]]
	for i := 1; i < len(raw); i++ {
		c := raw[i]
		m := f & second[c] &^ found
		f = first[c]
		for m != 0 {
			bit := m & -m
			m &^= bit
			if bytes.HasPrefix(raw[i-1:], []byte(allLits[bits.TrailingZeros64(bit)])) {
				found |= bit
			}
		}
	}
	return found
}

// narrow returns d with only the rules and literals in found (all of
// them when esc).
func (d *litDetector) narrow(found uint64, esc bool) *litDetector {
	if esc {
		return d
	}
	n := &litDetector{kind: d.kind}
	for _, r := range d.rules {
		var lits []string
		for _, l := range r.lits {
			if found&litBit[l] != 0 {
				lits = append(lits, l)
			}
		}
		if len(lits) > 0 {
			nr := *r
			nr.lits = lits
			n.rules = append(n.rules, &nr)
		}
	}
	return n
}

func (d *litDetector) find(s string, ms []match, limit int) []match {
	for _, r := range d.rules {
		for _, l := range r.lits {
			for off := 0; len(ms) < limit; {
				k := strings.Index(s[off:], l)
				if k < 0 {
					break
				}
				p := off + k
				off = p + 1
				if r.before != nil {
					c, ok := byte(0), p > 0
					if ok {
						c = s[p-1]
					}
					if !r.before(c, ok) {
						continue
					}
				}
				if r.pre != nil && !r.pre(s[p:]) {
					continue
				}
				loc := r.re.FindStringSubmatchIndex(s[p:])
				if loc == nil {
					continue
				}
				if e := p + loc[1]; r.cont != nil && e < len(s) && r.cont(s[e]) {
					continue
				}
				a, b := loc[0], loc[1]
				if r.group {
					a, b = -1, -1
					for g := 1; 2*g+1 < len(loc); g++ {
						if loc[2*g] >= 0 && loc[2*g+1] > loc[2*g] {
							a, b = loc[2*g], loc[2*g+1]
							break
						}
					}
					if a < 0 {
						continue
					}
				}
				ms = append(ms, match{start: p + a, end: p + b, kind: d.kind})
				off = p + loc[1]
			}
		}
	}
	return ms
}

// Byte classes for the rules' boundaries.
func isWord(c byte) bool            { return isAlnum(c) || c == '_' }
func isToken(c byte) bool           { return isWord(c) || c == '-' }
func notWord(c byte, ok bool) bool  { return !ok || !isWord(c) }
func notToken(c byte, ok bool) bool { return !ok || !isToken(c) }

func rule(re string, before func(byte, bool) bool, cont func(byte) bool, lits ...string) *litRule {
	return &litRule{lits: lits, re: regexp.MustCompile(re), before: before, cont: cont}
}

func grouped(r *litRule) *litRule { r.group = true; return r }

func withPre(r *litRule, pre func(string) bool) *litRule { r.pre = pre; return r }

// userinfo reports whether the URL after "://" at s has an "@" before its
// path, a space or a quote: most URLs have none, and the expression is
// not tried on them.
func userinfo(s string) bool {
	for i := 3; i < len(s); i++ {
		switch s[i] {
		case '@':
			return true
		case '/', ' ', '\t', '\n', '\r', '"', '\'', '<', '>':
			return false
		}
	}
	return false
}

// credentialRules are the built-in credential formats, by kind.
var credentialRules = map[string][]*litRule{
	// AWS access key ids: a four-letter prefix naming the key's type and
	// 16 upper-case letters and digits.
	"aws-access-key": {rule(`^(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}`, notWord, isWord, "AKIA", "ASIA", "ABIA", "ACCA", "A3T")},
	// A Google service account key file's private key id (its private
	// key is a PEM block: private-key).
	"gcp-service-account-key": {grouped(rule(`^private_key_id"\s*:\s*"([0-9a-f]{40})"`, nil, nil, "private_key_id"))},
	// Google API keys.
	"gcp-api-key": {rule(`^AIza[0-9A-Za-z_\-]{35}`, notToken, isToken, "AIza")},
	// The account key of an Azure storage connection string: 64 bytes,
	// base64.
	"azure-storage-key": {grouped(rule(`^AccountKey=([A-Za-z0-9+/]{86}==)`, nil, nil, "AccountKey="))},
	// GitHub tokens: classic (ghp_, gho_, ghu_, ghs_, ghr_) and
	// fine-grained (github_pat_).
	"github-token": {
		rule(`^gh[pousr]_[A-Za-z0-9]{36,251}`, notWord, isWord, "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
		rule(`^github_pat_[A-Za-z0-9_]{22,240}`, notWord, isWord, "github_pat_"),
	},
	// GitLab personal, deploy and runner tokens.
	"gitlab-token": {rule(`^gl(?:pat|dt|rt)-[A-Za-z0-9_\-]{20,}`, notToken, nil, "glpat-", "gldt-", "glrt-")},
	// Slack tokens (bot, user, app, refresh...) and incoming webhook URLs.
	"slack-token": {
		rule(`^xox[abposre]-[A-Za-z0-9-]{10,}`, notToken, nil, "xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-"),
		rule(`^https://hooks\.slack\.com/services/[A-Za-z0-9_/]{20,}`, nil, nil, "https://hooks.slack.com/services/"),
	},
	// JSON Web Tokens: a JOSE header and a payload, both JSON objects in
	// base64url ("eyJ"), and a signature (empty for alg none).
	"jwt": {rule(`^eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`, notToken, nil, "eyJ")},
	// Credentials in URLs: the password of scheme://user:password@host,
	// and the values of query parameters that carry tokens.
	"url-credentials": {
		withPre(grouped(rule(`^://[^\s/:@"'<>]+:([^\s/@"'<>]+)@`, nil, nil, "://")), userinfo),
		grouped(rule(`^[a-z_-]+=([^&\s"'#<>]+)`, func(c byte, ok bool) bool { return ok && (c == '?' || c == '&') }, nil,
			"access_token=", "id_token=", "refresh_token=", "api_key=", "apikey=", "api-key=", "token=", "client_secret=", "password=", "secret=")),
	},
	// HTTP Authorization credentials written out: "Bearer <token>",
	// "Basic <base64>".
	"bearer-token": {grouped(rule(`^(?:[Bb]earer|BEARER|[Bb]asic|BASIC)[ \t]+([A-Za-z0-9\-._~+/]{16,}=*)`, notWord, nil,
		"Bearer", "bearer", "BEARER", "Basic", "basic", "BASIC"))},
}

// ---------------------------------------------------------------------------
// PEM private key blocks (PKCS#1, PKCS#8, EC, OpenSSH, encrypted, PGP),
// from BEGIN to their END line; a block cut before its END goes to the end
// of its base64 body. The END lines of a string are found once, so that
// many BEGIN lines cost no more than one.

type pemDetector struct{}

var pemBegin = regexp.MustCompile(`^-----BEGIN (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----`)
var pemEnd = regexp.MustCompile(`^-----END (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----`)

func (pemDetector) kinds() []string { return []string{"private-key"} }

const pemLiteral = "-----BEGIN "

func (pemDetector) present(raw []byte, esc bool) bool {
	return esc || bytes.Contains(raw, []byte(pemLiteral))
}

func (pemDetector) find(s string, ms []match, limit int) []match {
	var ends []int // ends of the END lines, in order
	endsFound := false
	next := 0 // index in ends of the first END past the current BEGIN
	for off := 0; len(ms) < limit; {
		k := strings.Index(s[off:], "-----BEGIN ")
		if k < 0 {
			break
		}
		p := off + k
		off = p + 1
		loc := pemBegin.FindStringIndex(s[p:])
		if loc == nil {
			continue
		}
		if !endsFound {
			endsFound = true
			for eo := p; ; {
				j := strings.Index(s[eo:], "-----END ")
				if j < 0 {
					break
				}
				q := eo + j
				eo = q + 1
				if l := pemEnd.FindStringIndex(s[q:]); l != nil {
					ends = append(ends, q+l[1])
					eo = q + l[1]
				}
			}
		}
		body := p + loc[1]
		for next < len(ends) && ends[next] <= body {
			next++
		}
		end := body
		if next < len(ends) {
			end = ends[next]
		} else {
			for end < len(s) && (isAlnum(s[end]) || strings.IndexByte("+/= \t\r\n\\:,-", s[end]) >= 0) {
				end++
			}
		}
		ms = append(ms, match{start: p, end: end, kind: "private-key"})
		off = end
	}
	return ms
}

// ---------------------------------------------------------------------------
// The gateway's own secrets: literal strings.

// minSecret is the shortest secret redacted: a shorter header value
// ("1", "json", a team name) would be found everywhere, and is no
// secret.
const minSecret = 12

type secretDetector struct {
	secrets []string
}

// newSecretDetector keeps the secrets worth looking for: each value, and
// the credentials of an Authorization-style value ("Bearer X": X).
func newSecretDetector(vals []string) *secretDetector {
	d := &secretDetector{}
	add := func(s string) {
		if len(s) >= minSecret {
			for _, have := range d.secrets {
				if have == s {
					return
				}
			}
			d.secrets = append(d.secrets, s)
		}
	}
	for _, v := range vals {
		add(v)
		if _, cred, ok := strings.Cut(v, " "); ok {
			add(strings.TrimSpace(cred))
		}
	}
	// Longest first: where one secret holds another ("Bearer X" and X),
	// the longer is found and the shorter inside it is not counted again.
	slices.SortStableFunc(d.secrets, func(a, b string) int { return len(b) - len(a) })
	return d
}

func (d *secretDetector) kinds() []string { return []string{"gateway-secret"} }

func (d *secretDetector) present(raw []byte, esc bool) bool {
	if esc {
		return len(d.secrets) > 0
	}
	for _, s := range d.secrets {
		if bytes.Contains(raw, []byte(s)) {
			return true
		}
		// A secret with a quote, a backslash or a control character is
		// escaped in JSON: look for it in the strings.
		for i := 0; i < len(s); i++ {
			if s[i] == '"' || s[i] == '\\' || s[i] < 0x20 {
				return true
			}
		}
	}
	return false
}

func (d *secretDetector) find(s string, ms []match, limit int) []match {
	n0 := len(ms)
	for _, sec := range d.secrets {
		for off := 0; len(ms) < limit; {
			k := strings.Index(s[off:], sec)
			if k < 0 {
				break
			}
			m := match{start: off + k, end: off + k + len(sec), kind: "gateway-secret"}
			off += k + len(sec)
			if !inside(ms[n0:], m) {
				ms = append(ms, m)
			}
		}
	}
	return ms
}

// inside reports whether m lies within one of ms (at most the first 64
// looked at: the bound keeps this linear).
func inside(ms []match, m match) bool {
	for i := range min(len(ms), 64) {
		if ms[i].start <= m.start && m.end <= ms[i].end {
			return true
		}
	}
	return false
}

// hasEscapes reports whether raw holds a \u escape of a character a
// detector looks for: a letter, a digit, "-", "_", "@", "+", "=", "/",
// ESC, or anything outside ASCII. Escapes of other characters (the "<",
// ">" and "&" that Go's encoder escapes, quotes, controls) leave raw's
// bytes meaningful.
func hasEscapes(raw []byte) bool {
	for off := 0; ; {
		k := bytes.Index(raw[off:], []byte(`\u`))
		if k < 0 {
			return false
		}
		i := off + k
		off = i + 2
		// An escaped backslash followed by "u" is no escape: count the
		// backslashes before.
		n := 0
		for b := i - 1; b >= 0 && raw[b] == '\\'; b-- {
			n++
		}
		if n%2 == 1 {
			continue
		}
		if i+6 > len(raw) {
			return true
		}
		v := 0
		for _, c := range raw[i+2 : i+6] {
			v <<= 4
			switch {
			case isDigit(c):
				v |= int(c - '0')
			case 'a' <= c && c <= 'f':
				v |= int(c-'a') + 10
			case 'A' <= c && c <= 'F':
				v |= int(c-'A') + 10
			default:
				return true
			}
		}
		if v >= 0x80 || v == 0x1b || v < 0x80 && (isAlnum(byte(v)) || strings.IndexByte("-_@+=/:.", byte(v)) >= 0) {
			return true
		}
	}
}
