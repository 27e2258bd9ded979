// Package glob matches the patterns of tenant rules against the original
// names and URIs of upstream items.
//
// The syntax is path.Match's, with one difference: '*' matches any run of
// characters, '/' included, because rules are written for URIs as much as
// for names, and "repo://acme/*" is meant to cover everything under
// repo://acme/. '?' matches one character, '[...]' a character class, and
// '\' escapes the next character.
package glob

import (
	"path"
	"unicode/utf8"
)

// Match reports whether name matches pattern. A malformed pattern (see
// [Valid]) matches nothing.
func Match(pattern, name string) bool {
	// Iterative matching with single-star backtracking: linear in practice
	// and never exponential, whatever the pattern.
	var starP, starN = -1, 0
	p, n := 0, 0
	for n < len(name) {
		if p < len(pattern) {
			switch c := pattern[p]; c {
			case '*':
				starP, starN = p, n
				p++
				continue
			case '?':
				_, w := utf8.DecodeRuneInString(name[n:])
				p, n = p+1, n+w
				continue
			case '[':
				end := classEnd(pattern, p)
				if end < 0 {
					return false
				}
				r, w := utf8.DecodeRuneInString(name[n:])
				if ok, err := path.Match(pattern[p:end], string(r)); err == nil && ok {
					p, n = end, n+w
					continue
				}
			case '\\':
				if p+1 < len(pattern) && pattern[p+1] == name[n] {
					p, n = p+2, n+1
					continue
				}
			default:
				if c == name[n] {
					p, n = p+1, n+1
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last star absorb one more byte and retry.
		starN++
		p, n = starP+1, starN
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// classEnd returns the index just past the ']' closing the class that starts
// at pattern[i], or -1.
func classEnd(pattern string, i int) int {
	j := i + 1
	if j < len(pattern) && pattern[j] == '^' {
		j++
	}
	if j < len(pattern) && pattern[j] == ']' {
		j++ // a leading ']' is literal
	}
	for j < len(pattern) {
		switch pattern[j] {
		case '\\':
			j += 2
			continue
		case ']':
			return j + 1
		}
		j++
	}
	return -1
}

// Valid reports whether pattern is well formed.
func Valid(pattern string) error {
	_, err := path.Match(pattern, "")
	return err
}

// HasMeta reports whether pattern has any metacharacter, as opposed to
// being a literal name.
func HasMeta(pattern string) bool {
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}
