package guard

// Detectors of personal data, hidden text and instructions aimed at the
// model: the content detectors that are not credentials.

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

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
