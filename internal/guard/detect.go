package guard

import (
	"bytes"
	"math/bits"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
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
	for i := 0; i+1 < len(raw); i++ {
		m := first[raw[i]] & second[raw[i+1]] &^ found
		for m != 0 {
			bit := m & -m
			m &^= bit
			if bytes.HasPrefix(raw[i:], []byte(allLits[bits.TrailingZeros64(bit)])) {
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
// Personal data: one hand-written pass for e-mail addresses, phone
// numbers, payment cards and IBANs.

type piiDetector struct {
	email, phone, card, iban bool
}

func (d *piiDetector) kinds() []string {
	var ks []string
	for _, k := range []struct {
		on   bool
		kind string
	}{{d.email, "email"}, {d.phone, "phone"}, {d.card, "payment-card"}, {d.iban, "iban"}} {
		if k.on {
			ks = append(ks, k.kind)
		}
	}
	return ks
}

func (d *piiDetector) present(raw []byte, esc bool) bool {
	if esc || d.phone || d.card || d.iban {
		return true // digits are everywhere in JSON
	}
	return bytes.IndexByte(raw, '@') >= 0
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isAlnum(c byte) bool {
	return isDigit(c) || isUpper(c) || 'a' <= c && c <= 'z'
}

// piiStart marks the bytes a personal-data match may start at (or, for
// "@", be found from): the rest are skipped in a tight loop.
var piiStart = func() (t [256]bool) {
	for c := range 256 {
		b := byte(c)
		t[c] = isDigit(b) || isUpper(b) || b == '+' || b == '(' || b == '@'
	}
	return t
}()

func (d *piiDetector) find(s string, ms []match, limit int) []match {
	for i := 0; i < len(s) && len(ms) < limit; {
		for i < len(s) && !piiStart[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		c := s[i]
		switch {
		case c == '@' && d.email:
			if a, b, ok := emailAt(s, i); ok {
				ms = append(ms, match{start: a, end: b, kind: "email"})
				i = b
				continue
			}
		case (isDigit(c) || c == '+' || c == '(') && (d.phone || d.card) && (i == 0 || !wordByte(s[i-1])):
			end, kind := number(s, i, d.phone, d.card)
			if kind != "" {
				ms = append(ms, match{start: i, end: end, kind: kind})
			}
			if end > i {
				i = end
				continue
			}
		case isUpper(c) && d.iban && (i == 0 || !isAlnum(s[i-1])):
			if end, ok := ibanAt(s, i); ok {
				ms = append(ms, match{start: i, end: end, kind: "iban"})
				i = end
				continue
			}
		}
		i++
	}
	return ms
}

// wordByte reports bytes a number does not start after: letters,
// digits, and the separators of versions, decimals and identifiers.
func wordByte(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '-' || c == '/' || c == ',' || c == '+'
}

func emailLocal(c byte) bool {
	return isAlnum(c) || strings.IndexByte(".!#$%&'*+/=?^_`{|}~-", c) >= 0
}

// emailAt finds an address around the "@" at s[at]: a local part of at
// most 64 bytes before it, and a domain with a dot and a top-level label
// of two letters or more after it.
func emailAt(s string, at int) (int, int, bool) {
	a := at
	for a > 0 && at-a < 64 && emailLocal(s[a-1]) {
		a--
	}
	for a < at && s[a] == '.' {
		a++
	}
	if a == at {
		return 0, 0, false
	}
	b := at + 1
	for b < len(s) && b-at <= 253 && (isAlnum(s[b]) || s[b] == '.' || s[b] == '-') {
		b++
	}
	for b > at+1 && (s[b-1] == '.' || s[b-1] == '-') {
		b--
	}
	dom := s[at+1 : b]
	dot := strings.LastIndexByte(dom, '.')
	if dot <= 0 || dom[0] == '-' || dom[0] == '.' || strings.Contains(dom, "..") {
		return 0, 0, false
	}
	tld := dom[dot+1:]
	if len(tld) < 2 {
		return 0, 0, false
	}
	for i := 0; i < len(tld); i++ {
		if isDigit(tld[i]) || tld[i] == '-' {
			return 0, 0, false
		}
	}
	return a, b, true
}

// maxNumber bounds the candidate a number is read from: the longest card
// (19 digits) or phone number (15) with its separators fits.
const maxNumber = 32

// number reads the run of digits and separators at s[i] and classifies
// it: a payment card (13 to 19 digits with a known issuer prefix and
// length, passing Luhn's check, separated by single spaces or dashes
// only), a phone number ("+" and 8 to 15 digits, or a North American
// number written 3-3-4 with separators), or nothing. It returns the end
// of the run (past it, whatever it is) and the kind.
func number(s string, i int, phone, card bool) (int, string) {
	var digits [maxNumber]byte
	nd := 0
	j := i
	plus := s[j] == '+'
	if plus {
		j++
	}
	sepKinds := 0 // bit 1: space, 2: dash, 4: dot, 8: parenthesis
	groups := [8]int{}
	ng := 0
	prevSep := true
	for j < len(s) && j-i < maxNumber {
		c := s[j]
		switch {
		case isDigit(c):
			if nd == len(digits) {
				return skipRun(s, j), ""
			}
			digits[nd] = c
			nd++
			if prevSep {
				if ng == len(groups) {
					return skipRun(s, j), ""
				}
				ng++
			}
			groups[ng-1]++
			prevSep = false
			j++
			continue
		case c == ' ' || c == '-' || c == '.' || c == '(' || c == ')':
			if prevSep && !(c == ' ' && j > 0 && s[j-1] == ')') && !(c == '(' && j == i) {
				break // two separators in a row end the run
			}
			if j+1 < len(s) && !isDigit(s[j+1]) && !(c == ')' && s[j+1] == ' ') {
				break
			}
			switch c {
			case ' ':
				sepKinds |= 1
			case '-':
				sepKinds |= 2
			case '.':
				sepKinds |= 4
			default:
				sepKinds |= 8
			}
			prevSep = true
			j++
			continue
		}
		break
	}
	end := j
	for end > i && !isDigit(s[end-1]) && s[end-1] != ')' {
		end--
	}
	if end < len(s) && (isAlnum(s[end]) || s[end] == '_') || j-i >= maxNumber {
		return skipRun(s, j), ""
	}
	d := digits[:nd]
	if card && !plus && sepKinds&^3 == 0 && sepKinds != 3 && isCard(d) {
		return end, "payment-card"
	}
	if phone {
		if plus && nd >= 8 && nd <= 15 && sepKinds&^(1|2|8|4) == 0 {
			return end, "phone"
		}
		if !plus && nd == 10 && sepKinds != 0 && ng == 3 && groups[0] == 3 && groups[1] == 3 && groups[2] == 4 {
			return end, "phone"
		}
	}
	return end, ""
}

// skipRun returns the end of the run of digits and separators at s[j]:
// a run too long to be a card or phone number is none, and no part of it
// is either.
func skipRun(s string, j int) int {
	for j < len(s) && (isAlnum(s[j]) || strings.IndexByte(" -.()_", s[j]) >= 0 && j+1 < len(s) && isDigit(s[j+1])) {
		j++
	}
	return j
}

// isCard reports whether d (ASCII digits) is the number of a card of a
// major scheme: an issuer prefix with its length, and Luhn's check.
func isCard(d []byte) bool {
	n := len(d)
	if n < 13 || n > 19 {
		return false
	}
	p2 := int(d[0]-'0')*10 + int(d[1]-'0')
	p4 := p2*100 + int(d[2]-'0')*10 + int(d[3]-'0')
	ok := false
	switch {
	case d[0] == '4': // Visa
		ok = n == 13 || n == 16 || n == 19
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720: // Mastercard
		ok = n == 16
	case p2 == 34 || p2 == 37: // American Express
		ok = n == 15
	case p2 == 36 || p2 == 38 || p2 == 30: // Diners Club
		ok = n == 14 || n == 16
	case p4 >= 3528 && p4 <= 3589: // JCB
		ok = n >= 16
	case p4 == 6011 || p2 == 65 || p2 == 62 || p4/10 >= 644 && p4/10 <= 649: // Discover, UnionPay
		ok = n >= 16
	}
	return ok && luhn(d)
}

// luhn reports whether the digits d pass the Luhn check.
func luhn(d []byte) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if double {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}

// ibanLengths are the lengths of the IBANs of the countries that issue
// them (ISO 13616 registry).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
	"BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
	"ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
	"HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
	"LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
	"MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
	"RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}

// ibanAt reads an IBAN at s[i]: a country code, two check digits and the
// country's length of upper-case letters and digits in all, written
// compact or in groups separated by single spaces, not followed by a
// letter or digit, passing the mod-97 check (ISO 7064).
func ibanAt(s string, i int) (int, bool) {
	if i+4 > len(s) || !isUpper(s[i+1]) || !isDigit(s[i+2]) || !isDigit(s[i+3]) {
		return 0, false
	}
	want, ok := ibanLengths[s[i:i+2]]
	if !ok {
		return 0, false
	}
	var buf [34]byte
	n := 0
	j := i
	for j < len(s) && n < want {
		c := s[j]
		switch {
		case isUpper(c) || isDigit(c):
			buf[n] = c
			n++
		case c == ' ' && n > 0 && j+1 < len(s) && (isUpper(s[j+1]) || isDigit(s[j+1])) && s[j-1] != ' ':
		default:
			return 0, false
		}
		j++
	}
	if n != want || j < len(s) && isAlnum(s[j]) {
		return 0, false
	}
	// Move the first four characters to the end, read letters as 10..35,
	// and take the remainder by 97 as the digits come.
	rem := 0
	for k := range n {
		c := buf[(k+4)%n]
		if isDigit(c) {
			rem = (rem*10 + int(c-'0')) % 97
		} else {
			rem = (rem*100 + int(c-'A'+10)) % 97
		}
	}
	return j, rem == 1
}

// ---------------------------------------------------------------------------
// Hidden text: characters that a person does not see but a model reads
// (Unicode tag characters), or that hide and reorder what a person sees
// (bidirectional controls, zero-width characters, ANSI escapes).

type hiddenDetector struct {
	tags, bidi, zeroWidth, ansi bool
}

func (d *hiddenDetector) kinds() []string {
	var ks []string
	for _, k := range []struct {
		on   bool
		kind string
	}{{d.tags, "tag-characters"}, {d.bidi, "bidi-control"}, {d.zeroWidth, "zero-width"}, {d.ansi, "ansi-escape"}} {
		if k.on {
			ks = append(ks, k.kind)
		}
	}
	return ks
}

// present: every hidden character is outside ASCII (its UTF-8 starts with
// one of these bytes) or is ESC, which JSON always escapes.
func (d *hiddenDetector) present(raw []byte, esc bool) bool {
	if esc || bytes.IndexByte(raw, 0xe2) >= 0 || bytes.IndexByte(raw, 0xf3) >= 0 {
		return true // U+200B-U+206F, U+E0000-U+E007F
	}
	for _, r := range []string{"\u009b", "\u061c", "\u180e", "\ufeff"} {
		if bytes.Contains(raw, []byte(r)) {
			return true
		}
	}
	return false
}

// hiddenKind returns the kind of hidden character r is, or "".
func (d *hiddenDetector) hiddenKind(r rune) string {
	switch {
	case r >= 0xE0000 && r <= 0xE007F:
		if d.tags {
			return "tag-characters"
		}
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
		if d.bidi {
			return "bidi-control"
		}
	case r >= 0x200B && r <= 0x200D, r >= 0x2060 && r <= 0x2064, r == 0xFEFF, r == 0x180E:
		if d.zeroWidth {
			return "zero-width"
		}
	}
	return ""
}

func (d *hiddenDetector) find(s string, ms []match, limit int) []match {
	for i := 0; i < len(s) && len(ms) < limit; {
		c := s[i]
		if c < 0x80 && c != 0x1b {
			i++
			continue
		}
		if c == 0x1b || c == 0xc2 && i+1 < len(s) && s[i+1] == 0x9b {
			if !d.ansi {
				i++
				continue
			}
			end := ansiEnd(s, i)
			ms = appendRun(ms, i, end, "ansi-escape")
			i = end
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if k := d.hiddenKind(r); k != "" {
			ms = appendRun(ms, i, i+n, k)
		}
		i += n
	}
	return ms
}

// appendRun appends a match, or extends the last one when it is of the
// same kind and ends where this one starts: a run of hidden characters
// is one finding.
func appendRun(ms []match, start, end int, kind string) []match {
	if n := len(ms); n > 0 && ms[n-1].end == start && ms[n-1].kind == kind {
		ms[n-1].end = end
		return ms
	}
	return append(ms, match{start: start, end: end, kind: kind})
}

// maxEscape bounds an OSC or other string sequence: past it, only its
// introducer is taken.
const maxEscape = 512

// ansiEnd returns the end of the escape sequence at s[i] (ESC or the C1
// CSI U+009B): a CSI sequence to its final byte, an OSC, DCS, SOS, PM or
// APC string to its BEL or ST, or ESC and the one byte after it.
func ansiEnd(s string, i int) int {
	j := i + 1
	if s[i] == 0xc2 { // U+009B: CSI
		j = i + 2
		return csiEnd(s, j)
	}
	if j >= len(s) {
		return j
	}
	switch s[j] {
	case '[':
		return csiEnd(s, j+1)
	case ']', 'P', 'X', '^', '_':
		for k := j + 1; k < len(s) && k-i < maxEscape; k++ {
			if s[k] == 0x07 {
				return k + 1
			}
			if s[k] == 0x1b && k+1 < len(s) && s[k+1] == '\\' {
				return k + 2
			}
		}
		return j + 1
	}
	if s[j] >= 0x20 && s[j] < 0x7f {
		return j + 1
	}
	return j
}

// csiEnd returns the end of a CSI sequence whose parameters start at
// s[j]: parameter bytes 0x30-0x3F, intermediates 0x20-0x2F, one final
// byte 0x40-0x7E. A sequence cut short ends where it stops.
func csiEnd(s string, j int) int {
	start := j
	for j < len(s) && j-start < maxEscape && s[j] >= 0x30 && s[j] <= 0x3f {
		j++
	}
	for j < len(s) && j-start < maxEscape && s[j] >= 0x20 && s[j] <= 0x2f {
		j++
	}
	if j < len(s) && s[j] >= 0x40 && s[j] <= 0x7e {
		j++
	}
	return j
}

// ---------------------------------------------------------------------------
// Instructions aimed at the model: phrases, without regard to ASCII case.

type phraseDetector struct {
	phrases []string // lower-cased
}

// defaultPhrases are phrases of the tool-poisoning and prompt-injection
// attacks published against MCP: instructions to the model that a tool
// definition has no business giving.
var defaultPhrases = []string{
	"ignore previous instructions", "ignore all previous instructions", "ignore the previous instructions",
	"ignore prior instructions", "disregard previous instructions", "disregard all previous",
	"forget your instructions", "ignore your instructions", "new instructions:",
	"do not tell the user", "don't tell the user", "do not mention this", "don't mention this",
	"without telling the user", "without informing the user", "the user must not know",
	"<important>", "</important>", "<system>", "[system]", "system prompt",
	"before using this tool", "before calling this tool", "instead of the user",
	"you are now", "act as if", "~/.ssh", "id_rsa", ".env file", "mcp.json",
}

func newPhraseDetector(phrases []string) *phraseDetector {
	d := &phraseDetector{}
	for _, p := range phrases {
		if p = asciiLower(p); p != "" {
			d.phrases = append(d.phrases, p)
		}
	}
	return d
}

func (d *phraseDetector) kinds() []string { return []string{"instructions"} }

func (d *phraseDetector) present(raw []byte, esc bool) bool { return true }

func (d *phraseDetector) find(s string, ms []match, limit int) []match {
	low := asciiLower(s) // the same length: offsets carry over
	for _, p := range d.phrases {
		for off := 0; len(ms) < limit; {
			k := strings.Index(low[off:], p)
			if k < 0 {
				break
			}
			ms = append(ms, match{start: off + k, end: off + k + len(p), kind: "instructions"})
			off += k + len(p)
		}
	}
	return ms
}

// asciiLower lower-cases the ASCII letters of s, leaving every other byte
// as it is, so that byte offsets in the result are offsets in s.
func asciiLower(s string) string {
	i := 0
	for i < len(s) && !isUpper(s[i]) {
		i++
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if isUpper(b[i]) {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
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
